//! fsck: checks an image without changing it.

use crate::error::Result;
use serde::Serialize;
use std::path::Path;

/// What fsck found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FsckReport {
    /// One line per problem, naming what is wrong and where.
    pub problems: Vec<String>,
    pub inodes: u64,
    pub directories: u64,
    pub files: u64,
    pub log_pages: u64,
    pub data_pages: u64,
    pub free_blocks: u64,
    pub clean_unmount: bool,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the image at `path` read-only. `Err` means the input is unusable (not a
/// mnemofs, unreadable); problems inside a mnemofs are listed in the report.
pub fn fsck(path: &Path) -> Result<FsckReport> {
    let _ = path;
    todo!()
}
