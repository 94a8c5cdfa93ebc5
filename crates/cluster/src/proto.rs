//! The messages between clients and the metadata server (docs/CLUSTER.md has the
//! protocol and the order of persistence on each side). Errors travel as errnos,
//! the one mapping every frontend uses (`FsError::errno`).

use mnemofs::{Attr, DirEntry, Ino, NewNode, RenameFlags, SetAttr, StatFs};
use serde::{Deserialize, Serialize};

/// A run of blocks: (first global block, count).
pub type Run = (u64, u64);

/// Opens a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The UUID of the volume the client mapped (checked against the server's).
    pub uuid: Option<[u8; 16]>,
}

/// A session the server opened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The client's id (never reused by this server instance).
    pub client: u64,
    /// The lease: the client writes into delegated space only while its last renewal
    /// sent is younger than this, and the server reclaims that space once it has
    /// heard nothing for longer.
    pub lease_ms: u64,
    /// Blocks of one delegated chunk.
    pub chunk_blocks: u64,
    /// This server instance (a restart changes it).
    pub instance: u64,
}

/// Names a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRef {
    /// The client's id.
    pub client: u64,
}

/// The answer to a renewal: `ok` false when the session is gone (expired, or the
/// server restarted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReply {
    /// Whether the session is alive.
    pub ok: bool,
}

/// A namespace or attribute call, as the engine interface has them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum MetaReq {
    Lookup {
        parent: Ino,
        name: Vec<u8>,
    },
    Getattr {
        ino: Ino,
    },
    Setattr {
        ino: Ino,
        attr: SetAttr,
    },
    /// `pin`: the new file comes pinned for the caller (its first open needs no
    /// call: NFSv4's OPEN with create).
    Create {
        parent: Ino,
        name: Vec<u8>,
        mode: u32,
        uid: u32,
        gid: u32,
        pin: bool,
    },
    Mkdir {
        parent: Ino,
        name: Vec<u8>,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    Mknod {
        parent: Ino,
        name: Vec<u8>,
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    },
    CreateNode {
        parent: Ino,
        name: Vec<u8>,
        node: NewNode,
        pin: bool,
    },
    Symlink {
        parent: Ino,
        name: Vec<u8>,
        target: Vec<u8>,
        uid: u32,
        gid: u32,
    },
    Readlink {
        ino: Ino,
    },
    Getxattr {
        ino: Ino,
        name: Vec<u8>,
    },
    Listxattr {
        ino: Ino,
    },
    Setxattr {
        ino: Ino,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: i32,
    },
    Removexattr {
        ino: Ino,
        name: Vec<u8>,
    },
    Unlink {
        parent: Ino,
        name: Vec<u8>,
    },
    Rmdir {
        parent: Ino,
        name: Vec<u8>,
    },
    Link {
        ino: Ino,
        parent: Ino,
        name: Vec<u8>,
    },
    Rename {
        parent: Ino,
        name: Vec<u8>,
        newparent: Ino,
        newname: Vec<u8>,
        flags: RenameFlags,
    },
    Readdir {
        ino: Ino,
        offset: u64,
        max: u64,
    },
    Fallocate {
        ino: Ino,
        offset: u64,
        len: u64,
        mode: i32,
    },
    Open {
        ino: Ino,
    },
    Release {
        ino: Ino,
    },
    Remember {
        ino: Ino,
    },
    Forget {
        ino: Ino,
        n: u64,
    },
    Fsync {
        ino: Ino,
    },
    Statfs,
    // (New variants go last: postcard numbers them in order.)
    /// `Open`, and the layout of pages `[first, first + n)` with it (as `Layout`
    /// gives it, for the read that usually follows an open): one round trip.
    OpenLayout {
        ino: Ino,
        first: u64,
        n: u64,
    },
    /// `Lookup`, and for a regular file the layout of its first 1024 pages with it
    /// (answered `Found`; other kinds `Attr`). Delayed commit sends it: with the
    /// layout held, an open of the file that follows needs no call (see
    /// `RecallAck::opens`).
    LookupLayout {
        parent: Ino,
        name: Vec<u8>,
    },
}

/// A [`MetaReq`] of a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaCall {
    /// The caller's session.
    pub client: u64,
    /// The call.
    pub req: MetaReq,
}

/// What a [`MetaReq`] returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum MetaReply {
    Attr(Attr),
    Unit,
    Bytes(Vec<u8>),
    Dir(Vec<DirEntry>),
    Statfs(StatFs),
    /// The call failed with this errno (and the server's words for it).
    Err(i32, String),
    // (New variants go last: postcard numbers them in order.)
    /// `OpenLayout`: the file is open, and its layout. A file without one (not a
    /// regular file) answers `Unit`.
    Layout(LayoutGrant),
    /// `Create` with `pin`: the new file, and its layout (empty unless another
    /// client wrote it already), so that the creator's first write needs no layout
    /// call.
    Created {
        attr: Attr,
        layout: LayoutGrant,
    },
    /// `LookupLayout` of a regular file: its attributes and its layout.
    Found {
        attr: Attr,
        layout: LayoutGrant,
    },
}

/// Asks for the layout of pages `[first, first + n)` of a file; the server
/// remembers that the client holds it and recalls it before another client's
/// commit or a truncation changes the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutReq {
    /// The caller's session.
    pub client: u64,
    /// The file.
    pub ino: Ino,
    /// First page.
    pub first: u64,
    /// Pages.
    pub n: u64,
}

/// A layout: the file's size and the block of each page from `first` on (0: hole;
/// pages past the end of file are left out), and the grant it was given under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutGrant {
    /// File size.
    pub size: u64,
    /// First page described.
    pub first: u64,
    /// Block per page.
    pub blocks: Vec<u64>,
    /// The grant's number: larger than that of every earlier grant of this
    /// server (an `ExtentCommit::dropped` names the newest a client had).
    pub grant: u64,
}

/// The answer to a [`LayoutReq`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutReply {
    /// The layout.
    Ok(LayoutGrant),
    /// The errno.
    Err(i32, String),
}

/// Asks for `blocks` blocks of space to write into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateReq {
    /// The caller's session.
    pub client: u64,
    /// Blocks wanted.
    pub blocks: u64,
}

/// Space delegated to a client, or the errno.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DelegateReply {
    /// The runs.
    Ok(Vec<Run>),
    /// The errno.
    Err(i32, String),
}

/// One file's commit: delegated blocks `runs`, whose contents the client made
/// durable, become pages `first..` of file `ino`, whose bytes then reach at least
/// `end`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtentCommit {
    /// The file.
    pub ino: Ino,
    /// First page.
    pub first: u64,
    /// End of the written bytes.
    pub end: u64,
    /// The blocks, in page order.
    pub runs: Vec<Run>,
    /// Pages the client merged with their old contents, and the block it read them
    /// from (0: a hole): the commit applies only if each still maps there.
    pub expect: Vec<(u64, u64)>,
    /// The client dropped its cached layout of the file before sending this
    /// commit, and the newest layout grant of the file it had received then was
    /// this one (0: no such promise). The server then does not recall the layouts
    /// of the file it granted this client up to that number: the client holds none
    /// of them (its own commit would otherwise recall it and wait a round trip).
    pub dropped: u64,
    /// The client has the file open on its own account, opens the server has not
    /// been told of (see `RecallAck::opens`): a `dropped` promise then leaves it
    /// among the file's holders all the same, so that a call that would free the
    /// file still recalls it first and learns of them.
    pub keep: bool,
}

/// A compound commit: several files' commits in one message. `seq` numbers a
/// session's batches: a resent batch is applied once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitBatch {
    /// The caller's session.
    pub client: u64,
    /// Sequence number of the batch in the session (from 1).
    pub seq: u64,
    /// The commits, applied in order.
    pub commits: Vec<ExtentCommit>,
    /// Calls applied after the commits: only `Release` and `Forget` (dropping pins
    /// need not wait, so a delayed-commit client sends them here).
    pub after: Vec<MetaReq>,
}

/// The result of each commit of a batch: 0, or the errno (`EAGAIN`: a merged page
/// changed meanwhile; the blocks stay the client's, to merge again and recommit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitReply {
    /// Per commit.
    pub results: Vec<i32>,
    /// Requests the server was serving when this one was applied (this one
    /// included): its load, for the client's compound degree.
    pub busy: u32,
}

/// The server recalls the client's layout of a file (another client's commit, a
/// truncation or a hole punch is about to replace its blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recall {
    /// The file.
    pub ino: Ino,
    /// The recall's id, to acknowledge.
    pub id: u64,
}

/// The client dropped a recalled layout and no read of it is in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallAck {
    /// The caller's session.
    pub client: u64,
    /// The recall's id.
    pub id: u64,
    /// Delayed commit: opens of the file the client made on its own while it held
    /// the layout, not sent (each one an open's pin the server takes now, before
    /// the recalling call goes on: an unlink then leaves the file to its opens).
    pub opens: u32,
}
