//! Which pages map the region: 2 MiB (PMD) or 4 KiB, measured from
//! `/proc/self/smaps`, never assumed.
//!
//! The region is mapped 2 MiB aligned and advised `MADV_HUGEPAGE` ([`Pm::open`],
//! [`Pm::create`]); whether the kernel then maps it with 2 MiB pages depends on what
//! backs the image: a tmpfs mounted `huge=within_size`/`always` (or `huge=advise`,
//! which the advice satisfies), hugetlbfs, or a DAX device's own PMD mappings do; a
//! tmpfs mounted without `huge=` (the usual `/dev/shm`) does not, and then the region
//! works the same with 4 KiB pages. [`Pm::map_report`] tells which happened.

use super::{MapMode, Pm};
use std::fmt;

/// The alignment the region is mapped at: one PMD (2 MiB on x86-64).
pub(super) const HUGE_ALIGN: usize = 2 << 20;

/// Page size the kernel maps the region with, as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapPages {
    /// Resident bytes are mapped by 2 MiB (PMD) entries, all or some of them
    /// ([`MapReport::pmd_bytes`] says how many).
    Huge2M,
    /// Resident bytes are mapped by 4 KiB entries only.
    Small4K,
    /// Nothing measured: no byte resident yet, or smaps unreadable
    /// ([`MapReport::note`] says which). A device-DAX or fs-DAX mapping whose PFNs
    /// smaps does not count also lands here.
    Unknown,
}

impl MapPages {
    /// Short name: `2M`, `4K` or `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            MapPages::Huge2M => "2M",
            MapPages::Small4K => "4K",
            MapPages::Unknown => "unknown",
        }
    }
}

/// How the region is mapped, measured from `/proc/self/smaps` over its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapReport {
    /// The page size the resident bytes are mapped with.
    pub pages: MapPages,
    /// Bytes of the mapping.
    pub len: u64,
    /// Bytes of it resident (`Rss`, plus hugetlb pages, which `Rss` leaves out).
    pub resident_bytes: u64,
    /// Bytes of it mapped by PMD entries (`ShmemPmdMapped`, `FilePmdMapped`,
    /// `AnonHugePages`, and hugetlb pages of 2 MiB or more).
    pub pmd_bytes: u64,
    /// The mapping starts on a 2 MiB boundary.
    pub aligned_2m: bool,
    /// `madvise(MADV_HUGEPAGE)` was accepted on it.
    pub huge_advised: bool,
    /// Why nothing was measured ([`MapPages::Unknown`]).
    pub note: Option<String>,
}

fn mib(b: u64) -> String {
    let m = b as f64 / (1u64 << 20) as f64;
    if m >= 10.0 || m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.1}")
    }
}

impl fmt::Display for MapReport {
    /// `2 MiB pages (62 of 64 MiB resident PMD-mapped)`, `4 KiB pages (64 MiB
    /// resident, none PMD-mapped)` or `page size unknown (...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pages {
            MapPages::Huge2M => write!(
                f,
                "2 MiB pages ({} of {} MiB resident PMD-mapped)",
                mib(self.pmd_bytes),
                mib(self.resident_bytes)
            ),
            MapPages::Small4K => write!(
                f,
                "4 KiB pages ({} MiB resident, none PMD-mapped)",
                mib(self.resident_bytes)
            ),
            MapPages::Unknown => write!(
                f,
                "page size unknown ({})",
                self.note.as_deref().unwrap_or("nothing resident")
            ),
        }
    }
}

/// Sums of the smaps fields of the mappings inside one address range (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct SmapsSum {
    /// Mappings (VMAs) found in the range.
    pub vmas: u32,
    pub rss: u64,
    pub pmd: u64,
    pub hugetlb: u64,
    /// Largest `KernelPageSize` seen.
    pub kernel_page: u64,
}

/// Sums the fields of every mapping of `smaps` (the text of `/proc/PID/smaps`) that
/// lies inside `[start, end)`. A mapping only partly inside counts whole (the
/// region's own mapping never straddles its ends: it was made for exactly them).
pub(super) fn parse_smaps(smaps: &str, start: u64, end: u64) -> SmapsSum {
    let mut sum = SmapsSum::default();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((lo, hi)) = vma_header(line) {
            inside = lo < end && hi > start;
            if inside {
                sum.vmas += 1;
            }
            continue;
        }
        if !inside {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kb) = rest
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = kb.saturating_mul(1024);
        match key.trim() {
            "Rss" => sum.rss += bytes,
            "ShmemPmdMapped" | "FilePmdMapped" | "AnonHugePages" => sum.pmd += bytes,
            "Shared_Hugetlb" | "Private_Hugetlb" => sum.hugetlb += bytes,
            "KernelPageSize" => sum.kernel_page = sum.kernel_page.max(bytes),
            _ => {}
        }
    }
    sum
}

/// `lo-hi perms ...` → (lo, hi); `None` for a field line (`Rss:   4 kB`).
fn vma_header(line: &str) -> Option<(u64, u64)> {
    let first = line.split_whitespace().next()?;
    let (lo, hi) = first.split_once('-')?;
    let lo = u64::from_str_radix(lo, 16).ok()?;
    let hi = u64::from_str_radix(hi, 16).ok()?;
    Some((lo, hi))
}

/// The report for a mapping of `len` bytes from the sums of its smaps entries.
pub(super) fn report_of(
    sum: &SmapsSum,
    len: u64,
    aligned_2m: bool,
    huge_advised: bool,
) -> MapReport {
    let huge_tlb = if sum.kernel_page >= HUGE_ALIGN as u64 {
        sum.hugetlb
    } else {
        0
    };
    let resident_bytes = sum.rss.saturating_add(sum.hugetlb);
    let pmd_bytes = sum.pmd.saturating_add(huge_tlb).min(resident_bytes);
    let (pages, note) = if sum.vmas == 0 {
        (
            MapPages::Unknown,
            Some("the mapping is not in /proc/self/smaps".to_string()),
        )
    } else if pmd_bytes > 0 {
        (MapPages::Huge2M, None)
    } else if resident_bytes > 0 {
        (MapPages::Small4K, None)
    } else {
        (
            MapPages::Unknown,
            Some("nothing resident to measure".to_string()),
        )
    };
    MapReport {
        pages,
        len,
        resident_bytes,
        pmd_bytes,
        aligned_2m,
        huge_advised,
        note,
    }
}

impl Pm {
    /// How the kernel maps the region now: the page size of its resident bytes and
    /// how many of them are PMD-mapped, read from `/proc/self/smaps` over exactly
    /// the mapping's range (a measurement; it reads the whole smaps file, a few
    /// milliseconds in a large process, so it is for reports, not hot paths).
    pub fn map_report(&self) -> MapReport {
        let start = self.base as u64;
        let end = start.saturating_add(self.len);
        let aligned = (self.base as usize).is_multiple_of(HUGE_ALIGN);
        match std::fs::read_to_string("/proc/self/smaps") {
            Ok(text) => report_of(
                &parse_smaps(&text, start, end),
                self.len,
                aligned,
                self.huge_advised,
            ),
            Err(e) => MapReport {
                pages: MapPages::Unknown,
                len: self.len,
                resident_bytes: 0,
                pmd_bytes: 0,
                aligned_2m: aligned,
                huge_advised: self.huge_advised,
                note: Some(format!("/proc/self/smaps: {e}")),
            },
        }
    }

    /// Advises the kernel to back the mapping with transparent huge pages; a
    /// refusal (no THP in this kernel, or a mapping that cannot take it) is
    /// harmless: 4 KiB pages then. Anonymous regions are not advised (the crash
    /// explorer's many copies would each zero 2 MiB per first touch), nor any
    /// mapping under `MNEMOFS_HUGE_PAGES=off`.
    pub(super) fn advise_huge(&mut self) {
        let off = crate::HostChoices::get().is_ok_and(|h| !h.huge_pages);
        if self.mode == MapMode::Anonymous || off {
            return;
        }
        // SAFETY: `[base, base + len)` is exactly our mapping; MADV_HUGEPAGE only
        // changes how the kernel backs it, never its contents.
        let rc = unsafe {
            libc::madvise(
                self.base as *mut libc::c_void,
                self.len as usize,
                libc::MADV_HUGEPAGE,
            )
        };
        self.huge_advised = rc == 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                  12 kB
AnonHugePages:         0 kB
7f62e3a00000-7f62e7a00000 rw-s 00000000 00:1b 16759                      /mnt/huge/img
Size:              65536 kB
KernelPageSize:        4 kB
Rss:               65536 kB
AnonHugePages:         0 kB
ShmemPmdMapped:    61440 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
THPeligible:           1
VmFlags: rd wr sh mr mw me ms sd hg
7f62e7a00000-7f62e7c00000 rw-p 00000000 00:00 0
Rss:                2048 kB
AnonHugePages:      2048 kB
";

    #[test]
    fn smaps_of_a_huge_mapping() {
        let s = parse_smaps(SMAPS, 0x7f62_e3a0_0000, 0x7f62_e7a0_0000);
        assert_eq!(s.vmas, 1);
        assert_eq!(s.rss, 64 << 20);
        assert_eq!(s.pmd, 60 << 20);
        let r = report_of(&s, 64 << 20, true, true);
        assert_eq!(r.pages, MapPages::Huge2M);
        assert_eq!(
            r.to_string(),
            "2 MiB pages (60 of 64 MiB resident PMD-mapped)"
        );
    }

    #[test]
    fn smaps_of_small_absent_and_hugetlb_mappings() {
        let small = SMAPS.replace("ShmemPmdMapped:    61440", "ShmemPmdMapped:        0");
        let r = report_of(
            &parse_smaps(&small, 0x7f62_e3a0_0000, 0x7f62_e7a0_0000),
            64 << 20,
            true,
            false,
        );
        assert_eq!(r.pages, MapPages::Small4K);
        assert_eq!(
            r.to_string(),
            "4 KiB pages (64 MiB resident, none PMD-mapped)"
        );

        let r = report_of(&parse_smaps(SMAPS, 0x1000, 0x2000), 4096, false, false);
        assert_eq!(r.pages, MapPages::Unknown);

        let untouched = SMAPS
            .replace("Rss:               65536", "Rss:                   0")
            .replace("ShmemPmdMapped:    61440", "ShmemPmdMapped:        0");
        let r = report_of(
            &parse_smaps(&untouched, 0x7f62_e3a0_0000, 0x7f62_e7a0_0000),
            64 << 20,
            true,
            true,
        );
        assert_eq!(r.pages, MapPages::Unknown);
        assert!(r.to_string().contains("nothing resident"));

        let hugetlb = "\
7f0000000000-7f0000400000 rw-s 00000000 00:2f 5  /dev/hugepages/img
KernelPageSize:     2048 kB
Rss:                   0 kB
Shared_Hugetlb:     4096 kB
Private_Hugetlb:       0 kB
";
        let r = report_of(
            &parse_smaps(hugetlb, 0x7f00_0000_0000, 0x7f00_0040_0000),
            4 << 20,
            true,
            true,
        );
        assert_eq!(
            (r.pages, r.pmd_bytes, r.resident_bytes),
            (MapPages::Huge2M, 4 << 20, 4 << 20)
        );
    }

    #[test]
    fn file_images_are_mapped_2m_aligned_and_measured() {
        let dir = tempfile::tempdir().unwrap();
        let pm = Pm::create(&dir.path().join("img"), 8 << 20).unwrap();
        pm.populate(0, 8 << 20);
        let r = pm.map_report();
        assert!(r.aligned_2m);
        assert_eq!(r.len, 8 << 20);
        // Whatever the file system under the temporary directory gives, the whole
        // populated region is resident and measured as one page size or the other.
        assert!(
            matches!(r.pages, MapPages::Huge2M | MapPages::Small4K),
            "{r}"
        );
        assert_eq!(r.resident_bytes, 8 << 20, "{r}");
    }
}
