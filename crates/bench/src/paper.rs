//! The papers mnemofs implements, as data: each one's title, authors, venue, the
//! testbed it measured on, and its headline claims — the figure, as the paper
//! states it, with the figure or table it comes from — for `mnemofs bench paper`,
//! which runs the same experiment here and prints ours beside it.
//!
//! Every claim is quoted verbatim from the paper's text; where the text gives no
//! number for a figure, the claim says what the text does state.

/// One headline claim of a paper.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Claim {
    /// Short name of the experiment (`dwom`, `seqread`, ...): unique within the paper.
    pub id: &'static str,
    /// The experiment the claim is about, in the paper's terms.
    pub experiment: &'static str,
    /// The claimed factor (technique over baseline), where the paper gives one.
    pub value: Option<f64>,
    /// The claim as the paper words its number (`3.5×`, `about 20×`).
    pub value_text: &'static str,
    /// What is compared with what, on which metric and at which point.
    pub compares: &'static str,
    /// Where it is: figure or table, section.
    pub source: &'static str,
    /// The figure or table alone (`Fig. 4`), for tables.
    pub figure: &'static str,
    /// The sentence of the paper the claim is taken from, verbatim.
    pub quote: &'static str,
    /// The threads, cores or clients of the claimed point, as the paper gives them.
    pub paper_scale: &'static str,
}

/// One paper.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paper {
    /// The name `mnemofs bench paper` takes.
    pub key: &'static str,
    /// The technique mnemofs builds from it, in a few words.
    pub technique: &'static str,
    /// Where mnemofs has it: the mode and the presets that run it.
    pub in_mnemofs: &'static str,
    /// Short name (`pNOVA`).
    pub short: &'static str,
    /// Title.
    pub title: &'static str,
    pub authors: &'static str,
    /// Venue and year.
    pub venue: &'static str,
    /// The venue in a few words (`APSys '19`), for tables.
    pub venue_short: &'static str,
    /// The machine the paper measured on.
    pub testbed: &'static str,
    /// The paper's baseline.
    pub baseline: &'static str,
    /// Its headline claims, the first being the headline.
    pub claims: &'static [Claim],
}

impl Paper {
    /// `pNOVA (APSys '19)`.
    pub fn cite(&self) -> String {
        format!("{} ({})", self.short, self.venue_short)
    }
}

/// Every paper, in the order `all` runs them.
pub const PAPERS: &[Paper] = &[
    Paper {
        key: "pnova",
        technique: "range locks",
        in_mnemofs: "lock=segment (presets pnova, full)",
        short: "pNOVA",
        title: "pNOVA: Optimizing Shared File I/O Operations of NVM File System on Manycore \
                Servers",
        authors: "June-Hyung Kim, Jangwoong Kim, Hyeongu Kang, Chang-Gyu Lee, Sungyong Park, \
                  Youngjae Kim",
        venue: "APSys '19",
        venue_short: "APSys '19",
        testbed: "120-core Intel Xeon E7-8870 v2 (8 NUMA nodes x 15 cores), NVM emulated on \
                  DRAM (Table 1)",
        baseline: "NOVA (a per-file reader-writer lock)",
        claims: &[Claim {
            id: "dwom",
            experiment: "FxMark DWOM: each thread overwrites its own 4 KiB block of one \
                         shared file",
            value: Some(3.5),
            value_text: "3.5×",
            compares: "pNOVA-atomic over NOVA, write throughput at 15 cores",
            source: "Fig. 4 (§4, Microbenchmark Results)",
            figure: "Fig. 4",
            quote: "pNOVA-atomic shows 3.5X improvement compared to NOVA with 15 cores",
            paper_scale: "15 cores",
        }],
    },
    Paper {
        key: "lawn",
        technique: "LAWN small writes",
        in_mnemofs: "small-write=lawn (presets lawn; full on PM)",
        short: "LAWN",
        title: "LAWN (logless, alternate writing for NVMM)",
        authors: "authors as listed under doi:10.1145/3195970.3196066",
        venue: "DAC '18 (doi:10.1145/3195970.3196066)",
        venue_short: "DAC '18",
        testbed: "Intel Xeon E5-2660 v3 with 8 cores, 116 GB of DRAM emulating STT-RAM \
                  (memmap), a 60 GB fio file (§5.1)",
        baseline: "NOVA (page copy-on-write)",
        claims: &[Claim {
            id: "randwrite-128",
            experiment: "fio random writes of 128 B requests",
            value: Some(12.0),
            value_text: "12.0×",
            compares: "LAWN over NOVA, write bandwidth at 128 B requests",
            source: "Fig. 5 (§5.2, Fio)",
            figure: "Fig. 5",
            quote: "with random writes at a request size of 128B, the bandwidth of LAWN is \
                    9.5×, 12.0×, and 1.9× that of Ext4, NOVA, and Fine-log, respectively",
            paper_scale: "threads not stated; 8 cores",
        }],
    },
    Paper {
        key: "rcache",
        technique: "DRAM read cache",
        in_mnemofs: "read-cache=rcache (presets rcache; full on PM)",
        short: "RCache",
        title: "RCache: A Read-Intensive Workload-Aware Page Cache for NVM Filesystem",
        authors: "Tu Yaofeng, Zhu Bohong, Yang Hongzhang, Han Yinjun, Shu Jiwu",
        venue: "ZTE Communications 21(1), 2023",
        venue_short: "ZTE Commun. 2023",
        testbed: "2 x Intel Xeon Gold 6240M (36 cores each), Intel Optane DC PMM of one \
                  NUMA node (§4.1)",
        baseline: "NOVA (DAX: every read from NVM)",
        claims: &[
            Claim {
                id: "seqread",
                experiment: "sequential reads of each thread's own 64 MB file (the paper's \
                             DRBL)",
                value: Some(3.0),
                value_text: "3×",
                compares: "RCache over NOVA, read bandwidth on read-intensive workloads (no \
                           number per panel in the text)",
                source: "Abstract and §5; measured in Fig. 5(a)",
                figure: "abstract; Fig. 5(a)",
                quote: "compared with NOVA, RCache achieves 3 times higher bandwidth for \
                        read-intensive workloads",
                paper_scale: "threads not stated",
            },
            Claim {
                id: "skewread",
                experiment: "reads at normally distributed offsets of each thread's own \
                             file (the paper's skewed DRBL)",
                value: Some(3.0),
                value_text: "3×",
                compares: "RCache over NOVA, read bandwidth on read-intensive workloads (for \
                           Fig. 5(b) the text says only that NOVA's bandwidth is much lower)",
                source: "Abstract and §5; measured in Fig. 5(b)",
                figure: "abstract; Fig. 5(b)",
                quote: "compared with NOVA, RCache achieves 3 times higher bandwidth for \
                        read-intensive workloads",
                paper_scale: "threads not stated",
            },
        ],
    },
    Paper {
        key: "mbs-lvm",
        technique: "NUMA-local placement",
        in_mnemofs: "placement=local over a volume's devices (preset full)",
        short: "MBS-LVM",
        title: "MBS-LVM: A High-Performance Logical Volume Manager for Memory Bus-Connected \
                Storages over NUMA Servers",
        authors: "Yongseob Lee, Sungyong Park",
        venue: "Journal of Information Processing Systems 15(1), 2019",
        venue_short: "JIPS 2019",
        testbed: "4 NUMA nodes of 10 cores, 16 GB of MBS (NVDIMM-N emulated on DRAM) per node \
                  (§3)",
        baseline: "tmpfs (no NUMA awareness)",
        claims: &[Claim {
            id: "randwrite",
            experiment: "fio random writes, 40 threads over 4 NUMA nodes",
            value: Some(20.0),
            value_text: "about 20×",
            compares: "mbsfs (tmpfs on MBS-LVM) over tmpfs, random-write throughput",
            source: "Fig. 5(a) (§3, Result); abstract: up to twenty times",
            figure: "Fig. 5(a)",
            quote: "the mbsfs outperformed the tmpfs by about 20 times, and scaled well up \
                    to 4 nodes compared with the tmpfs",
            paper_scale: "40 threads, 4 nodes",
        }],
    },
    Paper {
        key: "delayed-commit",
        technique: "delayed commit",
        in_mnemofs: "cluster mode's delayed commits with space delegation and adaptive RPC \
                     compounds (mount --commit delayed)",
        short: "Delayed Commit",
        title: "Accelerating Distributed Updates with Asynchronous Ordered Writes in a \
                Parallel File System",
        authors: "Youyou Lu, Jiwu Shu, Shuai Li, Letian Yi",
        venue: "IEEE CLUSTER 2012",
        venue_short: "CLUSTER '12",
        testbed: "Redbud on 8 nodes (1 metadata server, 7 clients), one 3.0 GHz Xeon core \
                  each, 1 Gb Ethernet for metadata, 4 Gb FC disk array for data (§V.B)",
        baseline: "the original Redbud (synchronous ordered writes)",
        claims: &[Claim {
            id: "xcdn-32k",
            experiment: "xcdn (CDN servers' writes) with 32 KB files",
            value: Some(2.6),
            value_text: "2.6×",
            compares: "Redbud with delayed commit over the original Redbud",
            source: "Fig. 3 (§V.C, Overall Performance); abstract: up to 2.6x",
            figure: "Fig. 3",
            quote: "In 32KB xcdn test, Redbud with delayed commit achieves a 2.6x speedup \
                    compared with original Redbud",
            paper_scale: "7 client nodes",
        }],
    },
];

/// The paper named `key`.
pub fn by_key(key: &str) -> Option<&'static Paper> {
    PAPERS.iter().find(|p| p.key == key)
}

/// The names `mnemofs bench paper` takes: every key, then `all`.
pub fn names() -> String {
    let mut v: Vec<&str> = PAPERS.iter().map(|p| p.key).collect();
    v.push("all");
    v.join(", ")
}

/// A factor as `3.50×`; `n/a` where there is none (no baseline, not finite).
pub fn ratio(r: Option<f64>) -> String {
    match r {
        Some(x) if x.is_finite() && x >= 0.0 => format!("{x:.2}×"),
        _ => "n/a".to_string(),
    }
}

/// `a / b`, where both are positive and finite.
pub fn ratio_of(a: f64, b: f64) -> Option<f64> {
    (a.is_finite() && b.is_finite() && a >= 0.0 && b > 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_catalogue_is_complete() {
        assert_eq!(
            PAPERS.iter().map(|p| p.key).collect::<Vec<_>>(),
            ["pnova", "lawn", "rcache", "mbs-lvm", "delayed-commit"]
        );
        for p in PAPERS {
            for (what, s) in [
                ("technique", p.technique),
                ("in_mnemofs", p.in_mnemofs),
                ("short", p.short),
                ("title", p.title),
                ("authors", p.authors),
                ("venue", p.venue),
                ("venue_short", p.venue_short),
                ("testbed", p.testbed),
                ("baseline", p.baseline),
            ] {
                assert!(!s.trim().is_empty(), "{}: no {what}", p.key);
            }
            assert!(!p.claims.is_empty(), "{}: no claim", p.key);
            let mut ids: Vec<&str> = p.claims.iter().map(|c| c.id).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), p.claims.len(), "{}: claim ids repeat", p.key);
            for c in p.claims {
                for (what, s) in [
                    ("experiment", c.experiment),
                    ("value", c.value_text),
                    ("compares", c.compares),
                    ("source", c.source),
                    ("figure", c.figure),
                    ("quote", c.quote),
                    ("scale", c.paper_scale),
                ] {
                    assert!(!s.trim().is_empty(), "{}/{}: no {what}", p.key, c.id);
                }
                // Every source names a figure or a table of the paper, the one
                // `figure` names.
                assert!(
                    c.figure.contains("Fig.") || c.figure.contains("Table"),
                    "{}/{}: {:?} names no figure or table",
                    p.key,
                    c.id,
                    c.figure
                );
                let fig = c.figure.rsplit("; ").next().unwrap_or(c.figure);
                assert!(c.source.contains(fig), "{}/{}: {fig}", p.key, c.id);
                // The number claimed is the one the quote says.
                if let Some(v) = c.value {
                    assert!(v > 1.0, "{}/{}: {v}", p.key, c.id);
                    let n = format!("{v}");
                    let said = c.quote.contains(&n)
                        || c.quote.contains(&format!("{v:.1}"))
                        || c.quote.contains(&format!("{v:.0} times"));
                    assert!(said, "{}/{}: {v} not in {:?}", p.key, c.id, c.quote);
                    assert!(c.value_text.contains(&format!("{v}")), "{}", c.value_text);
                }
            }
            assert_eq!(by_key(p.key), Some(p));
        }
        assert!(by_key("nova").is_none());
        assert_eq!(names(), "pnova, lawn, rcache, mbs-lvm, delayed-commit, all");
    }

    #[test]
    fn ratios_are_formatted_with_two_decimals() {
        assert_eq!(ratio(Some(3.5)), "3.50×");
        assert_eq!(ratio(Some(1.0)), "1.00×");
        assert_eq!(ratio(Some(12.04)), "12.04×");
        assert_eq!(ratio(Some(0.956)), "0.96×");
        assert_eq!(ratio(None), "n/a");
        assert_eq!(ratio(Some(f64::NAN)), "n/a");
        assert_eq!(ratio(Some(f64::INFINITY)), "n/a");
        assert_eq!(ratio_of(6.0, 2.0), Some(3.0));
        assert_eq!(ratio_of(1.0, 0.0), None);
        assert_eq!(ratio_of(f64::NAN, 1.0), None);
        assert_eq!(PAPERS[0].cite(), "pNOVA (APSys '19)");
        assert_eq!(PAPERS[2].cite(), "RCache (ZTE Commun. 2023)");
    }
}
