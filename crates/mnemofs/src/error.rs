//! Engine errors. Each maps to the errno a Linux file system returns for the misuse
//! (`FsError::errno`); the FUSE adapter uses that mapping and nothing else.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("file name too long (max 255 bytes)")]
    NameTooLong,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("no space left on device")]
    NoSpace,
    #[error("too many links")]
    TooManyLinks,
    #[error("file too large")]
    TooBig,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("operation not supported: {0}")]
    Unsupported(&'static str),
    #[error("stale inode {0}")]
    Stale(u64),
    #[error("busy")]
    Busy,
    #[error("too many symbolic links")]
    Loop,
    #[error("file system is corrupted: {0}")]
    Corrupt(String),
    #[error("not a mnemofs image: {0}")]
    NotMnemofs(String),
    #[error("image too small: {size} bytes, the minimum is {min} bytes")]
    ImageTooSmall { size: u64, min: u64 },
    #[error("{path} already holds a mnemofs file system (use --force to overwrite)")]
    AlreadyFormatted { path: PathBuf },
    #[error(transparent)]
    Pm(#[from] pm::PmError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl FsError {
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
            FsError::NoSpace => libc::ENOSPC,
            FsError::TooManyLinks => libc::EMLINK,
            FsError::TooBig => libc::EFBIG,
            FsError::NotPermitted => libc::EPERM,
            FsError::Unsupported(_) => libc::EOPNOTSUPP,
            FsError::Stale(_) => libc::ESTALE,
            FsError::Busy => libc::EBUSY,
            FsError::Loop => libc::ELOOP,
            FsError::Corrupt(_) | FsError::NotMnemofs(_) => libc::EIO,
            FsError::ImageTooSmall { .. } => libc::EINVAL,
            FsError::AlreadyFormatted { .. } => libc::EEXIST,
            FsError::Pm(pm::PmError::Busy { .. }) => libc::EBUSY,
            FsError::Pm(_) => libc::EIO,
            FsError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

pub type Result<T> = std::result::Result<T, FsError>;
