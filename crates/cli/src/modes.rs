//! Presets and mode names for `mount`.

use crate::error::{CliError, CliResult};
use mnemofs::{LockMode, Medium, MountOptions, ReadCacheMode, SmallWriteMode, PRESETS};

fn names<T>(list: &[(&str, T)]) -> String {
    list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Help text of `--preset`.
pub fn preset_help() -> String {
    let built: Vec<String> = PRESETS
        .iter()
        .map(|p| {
            format!(
                "{} (lock={}, small-write={}, read-cache={})",
                p.name,
                p.lock.name(),
                p.small_write.name(),
                p.read_cache.name()
            )
        })
        .collect();
    format!("Mode preset: {}", built.join("; "))
}

/// Help text of `--read-cache`.
pub fn read_cache_help() -> String {
    format!(
        "DRAM read cache, overriding the preset's: {}",
        names(ReadCacheMode::ALL)
    )
}

/// Help text of `--lock`.
pub fn lock_help() -> String {
    format!(
        "Per-file lock, overriding the preset's: {}",
        names(LockMode::ALL)
    )
}

/// Help text of `--small-write`.
pub fn small_write_help() -> String {
    format!(
        "Sub-page write path, overriding the preset's: {}",
        names(SmallWriteMode::ALL)
    )
}

/// Engine mount options from a preset name and optional mode overrides.
/// `--desc-store`: how LAWN descriptors are stored (`pm::Store16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DescStore {
    /// The cheaper of the two, measured at mount
    Auto,
    /// One 16-byte non-temporal store
    Nt,
    /// A 16-byte atomic store and a write-back of its line
    Cached,
}

impl DescStore {
    /// The mount option (`None`: measure at mount).
    pub fn option(self) -> Option<pm::Store16> {
        match self {
            DescStore::Auto => None,
            DescStore::Nt => Some(pm::Store16::NonTemporal),
            DescStore::Cached => Some(pm::Store16::Cached),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DescStore::Auto => "auto",
            DescStore::Nt => "nt",
            DescStore::Cached => "cached",
        }
    }
}

/// Help text of `--desc-store`.
pub const DESC_STORE_HELP: &str = "How LAWN descriptors are stored: auto (the cheaper of the \
two, measured at mount), nt (one 16-byte non-temporal store) or cached (a 16-byte atomic \
store and a write-back of its line)";

pub fn resolve(
    preset: &str,
    lock: Option<&str>,
    small_write: Option<&str>,
) -> CliResult<MountOptions> {
    resolve_with(preset, lock, small_write, None)
}

/// The medium `--medium` names.
pub fn medium(name: &str) -> CliResult<Medium> {
    Medium::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            CliError::new(format!(
                "unknown medium '{name}'; valid media: {}",
                names(Medium::ALL)
            ))
            .with_code(2)
        })
}

/// [`resolve`], with the read cache mode overridden too.
pub fn resolve_with(
    preset: &str,
    lock: Option<&str>,
    small_write: Option<&str>,
    read_cache: Option<&str>,
) -> CliResult<MountOptions> {
    let Some(p) = PRESETS.iter().find(|p| p.name == preset) else {
        return Err(CliError::new(format!(
            "unknown preset '{preset}'; valid presets: {}",
            preset_names()
        )));
    };
    let mut opts = MountOptions::from_preset(p);
    if let Some(l) = lock {
        opts.lock = LockMode::ALL
            .iter()
            .find(|(n, _)| *n == l)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                CliError::new(format!(
                    "unknown lock mode '{l}'; valid lock modes: {}",
                    names(LockMode::ALL)
                ))
            })?;
    }
    if let Some(w) = small_write {
        opts.small_write = SmallWriteMode::ALL
            .iter()
            .find(|(n, _)| *n == w)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                CliError::new(format!(
                    "unknown small-write mode '{w}'; valid small-write modes: {}",
                    names(SmallWriteMode::ALL)
                ))
            })?;
    }
    if let Some(r) = read_cache {
        opts.read_cache = ReadCacheMode::ALL
            .iter()
            .find(|(n, _)| *n == r)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                CliError::new(format!(
                    "unknown read cache mode '{r}'; valid read cache modes: {}",
                    names(ReadCacheMode::ALL)
                ))
            })?;
    }
    opts.exclusive = true;
    Ok(opts)
}

/// The placement mode named `p` (`--placement`), or a usage error (exit 2).
pub fn placement(p: &str) -> CliResult<mnemofs::PlacementMode> {
    let p = p.trim();
    mnemofs::PlacementMode::ALL
        .iter()
        .find(|(n, _)| *n == p)
        .map(|&(_, m)| m)
        .ok_or_else(|| {
            CliError::new(format!(
                "--placement: unknown mode '{p}' (local, interleave, single)"
            ))
            .with_code(2)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_presets_resolve() {
        for p in PRESETS {
            let o = resolve(p.name, None, None).unwrap();
            assert_eq!(o.lock, p.lock);
            assert_eq!(o.small_write, p.small_write);
            assert!(o.exclusive);
        }
    }

    #[test]
    fn the_default_preset_has_every_technique_where_it_pays() {
        let o = resolve(mnemofs::DEFAULT_PRESET, None, None).unwrap();
        assert_eq!(o.lock, LockMode::Segment);
        // LAWN and the read cache on PM, not over DRAM (`mnemofs::medium`).
        assert_eq!(o.small_write, SmallWriteMode::Auto);
        assert_eq!(o.read_cache, ReadCacheMode::Auto);
        assert_eq!(o.medium, None);
        assert_eq!(medium("pm").unwrap(), Medium::Pm);
        assert!(medium("nvm")
            .unwrap_err()
            .msg
            .contains("valid media: dram, pm"));
        let o = resolve_with("full", None, None, Some("off")).unwrap();
        assert_eq!(o.read_cache, ReadCacheMode::Off);
        let e = resolve_with("full", None, None, Some("lru"))
            .unwrap_err()
            .msg;
        assert!(e.contains("unknown read cache mode 'lru'"), "{e}");
    }

    #[test]
    fn an_unknown_preset_is_refused_with_the_valid_list() {
        let e = resolve("fastest", None, None).unwrap_err().msg;
        assert!(e.contains("unknown preset 'fastest'"), "{e}");
        for p in PRESETS {
            assert!(e.contains(p.name), "{e}");
        }
    }

    #[test]
    fn unknown_values_are_refused() {
        let e = resolve("bogus", None, None).unwrap_err().msg;
        assert!(
            e.starts_with("unknown preset 'bogus'; valid presets: nova"),
            "{e}"
        );
        let e = resolve("nova", Some("range"), None).unwrap_err().msg;
        assert!(e.contains("unknown lock mode 'range'"), "{e}");
        let e = resolve("nova", None, Some("log")).unwrap_err().msg;
        assert!(e.contains("unknown small-write mode 'log'"), "{e}");
    }

    #[test]
    fn overrides_apply() {
        let (name, lock) = LockMode::ALL[0];
        let (wname, sw) = SmallWriteMode::ALL[0];
        let o = resolve("nova", Some(name), Some(wname)).unwrap();
        assert_eq!((o.lock, o.small_write), (lock, sw));
        assert!(preset_help().contains("nova"));
        assert!(lock_help().contains("inode"));
        assert!(small_write_help().contains("cow"));
    }
}
