//! Engine errors. Each maps to the errno a Linux file system returns for the misuse
//! (`FsError::errno`); the FUSE adapter uses that mapping and nothing else.

use std::path::PathBuf;

/// An engine error; [`FsError::errno`] gives its errno.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// No such file or directory (ENOENT).
    #[error("no such file or directory")]
    NotFound,
    /// The name already exists (EEXIST).
    #[error("file exists")]
    Exists,
    /// A directory was expected (ENOTDIR).
    #[error("not a directory")]
    NotDir,
    /// The operation does not apply to a directory (EISDIR).
    #[error("is a directory")]
    IsDir,
    /// The directory still has entries (ENOTEMPTY).
    #[error("directory not empty")]
    NotEmpty,
    /// A name is longer than `NAME_MAX` bytes (ENAMETOOLONG).
    #[error("file name too long (max 255 bytes)")]
    NameTooLong,
    /// An invalid argument, with what was wrong (EINVAL).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// No free data block or inode (ENOSPC).
    #[error("no space left on device")]
    NoSpace,
    /// The link count would overflow (EMLINK).
    #[error("too many links")]
    TooManyLinks,
    /// The file would exceed the largest size (EFBIG).
    #[error("file too large")]
    TooBig,
    /// An argument is longer than Linux takes, e.g. an xattr value over 64 KiB (E2BIG).
    #[error("argument list too long")]
    ArgTooBig,
    /// The operation is not permitted on this inode (EPERM).
    #[error("operation not permitted")]
    NotPermitted,
    /// Permission denied (EACCES).
    #[error("permission denied")]
    AccessDenied,
    /// The operation or mode is not supported, with which (EOPNOTSUPP).
    #[error("operation not supported: {0}")]
    Unsupported(&'static str),
    /// The inode number no longer names a live inode (ESTALE).
    #[error("stale inode {0}")]
    Stale(u64),
    /// The resource is in use (EBUSY).
    #[error("busy")]
    Busy,
    /// The file system is mounted read-only (EROFS).
    #[error("read-only file system")]
    ReadOnly,
    /// Too many symbolic links (ELOOP).
    #[error("too many symbolic links")]
    Loop,
    /// No such extended attribute (ENODATA).
    #[error("no such attribute")]
    NoData,
    /// A buffer or name is out of range (ERANGE).
    #[error("result out of range")]
    Range,
    /// The image is corrupt, with what was found (EIO).
    #[error("file system is corrupted: {0}")]
    Corrupt(String),
    /// The image holds no mnemofs file system, with why (EIO).
    #[error("not a mnemofs image: {0}")]
    NotMnemofs(String),
    /// The image is smaller than the layout needs (EINVAL).
    #[error("image too small: {size} bytes, the minimum is {min} bytes")]
    ImageTooSmall {
        /// Bytes of the image.
        size: u64,
        /// Bytes the layout needs at least.
        min: u64,
    },
    /// mkfs without `force` over an existing mnemofs (EEXIST).
    #[error("{path} already holds a mnemofs file system (use --force to overwrite)")]
    AlreadyFormatted {
        /// The image.
        path: PathBuf,
    },
    /// The devices given do not form the volume: missing, foreign, duplicated or
    /// unreadable, with a line naming the device (EINVAL).
    #[error("volume: {0}")]
    Volume(String),
    /// An error of the PM layer (EBUSY if the image is locked, else EIO).
    #[error(transparent)]
    Pm(#[from] pm::PmError),
    /// An I/O error (its errno, else EIO).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl self::FsError {
    /// The errno for this error (positive value).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::NameTooLong => libc::ENAMETOOLONG,
            FsError::Invalid(_) => libc::EINVAL,
            FsError::AccessDenied => libc::EACCES,
            FsError::NoSpace => libc::ENOSPC,
            FsError::TooManyLinks => libc::EMLINK,
            FsError::TooBig => libc::EFBIG,
            FsError::ArgTooBig => libc::E2BIG,
            FsError::NotPermitted => libc::EPERM,
            FsError::Unsupported(_) => libc::EOPNOTSUPP,
            FsError::Stale(_) => libc::ESTALE,
            FsError::Busy => libc::EBUSY,
            FsError::ReadOnly => libc::EROFS,
            FsError::Loop => libc::ELOOP,
            FsError::NoData => libc::ENODATA,
            FsError::Range => libc::ERANGE,
            FsError::Corrupt(_) | FsError::NotMnemofs(_) => libc::EIO,
            FsError::ImageTooSmall { .. } | FsError::Volume(_) => libc::EINVAL,
            FsError::AlreadyFormatted { .. } => libc::EEXIST,
            FsError::Pm(pm::PmError::Busy { .. }) => libc::EBUSY,
            FsError::Pm(_) => libc::EIO,
            FsError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, FsError>;
