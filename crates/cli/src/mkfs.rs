//! `mnemofs mkfs`.

use crate::error::{fs_error, io_error, retry_if_busy, CliError, CliResult};
use crate::size::format_bytes;
use clap::Args;
use mnemofs::MkfsOptions;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct MkfsArgs {
    /// Image file (created when missing) or PM device (e.g. /dev/pmem0, /dev/dax0.0);
    /// several, comma-separated, form one volume (`a.img@0,b.img@1`: `@NODE` names
    /// a device's NUMA node where sysfs cannot tell it)
    pub image: PathBuf,
    /// Image size: bytes or with a unit (512M, 4G, 1GiB; KB/MB/GB are powers of 1000).
    /// Default: the size of an existing image, else 1 GiB
    #[arg(long, short, value_name = "SIZE", value_parser = crate::size::size_arg)]
    pub size: Option<u64>,
    /// Overwrite an existing mnemofs file system
    #[arg(long, short)]
    pub force: bool,
    /// Number of inodes (default: one per 16 KiB of image, at least 1024)
    #[arg(long, value_name = "N")]
    pub inodes: Option<u64>,
    /// Number of per-CPU allocators, inode tables and journals (default: CPUs online)
    #[arg(long, value_name = "N")]
    pub cpus: Option<u32>,
    /// Percent of the image for the LAWN zone (slots and their descriptors; 0 = none)
    #[arg(long = "zone-percent", value_name = "P", default_value_t = mnemofs::format::DEFAULT_ZONE_PERCENT)]
    pub zone_percent: u32,
    /// LAWN slot size in bytes (a multiple of 64 dividing 4096, at most 2048)
    #[arg(long = "slot-size", value_name = "B", default_value_t = mnemofs::format::DEFAULT_SLOT_SIZE)]
    pub slot_size: u32,
    /// File-system label (at most 255 bytes; `mnemofs stat` shows it, FS_IOC_SETFSLABEL
    /// changes it)
    #[arg(long, short = 'L', value_name = "LABEL")]
    pub label: Option<String>,
}

pub fn run(args: &MkfsArgs) -> CliResult<()> {
    let specs = crate::devs::parse(&args.image)?;
    let size = match args.size {
        Some(s) => s,
        None => existing_size(&specs[0].path)?.unwrap_or(MkfsOptions::default().size),
    };
    if size == 0 {
        return Err(CliError::new("--size must be greater than 0"));
    }
    let opts = MkfsOptions {
        size,
        cpus: args.cpus.unwrap_or(0),
        inodes: args.inodes.unwrap_or(0),
        force: args.force,
        zone_percent: args.zone_percent,
        slot_size: args.slot_size,
        label: args.label.clone().unwrap_or_default().into_bytes(),
    };
    if opts.label.len() > mnemofs::format::LABEL_MAX || opts.label.contains(&0) {
        return Err(CliError::new(format!(
            "--label: at most {} bytes (this one has {})",
            mnemofs::format::LABEL_MAX,
            opts.label.len()
        ))
        .with_code(2));
    }
    let devices = retry_if_busy(|| mnemofs::mkfs_devices(&specs, &opts))
        .map_err(|e| fs_error(&args.image, &e))?;
    if devices.len() == 1 {
        crate::output::emit(&format!(
            "{}: formatted as mnemofs ({}, {} bytes)",
            args.image.display(),
            format_bytes(size),
            size
        ));
        return Ok(());
    }
    let total: u64 = devices.iter().map(|d| d.blocks).sum::<u64>() * mnemofs::format::BLOCK;
    let mut text = format!(
        "formatted one mnemofs volume of {} devices ({}):",
        devices.len(),
        format_bytes(total)
    );
    for d in &devices {
        text.push_str(&format!(
            "\n  device {}  {}  {}  node {}",
            d.index,
            d.path.display(),
            format_bytes(d.blocks * mnemofs::format::BLOCK),
            d.node
                .map_or_else(|| "unknown".to_string(), |n| n.to_string())
        ));
    }
    crate::output::emit(&text);
    Ok(())
}

/// Size of an existing, non-empty image file or device; `None` when missing or empty.
fn existing_size(path: &Path) -> CliResult<Option<u64>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, &e)),
    };
    if meta.is_dir() {
        return Err(CliError::new(format!(
            "{} is a directory, not an image",
            path.display()
        )));
    }
    if meta.is_file() {
        return Ok((meta.len() > 0).then_some(meta.len()));
    }
    // A device: its size is where seeking to the end lands.
    let mut f = std::fs::File::open(path).map_err(|e| io_error(path, &e))?;
    match f.seek(SeekFrom::End(0)) {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(CliError::new(format!(
            "cannot tell the size of {}; pass --size",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_of_existing_images() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.img");
        assert_eq!(existing_size(&missing).unwrap(), None);
        let empty = dir.path().join("empty.img");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(existing_size(&empty).unwrap(), None);
        let img = dir.path().join("a.img");
        std::fs::write(&img, vec![0u8; 8192]).unwrap();
        assert_eq!(existing_size(&img).unwrap(), Some(8192));
        let e = existing_size(dir.path()).unwrap_err();
        assert!(e.msg.contains("is a directory"), "{}", e.msg);
    }
}
