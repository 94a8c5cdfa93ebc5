//! The gRPC payload codec: serde types encoded with postcard. gRPC (tonic) does the
//! framing, the HTTP/2 streams and the status codes; this only turns one message
//! into bytes and back.

use bytes::{Buf, BufMut};
use serde::{de::DeserializeOwned, Serialize};
use std::marker::PhantomData;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// A [`Codec`] for `T` out, `U` in (the generated service names it by path).
#[derive(Debug)]
pub struct PostcardCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for PostcardCodec<T, U> {
    fn default() -> Self {
        PostcardCodec(PhantomData)
    }
}

/// Encodes `T`.
#[derive(Debug)]
pub struct PostcardEncoder<T>(PhantomData<T>);

/// Decodes `U`.
#[derive(Debug)]
pub struct PostcardDecoder<U>(PhantomData<U>);

impl<T: Serialize> Encoder for PostcardEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let bytes = postcard::to_allocvec(&item)
            .map_err(|e| Status::internal(format!("encoding a message: {e}")))?;
        dst.put_slice(&bytes);
        Ok(())
    }
}

impl<U: DeserializeOwned> Decoder for PostcardDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("decoding a message: {e}")))
    }
}

impl<T, U> Codec for PostcardCodec<T, U>
where
    T: Serialize + Send + 'static,
    U: DeserializeOwned + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = PostcardEncoder<T>;
    type Decoder = PostcardDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        PostcardEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        PostcardDecoder(PhantomData)
    }
}

#[cfg(test)]
mod tests {
    use crate::proto::{CommitBatch, ExtentCommit};

    #[test]
    fn a_message_round_trips() {
        let b = CommitBatch {
            client: 7,
            seq: 3,
            commits: vec![ExtentCommit {
                ino: 12,
                first: 5,
                end: 5 * 4096 + 100,
                runs: vec![(900, 2)],
                expect: vec![(5, 77)],
                dropped: 42,
                keep: true,
            }],
            after: vec![crate::proto::MetaReq::Release { ino: 12 }],
        };
        let bytes = postcard::to_allocvec(&b).unwrap();
        let back: CommitBatch = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, b);
        // A truncated message is an error, not a panic.
        assert!(postcard::from_bytes::<CommitBatch>(&bytes[..bytes.len() - 1]).is_err());
    }
}
