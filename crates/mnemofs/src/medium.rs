//! What the mount's memory is, and the modes that follow from it (`auto`).
//!
//! RCache and LAWN pay only where PM is slower than DRAM: a DRAM copy of a page is
//! worth its bookkeeping when the read it saves costs more than a DRAM read, and
//! an alternate write through the zone when the page write it saves costs more
//! than DRAM bandwidth. Over DRAM (an image file on `/dev/shm`, the default) both
//! cost time and buy nothing: measured on one thread over a DRAM-backed image, the
//! read cache cost up to 20 % on reads and LAWN 20 % on OLTP's 2 KiB writes. So
//! the `auto` modes ([`ReadCacheMode::Auto`], [`SmallWriteMode::Auto`]) take them
//! on PM and leave them off on DRAM.
//!
//! How the medium is told:
//! 1. `MountOptions::medium` names it (tests, `mount --medium`);
//! 2. a PM latency profile (`optane`, `cxl`) is PM by definition: its reads are
//!    charged their latency;
//! 3. a volume none of whose devices is a DAX mapping (`MAP_SYNC` refused: an image
//!    file on tmpfs or in the page cache) is DRAM;
//! 4. a DAX device is measured: a pointer chase of dependent loads over its first
//!    [`PROBE_SPAN`] bytes against the same chase over as much fresh DRAM
//!    ([`pm::Pm::load_latency_ns`]); PM when its loads take at least
//!    [`PM_RATIO`] times DRAM's (Optane DC PMM's reads are about 3× DRAM's, CXL
//!    memory's about 2×; a DAX device carved out of DRAM measures 1×).

use crate::types::{Medium, MountOptions, ReadCacheMode, SmallWriteMode};
use serde::Serialize;

/// Bytes of each probe's span: beyond the last-level cache of current servers
/// (Sapphire Rapids: 105 MiB), so that most loads reach memory.
pub const PROBE_SPAN: u64 = 256 << 20;
/// Dependent loads per probe (~5 ms on DRAM, ~15 ms on Optane).
pub const PROBE_LOADS: u32 = 50_000;
/// Device-to-DRAM load latency ratio from which a DAX device counts as PM.
pub const PM_RATIO: f64 = 1.5;

/// The medium a mount found, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MediumChoice {
    /// The medium.
    pub medium: Medium,
    /// How it was told, in words (`mnemofs stat`, bench results).
    pub why: String,
}

/// The medium of a DAX device whose dependent loads took `device_ns` each against
/// DRAM's `dram_ns` (rule 4 of the module doc).
pub fn judge(device_ns: f64, dram_ns: f64) -> Medium {
    if device_ns >= dram_ns * PM_RATIO {
        Medium::Pm
    } else {
        Medium::Dram
    }
}

/// Tells the medium of `volume` (module doc).
pub(crate) fn choose(volume: &pm::Volume, opts: &MountOptions) -> MediumChoice {
    if let Some(m) = opts.medium {
        return MediumChoice {
            medium: m,
            why: format!("{} as the mount said", m.name()),
        };
    }
    let profile = volume.profile();
    if profile.name != pm::PmProfile::DRAM.name {
        return MediumChoice {
            medium: Medium::Pm,
            why: format!("pm: latency profile {}", profile.name),
        };
    }
    let dax: Vec<&pm::Pm> = (0..volume.device_count())
        .filter_map(|i| volume.device(i).map(|d| d.0))
        .filter(|d| d.map_mode() == pm::MapMode::Sync)
        .collect();
    let Some(first) = dax.first() else {
        return MediumChoice {
            medium: Medium::Dram,
            why: "dram: an image file in DRAM (no DAX mapping)".into(),
        };
    };
    let device_ns = first.load_latency_ns(PROBE_SPAN, PROBE_LOADS);
    match pm::dram_load_latency_ns(PROBE_SPAN, PROBE_LOADS) {
        Some(dram_ns) => {
            let medium = judge(device_ns, dram_ns);
            MediumChoice {
                medium,
                why: format!(
                    "{}: DAX loads measured {device_ns:.0} ns, DRAM's {dram_ns:.0} ns \
                     (PM from {PM_RATIO}x)",
                    medium.name()
                ),
            }
        }
        // No DRAM to compare with: a DAX device is PM unless shown otherwise.
        None => MediumChoice {
            medium: Medium::Pm,
            why: format!("pm: DAX loads measured {device_ns:.0} ns (no DRAM to compare)"),
        },
    }
}

/// `opts` with its `auto` modes made concrete for `medium`.
pub(crate) fn resolve(opts: &MountOptions, medium: Medium) -> MountOptions {
    let mut o = opts.clone();
    if o.read_cache == ReadCacheMode::Auto {
        o.read_cache = match medium {
            Medium::Pm => ReadCacheMode::Rcache,
            Medium::Dram => ReadCacheMode::Off,
        };
    }
    if o.small_write == SmallWriteMode::Auto {
        o.small_write = match medium {
            Medium::Pm => SmallWriteMode::Lawn,
            Medium::Dram => SmallWriteMode::Cow,
        };
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dax_device_is_pm_from_the_ratio_on() {
        assert_eq!(judge(100.0, 100.0), Medium::Dram);
        assert_eq!(judge(140.0, 100.0), Medium::Dram);
        assert_eq!(judge(150.0, 100.0), Medium::Pm);
        assert_eq!(judge(320.0, 95.0), Medium::Pm);
    }

    #[test]
    fn auto_modes_follow_the_medium_and_named_ones_stay() {
        let mut o = MountOptions {
            read_cache: ReadCacheMode::Auto,
            small_write: SmallWriteMode::Auto,
            ..Default::default()
        };
        let pm = resolve(&o, Medium::Pm);
        assert_eq!(
            (pm.read_cache, pm.small_write),
            (ReadCacheMode::Rcache, SmallWriteMode::Lawn)
        );
        let dram = resolve(&o, Medium::Dram);
        assert_eq!(
            (dram.read_cache, dram.small_write),
            (ReadCacheMode::Off, SmallWriteMode::Cow)
        );
        o.read_cache = ReadCacheMode::Rcache;
        o.small_write = SmallWriteMode::Finelog;
        let named = resolve(&o, Medium::Dram);
        assert_eq!(
            (named.read_cache, named.small_write),
            (ReadCacheMode::Rcache, SmallWriteMode::Finelog)
        );
    }

    #[test]
    fn the_medium_is_told_by_option_then_profile_then_mapping() {
        let mut v = pm::Volume::single(pm::Pm::anonymous(1 << 20).unwrap());
        let mut o = MountOptions::default();
        let c = choose(&v, &o);
        assert_eq!(c.medium, Medium::Dram, "{}", c.why);
        v.set_profile(pm::PmProfile::OPTANE);
        let c = choose(&v, &o);
        assert_eq!(c.medium, Medium::Pm, "{}", c.why);
        assert!(c.why.contains("optane"), "{}", c.why);
        o.medium = Some(Medium::Dram);
        assert_eq!(choose(&v, &o).medium, Medium::Dram);
    }
}
