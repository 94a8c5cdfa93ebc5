//! File data written by someone else (a cluster client, DESIGN.md §7): the
//! metadata server hands out a file's layout (which block holds each page), and
//! commits extents whose pages a client already stored, with their persistence
//! done, into blocks the server delegated to it. A commit is the second half of a
//! page CoW write (`cow`): log entries that map the blocks, the tail, then the
//! superseded blocks freed.

use super::{DataPlane, MAX_FILE_SIZE};
use crate::addr::{page_of, page_start};
use crate::error::{FsError, Result};
use crate::format::BLOCK;
use crate::inode::Inode;
use crate::space::Run;
use crate::types::*;
use std::sync::Arc;

/// A file's layout over a range of pages: its size and, per page, the block that
/// holds it (0: a hole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The file's size when the layout was taken.
    pub size: u64,
    /// The first page described.
    pub first: u64,
    /// Block of each page from `first` on (0: hole).
    pub blocks: Vec<u64>,
}

/// The most pages one layout request describes.
pub const LAYOUT_MAX_PAGES: u64 = 1 << 16;

impl DataPlane {
    /// The layout of pages `[first, first + n)` of a regular file (`n` capped at
    /// [`LAYOUT_MAX_PAGES`] and at the file's last page), under the shared range lock
    /// of the pages it describes (only those: not the pages past the end of file). Only a mount without a small-write mode hands out layouts:
    /// LAWN keeps the newest bytes of a page in its zone, where a reader of the block
    /// would not look.
    pub fn layout(&self, inode: &Arc<Inode>, first: u64, n: u64) -> Result<Layout> {
        if !matches!(self.small, super::SmallWrite::Cow) {
            return Err(FsError::Unsupported(
                "layouts of a mount with a small-write mode",
            ));
        }
        if inode.kind != FileKind::Regular {
            return Err(if inode.kind == FileKind::Directory {
                FsError::IsDir
            } else {
                FsError::Invalid("layout of a special file")
            });
        }
        let n = n.min(LAYOUT_MAX_PAGES);
        let lo = page_start(first.min(page_of(MAX_FILE_SIZE)));
        let hi = lo
            .saturating_add(n.saturating_mul(BLOCK))
            .min(MAX_FILE_SIZE);
        // Only the pages the file has are locked (a small file's layout asked for
        // many pages takes a few segments, not `n`): the end follows the size read
        // before locking, and again if the file grew meanwhile, the third time to `hi`.
        let cap = |size: u64| {
            hi.min(size.saturating_add(BLOCK - 1) / BLOCK * BLOCK)
                .max(lo + 1)
        };
        let mut end = cap(inode.index.size());
        let mut attempt = 0;
        loop {
            let _r = inode.data.read(lo, end);
            if inode.index.dead() {
                return Err(FsError::NotFound);
            }
            let size = inode.index.size();
            if end < hi && cap(size) > end {
                // The file grew past the locked pages while this waited.
                end = if attempt == 1 { hi } else { cap(size) };
                attempt += 1;
                continue;
            }
            let last = size.div_ceil(BLOCK);
            let first = page_of(lo);
            let stop = page_of(end.min(hi).saturating_add(BLOCK - 1))
                .min(last)
                .max(first);
            return Ok(Layout {
                size,
                first,
                blocks: (first..stop).map(|pg| inode.index.get(pg)).collect(),
            });
        }
    }

    /// Commits `runs` (fresh blocks whose contents are already durable, in page
    /// order) as pages `first..` of a regular file whose bytes now reach at least
    /// `end`. The blocks are consumed: mapped on success, freed on failure; the
    /// blocks they replace are freed.
    pub fn commit_extent(
        &self,
        inode: &Arc<Inode>,
        first: u64,
        end: u64,
        runs: &[Run],
    ) -> Result<()> {
        let pages: u64 = runs.iter().map(|r| r.1).sum();
        let bad = pages == 0
            || end > MAX_FILE_SIZE
            || first
                .checked_add(pages)
                .is_none_or(|e| e > page_of(MAX_FILE_SIZE - 1) + 1)
            || end <= page_start(first)
            || end > page_start(first + pages);
        if bad {
            self.store.space.free_runs(runs);
            return Err(FsError::Invalid("extent does not match its pages"));
        }
        let _w = inode
            .data
            .write(page_start(first), page_start(first + pages));
        if inode.kind != FileKind::Regular {
            self.store.space.free_runs(runs);
            return Err(FsError::Invalid("extent of a special file"));
        }
        if self.lock == LockMode::Inode {
            self.commit_write_locked(inode, first, end, runs)
        } else {
            self.commit_write_concurrent(inode, first, end, runs)
        }
    }
}
