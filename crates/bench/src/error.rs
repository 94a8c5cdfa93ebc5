//! Errors of the benchmark harness: one line each.

use std::path::PathBuf;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A message for the user (bad parameter, missing tool, ...).
    #[error("{0}")]
    Msg(String),
    /// The engine failed.
    #[error("{what}: {source}")]
    Fs {
        what: String,
        #[source]
        source: mnemofs::FsError,
    },
    /// A file or directory operation failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl BenchError {
    pub fn msg(m: impl Into<String>) -> BenchError {
        BenchError::Msg(m.into())
    }

    pub fn fs(what: impl Into<String>, source: mnemofs::FsError) -> BenchError {
        BenchError::Fs {
            what: what.into(),
            source,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result of the harness.
pub type BenchResultT<T> = Result<T, BenchError>;
