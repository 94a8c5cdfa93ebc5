//! Human-readable output of `stat` and `fsck`.

use crate::size::format_bytes;
use mnemofs::FsckReport;
use serde_json::Value;
use std::fmt::Write;

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("?")
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// Renders `FsStats` (as JSON, from the engine or from the stats xattr).
pub fn render_stats(what: &str, v: &Value) -> String {
    let bs = u(v, "block_size").max(1);
    let data = u(v, "data_blocks");
    let free = u(v, "free_blocks").saturating_add(u(v, "spare_blocks"));
    let used = data.saturating_sub(free);
    let per_cpu: Vec<String> = v
        .get("free_blocks_per_cpu")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_u64().map_or_else(|| "?".into(), |n| n.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let inodes_total = u(v, "inodes_total");
    let inodes_used = u(v, "inodes_used");
    let clean = match v.get("clean_mount").and_then(Value::as_bool) {
        Some(true) => "yes",
        Some(false) => "no (recovery ran at mount)",
        None => "?",
    };

    let mut o = String::new();
    let _ = writeln!(o, "mnemofs {what}");
    let _ = writeln!(
        o,
        "  geometry      {} image, {} blocks of {} bytes, {} for data, {} CPUs",
        format_bytes(u(v, "size_bytes")),
        u(v, "total_blocks"),
        bs,
        data,
        u(v, "cpus"),
    );
    let _ = writeln!(
        o,
        "  space         {} used, {} free of {} ({} free)",
        format_bytes(used.saturating_mul(bs)),
        format_bytes(free.saturating_mul(bs)),
        format_bytes(data.saturating_mul(bs)),
        percent(free, data),
    );
    let _ = writeln!(
        o,
        "  free per CPU  [{}] blocks, and {} kept as files' spares",
        per_cpu.join(", "),
        u(v, "spare_blocks")
    );
    let devices = v
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if devices.len() > 1 {
        let _ = writeln!(o, "  placement     {}", s(v, "placement"));
        let mut per_node: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for d in &devices {
            let node = d
                .get("node")
                .and_then(Value::as_u64)
                .map_or_else(|| "?".to_string(), |n| n.to_string());
            let (dd, df) = (u(d, "data_blocks"), u(d, "free_blocks"));
            let _ = writeln!(
                o,
                "  device {:<6} {} (node {node}): {} free of {} ({}), inodes {} free of {}",
                u(d, "index"),
                s(d, "path"),
                format_bytes(df.saturating_mul(bs)),
                format_bytes(dd.saturating_mul(bs)),
                percent(df, dd),
                u(d, "inodes_free"),
                u(d, "inodes"),
            );
            let e = per_node.entry(node).or_default();
            e.0 = e.0.saturating_add(dd);
            e.1 = e.1.saturating_add(df);
        }
        for (node, (dd, df)) in per_node {
            let _ = writeln!(
                o,
                "  node {node:<8} {} free of {} ({})",
                format_bytes(df.saturating_mul(bs)),
                format_bytes(dd.saturating_mul(bs)),
                percent(df, dd),
            );
        }
    }
    let _ = writeln!(
        o,
        "  inodes        {} used of {} ({} free)",
        inodes_used,
        inodes_total,
        inodes_total.saturating_sub(inodes_used),
    );
    let _ = writeln!(o, "  log pages     {}", u(v, "log_pages"));
    let _ = writeln!(o, "  data pages    {}", u(v, "data_pages"));
    let _ = writeln!(
        o,
        "  PM writes     {} written, {} flushes ({}), {} fences",
        format_bytes(u(v, "pm_bytes_written")),
        u(v, "pm_flushes"),
        s(v, "flush_instruction"),
        u(v, "pm_fences"),
    );
    if v.get("contention").is_some() {
        let c = &v["contention"];
        let _ = writeln!(
            o,
            "  contention    {} per-file lock acquisitions ({} waited), {} shared read-modify-writes, {} concurrent writers at most",
            u(c, "locks"),
            u(c, "waits"),
            u(c, "rmws"),
            u(v, "max_concurrent_writers"),
        );
    }
    if let Some(n) = v.get("requests_in_flight").and_then(Value::as_u64) {
        // A mount point's daemon adds these (mnemofs-fuse's adapter).
        let oldest = v
            .get("oldest_request")
            .and_then(Value::as_str)
            .unwrap_or("");
        let _ = writeln!(
            o,
            "  requests      {n} in flight{}; {} page-cache invalidations, {} writers stopped waiting for theirs",
            if oldest.is_empty() {
                String::new()
            } else {
                format!(", the oldest {oldest}")
            },
            u(v, "page_invalidations"),
            u(v, "page_invalidation_waits_cut"),
        );
    }
    if let Some(h) = v
        .get("host")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty())
    {
        let _ = writeln!(o, "  host          {h}");
    }
    let _ = writeln!(
        o,
        "  mapping       {}, {}",
        s(v, "map_mode"),
        v.get("map_summary")
            .and_then(Value::as_str)
            .unwrap_or("page size not reported"),
    );
    let _ = writeln!(
        o,
        "  modes         lock={} small-write={} read-cache={}",
        s(v, "lock_mode"),
        s(v, "small_write_mode"),
        s(v, "read_cache_mode"),
    );
    if !s(v, "medium").is_empty() {
        let _ = writeln!(o, "  medium        {}", s(v, "medium"));
    }
    if !s(v, "label").is_empty() {
        let _ = writeln!(o, "  label         {}", s(v, "label"));
    }
    if !s(v, "atime").is_empty() {
        let ro = v.get("read_only").and_then(|b| b.as_bool()) == Some(true);
        let _ = writeln!(
            o,
            "  access        {}, atime {}",
            if ro { "read-only" } else { "read-write" },
            s(v, "atime")
        );
    }
    let _ = writeln!(
        o,
        "  LAWN zone     {} slots of {} B in use, {} free, descriptors stored {}; {} zone / {} in-place writes, {} written back",
        u(v, "lawn_slots_used"),
        u(v, "lawn_slot_size"),
        u(v, "lawn_slots_free"),
        s(v, "lawn_desc_store"),
        u(v, "lawn_zone_writes"),
        u(v, "lawn_file_writes"),
        u(v, "lawn_writebacks"),
    );
    if u(v, "lawn_chunks_grown") > 0 || u(v, "lawn_chunk_blocks") > 0 {
        let _ = writeln!(
            o,
            "  LAWN growth   {} in chunks (reclaimable); grew by {} chunks, gave back {}",
            format_bytes(u(v, "lawn_chunk_blocks").saturating_mul(bs)),
            u(v, "lawn_chunks_grown"),
            u(v, "lawn_chunks_shrunk"),
        );
    }
    if u(v, "read_cache_bytes") > 0 {
        let _ = writeln!(
            o,
            "  read cache    {} of {} in DRAM; {} hits, {} misses; {} inserted, {} copied, {} evicted, {} invalidated",
            format_bytes(u(v, "read_cache_pages").saturating_mul(bs)),
            format_bytes(u(v, "read_cache_bytes")),
            u(v, "read_cache_hits"),
            u(v, "read_cache_misses"),
            u(v, "read_cache_inserts"),
            u(v, "read_cache_copies"),
            u(v, "read_cache_evictions"),
            u(v, "read_cache_invalidations"),
        );
    }
    let _ = write!(o, "  clean mount   {clean}");
    o
}

/// Renders an fsck report: a summary, then each problem on its own line.
pub fn render_fsck(image: &str, r: &FsckReport) -> String {
    let mut o = String::new();
    if r.is_clean() {
        let _ = writeln!(o, "{image}: clean");
    } else {
        let n = r.problems.len();
        let _ = writeln!(
            o,
            "{image}: {n} problem{} found",
            if n == 1 { "" } else { "s" }
        );
    }
    let _ = writeln!(
        o,
        "  {} inodes ({} directories, {} files), {} log pages, {} data pages, {} free blocks, last unmount {}",
        r.inodes,
        r.directories,
        r.files,
        r.log_pages,
        r.data_pages,
        r.free_blocks,
        if r.clean_unmount { "clean" } else { "not clean" },
    );
    for p in &r.problems {
        let _ = writeln!(o, "{}", crate::error::one_line(p));
    }
    o.pop();
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemofs::FsStats;

    fn sample() -> FsStats {
        FsStats {
            size_bytes: 64 << 20,
            block_size: 4096,
            total_blocks: 16384,
            data_blocks: 16000,
            free_blocks: 15000,
            spare_blocks: 0,
            free_blocks_per_cpu: vec![7500, 7500],
            devices: Vec::new(),
            placement: "local".into(),
            cpus: 2,
            inodes_total: 4096,
            inodes_used: 3,
            log_pages: 5,
            data_pages: 2,
            pm_bytes_written: 12 << 10,
            pm_flushes: 100,
            pm_fences: 50,
            flush_instruction: "clwb".into(),
            host: "clwb, 16-byte stores by sse, 2 CPUs, huge pages advised; forced: MNEMOFS_DESC_STORE=nt".into(),
            map_mode: "Shared".into(),
            map_pages: "2M".into(),
            map_pmd_bytes: 60 << 20,
            map_resident_bytes: 64 << 20,
            map_summary: "2 MiB pages (60 of 64 MiB resident PMD-mapped)".into(),
            lock_mode: "inode".into(),
            small_write_mode: "cow".into(),
            clean_mount: true,
            max_concurrent_writers: 1,
            contention: mnemofs::contention::Contention {
                locks: 7,
                waits: 1,
                rmws: 12,
            },
            lawn_slot_size: 64,
            lawn_desc_store: "non-temporal".into(),
            lawn_slots_used: 2,
            lawn_slots_free: 98,
            lawn_chunk_blocks: 0,
            lawn_chunks_grown: 0,
            lawn_chunks_shrunk: 0,
            lawn_zone_writes: 1,
            lawn_file_writes: 0,
            lawn_writebacks: 0,
            finelog_writes: 0,
            small_write_fallbacks: 0,
            medium: "pm: latency profile optane".into(),
            read_only: false,
            label: String::new(),
            atime: "relatime".into(),
            read_cache_mode: "rcache".into(),
            read_cache_bytes: 1 << 20,
            read_cache_pages: 16,
            read_cache_hits: 7,
            read_cache_misses: 3,
            read_cache_inserts: 16,
            read_cache_copies: 16,
            read_cache_evictions: 0,
            read_cache_invalidations: 1,
            read_cache_dropped: 0,
        }
    }

    #[test]
    fn stats_text() {
        let v = serde_json::to_value(sample()).unwrap();
        let t = render_stats("image /dev/shm/x.img", &v);
        assert!(t.starts_with("mnemofs image /dev/shm/x.img\n"), "{t}");
        assert!(t.contains("64.0 MiB image, 16384 blocks of 4096 bytes, 16000 for data, 2 CPUs"));
        assert!(
            t.contains("3.9 MiB used, 58.6 MiB free of 62.5 MiB (93.8% free)"),
            "{t}"
        );
        assert!(t.contains("[7500, 7500] blocks"));
        assert!(t.contains("3 used of 4096 (4093 free)"));
        assert!(t.contains("12.0 KiB written, 100 flushes (clwb), 50 fences"));
        assert!(
            t.contains("host          clwb, 16-byte stores by sse, 2 CPUs, huge pages advised; forced: MNEMOFS_DESC_STORE=nt\n"),
            "{t}"
        );
        assert!(t.contains("lock=inode small-write=cow read-cache=rcache"));
        assert!(
            t.contains("mapping       Shared, 2 MiB pages (60 of 64 MiB resident PMD-mapped)"),
            "{t}"
        );
        assert!(
            t.contains("read cache    64.0 KiB of 1.0 MiB in DRAM; 7 hits, 3 misses"),
            "{t}"
        );
        assert!(t.ends_with("clean mount   yes"));
        assert!(
            t.contains("  contention    7 per-file lock acquisitions (1 waited), 12 shared read-modify-writes, 1 concurrent writers at most\n"),
            "{t}"
        );
    }

    #[test]
    fn stats_text_shows_a_daemons_requests() {
        let mut v = serde_json::to_value(sample()).unwrap();
        let t = render_stats("x", &v);
        assert!(!t.contains("requests "), "an image has no daemon: {t}");
        let o = v.as_object_mut().unwrap();
        o.insert("requests_in_flight".into(), 2.into());
        o.insert(
            "oldest_request".into(),
            "write inode 12 for 31000 ms".into(),
        );
        o.insert("page_invalidations".into(), 7.into());
        o.insert("page_invalidation_waits_cut".into(), 1.into());
        let t = render_stats("x", &v);
        assert!(
            t.contains("  requests      2 in flight, the oldest write inode 12 for 31000 ms; 7 page-cache invalidations, 1 writers stopped waiting for theirs\n"),
            "{t}"
        );
    }

    #[test]
    fn stats_text_tolerates_missing_fields() {
        let t = render_stats("x", &serde_json::json!({}));
        assert!(t.contains("inodes        0 used of 0"));
    }

    #[test]
    fn fsck_text() {
        let mut r = FsckReport {
            inodes: 3,
            directories: 1,
            files: 2,
            clean_unmount: true,
            ..Default::default()
        };
        let t = render_fsck("img", &r);
        assert!(t.starts_with("img: clean\n"));
        r.problems = vec!["inode 5: bad link count".into(), "block 9\nleaked".into()];
        let t = render_fsck("img", &r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "img: 2 problems found");
        assert_eq!(lines[2], "inode 5: bad link count");
        assert_eq!(lines[3], "block 9 leaked");
        assert_eq!(lines.len(), 4);
    }
}
