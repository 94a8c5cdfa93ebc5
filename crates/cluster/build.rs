//! Generates the metadata server's gRPC service (server and client stubs) with
//! tonic-build's manual builder: the messages are Rust types (`src/proto.rs`)
//! carried by a serde codec (`src/codec.rs`), so no protoc is needed.

fn main() {
    let codec = "crate::codec::PostcardCodec";
    let unary = |name: &str, route: &str, input: &str, output: &str| {
        tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("crate::proto::{input}"))
            .output_type(format!("crate::proto::{output}"))
            .codec_path(codec)
            .build()
    };
    let watch = tonic_build::manual::Method::builder()
        .name("watch")
        .route_name("Watch")
        .input_type("crate::proto::SessionRef")
        .output_type("crate::proto::Recall")
        .codec_path(codec)
        .server_streaming()
        .build();
    let service = tonic_build::manual::Service::builder()
        .name("Mds")
        .package("mnemofs.cluster")
        .method(unary("hello", "Hello", "Hello", "Session"))
        .method(unary("renew", "Renew", "SessionRef", "LeaseReply"))
        .method(unary("bye", "Bye", "SessionRef", "LeaseReply"))
        .method(unary("meta", "Meta", "MetaCall", "MetaReply"))
        .method(unary("layout", "Layout", "LayoutReq", "LayoutReply"))
        .method(unary(
            "delegate",
            "Delegate",
            "DelegateReq",
            "DelegateReply",
        ))
        .method(unary("commit", "Commit", "CommitBatch", "CommitReply"))
        .method(unary("recalled", "Recalled", "RecallAck", "LeaseReply"))
        .method(watch)
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
}
