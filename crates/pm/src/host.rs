//! What this layer decides from the host, and the environment variables that
//! override each decision, so that one machine can run every path.
//!
//! Each choice is made once per process: from CPUID or a measurement, unless its
//! variable names a value. `auto` (or the variable unset or empty) keeps the
//! host's choice.
//!
//! | variable | values | decides |
//! |---|---|---|
//! | `MNEMOFS_FLUSH` | `auto`, `clwb`, `clflushopt`, `clflush` | the write-back instruction ([`FlushKind`]) |
//! | `MNEMOFS_AVX` | `auto`, `off` | `off` runs as on a CPU without AVX: 16-byte atomic stores by `lock cmpxchg16b` ([`Store16Insn`]), non-temporal copies 16 bytes at a time |
//! | `MNEMOFS_DESC_STORE` | `auto`, `nt`, `cached` | what [`crate::Pm::calibrate_store16`] returns, without measuring |
//! | `MNEMOFS_CLOCK` | `auto`, `monotonic` | what [`crate::SpinClock`] spins on: the time-stamp counter where it is invariant, or the monotonic clock |
//! | `MNEMOFS_CPUS` | `auto`, 1 to 1024 | the CPU count the engine sizes by ([`HostChoices::cpus`]): a new image's per-CPU structures, the range locks' reader slots, the FUSE threads |
//! | `MNEMOFS_HUGE_PAGES` | `auto`, `off` | whether the region and the engine's large DRAM tables are advised `MADV_HUGEPAGE` |
//!
//!
//! Where fresh scratch images go (tests, `mnemofs bench`) is a host fact too:
//! [`scratch_dir`], which `MNEMOFS_SCRATCH` overrides (a tmpfs mounted
//! `huge=always` gives the images 2 MiB pages, one mounted `huge=never` 4 KiB).
//!
//! A value the CPU cannot execute (`clwb` on a CPU without it, `MNEMOFS_AVX=off`
//! without cmpxchg16b) is refused, as is any other word: [`HostChoices::get`] returns the error, and
//! every mapping ([`crate::Pm::open`], [`crate::Pm::create`],
//! [`crate::Pm::anonymous`]) fails with it.

use crate::flush::FlushKind;
use crate::region::Store16;
use std::sync::OnceLock;

/// The directory for fresh scratch images: `MNEMOFS_SCRATCH` when set, else
/// `/dev/shm` (memory, as PM) when present, else the temporary directory.
pub fn scratch_dir() -> std::path::PathBuf {
    match std::env::var_os("MNEMOFS_SCRATCH") {
        Some(d) if !d.is_empty() => d.into(),
        _ if std::path::Path::new("/dev/shm").is_dir() => "/dev/shm".into(),
        _ => std::env::temp_dir(),
    }
}

/// The instruction an aligned 16-byte atomic store uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store16Insn {
    /// One SSE `movdqa` (single-copy atomic on CPUs with AVX).
    Sse,
    /// `lock cmpxchg16b` (a locked read-modify-write).
    Cmpxchg16b,
    /// A plain store (neither instruction available; not atomic).
    Plain,
}

impl Store16Insn {
    /// The instruction's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Store16Insn::Sse => "sse",
            Store16Insn::Cmpxchg16b => "cmpxchg16b",
            Store16Insn::Plain => "plain",
        }
    }
}

/// An environment variable with a value this host cannot honour.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value}: {why}")]
pub struct HostError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// Why it is refused.
    pub why: String,
}

/// The host-dependent choices of this process, each either detected or forced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostChoices {
    /// The write-back instruction.
    pub flush: FlushKind,
    /// `flush` came from `MNEMOFS_FLUSH`.
    pub flush_forced: bool,
    /// AVX is used (present, and not turned off by `MNEMOFS_AVX=off`).
    pub avx: bool,
    /// The 16-byte atomic store's instruction (SSE with AVX, else cmpxchg16b).
    pub store16: Store16Insn,
    /// The descriptor store forced by `MNEMOFS_DESC_STORE`; `None`: measured.
    pub desc_store: Option<Store16>,
    /// Mappings are advised `MADV_HUGEPAGE` (not when `MNEMOFS_HUGE_PAGES=off`).
    pub huge_pages: bool,
    /// The busy-wait clock may use the time-stamp counter (not when
    /// `MNEMOFS_CLOCK=monotonic`).
    pub tsc: bool,
    /// CPUs to size by: `MNEMOFS_CPUS`, else those this process may run on.
    pub cpus: usize,
    /// `cpus` came from `MNEMOFS_CPUS`.
    pub cpus_forced: bool,
    /// The variables that forced a choice, as `NAME=value`.
    pub forced: Vec<String>,
}

impl HostChoices {
    /// The process's choices: read from the environment on first use, then fixed.
    pub fn get() -> Result<&'static HostChoices, HostError> {
        static CHOICES: OnceLock<Result<HostChoices, HostError>> = OnceLock::new();
        CHOICES
            .get_or_init(|| HostChoices::from_lookup(|v| std::env::var(v).ok()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The choices given what `lookup` says of each variable and what this CPU has.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<HostChoices, HostError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::resolve(lookup, Cpu::detect(), cpus)
    }

    /// The choices in one line, for reports: `clwb, 16-byte stores by sse, 2 CPUs,
    /// huge pages advised; forced: MNEMOFS_DESC_STORE=nt` (the last part only when
    /// a variable forced something).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}, 16-byte stores by {}, {} CPUs, huge pages {}",
            self.flush.name(),
            self.store16.name(),
            self.cpus,
            if self.huge_pages {
                "advised"
            } else {
                "not advised"
            },
        );
        if !self.forced.is_empty() {
            s.push_str("; forced: ");
            s.push_str(&self.forced.join(" "));
        }
        s
    }

    /// CPUs to size by ([`HostChoices::cpus`]); 1 when the environment is refused
    /// (every mapping then fails with the reason).
    pub fn cpu_count() -> usize {
        Self::get().map_or(1, |h| h.cpus)
    }

    fn resolve(
        lookup: impl Fn(&str) -> Option<String>,
        cpu: Cpu,
        host_cpus: usize,
    ) -> Result<HostChoices, HostError> {
        let forced = std::cell::RefCell::new(Vec::new());
        let get = |var: &'static str| -> Option<(&'static str, String)> {
            let v = lookup(var)?.trim().to_ascii_lowercase();
            let set = !v.is_empty() && v != "auto";
            if set {
                forced.borrow_mut().push(format!("{var}={v}"));
            }
            set.then_some((var, v))
        };
        let refuse = |var: &'static str, value: &str, why: &str| HostError {
            var,
            value: value.to_string(),
            why: why.to_string(),
        };
        let (flush, flush_forced) = match get("MNEMOFS_FLUSH") {
            None => (cpu.best_flush(), false),
            Some((var, v)) => {
                let kind = match v.as_str() {
                    "clwb" => FlushKind::Clwb,
                    "clflushopt" => FlushKind::Clflushopt,
                    "clflush" => FlushKind::Clflush,
                    _ => {
                        return Err(refuse(
                            var,
                            &v,
                            "expected auto, clwb, clflushopt or clflush",
                        ))
                    }
                };
                if !cpu.has_flush(kind) {
                    return Err(refuse(var, &v, "this CPU does not have that instruction"));
                }
                (kind, true)
            }
        };
        let avx = match get("MNEMOFS_AVX") {
            None => cpu.avx,
            Some((var, v)) if v == "off" => {
                if cpu.x86 && !cpu.cx16 {
                    return Err(refuse(
                        var,
                        &v,
                        "this CPU has no cmpxchg16b to store 16 bytes with",
                    ));
                }
                false
            }
            Some((var, v)) => return Err(refuse(var, &v, "expected auto or off")),
        };
        let store16 = if avx {
            Store16Insn::Sse
        } else if cpu.cx16 {
            Store16Insn::Cmpxchg16b
        } else {
            Store16Insn::Plain
        };
        let desc_store = match get("MNEMOFS_DESC_STORE") {
            None => None,
            Some((_, v)) if v == "nt" => Some(Store16::NonTemporal),
            Some((_, v)) if v == "cached" => Some(Store16::Cached),
            Some((var, v)) => return Err(refuse(var, &v, "expected auto, nt or cached")),
        };
        let huge_pages = match get("MNEMOFS_HUGE_PAGES") {
            None => true,
            Some((_, v)) if v == "off" => false,
            Some((var, v)) => return Err(refuse(var, &v, "expected auto or off")),
        };
        let tsc = match get("MNEMOFS_CLOCK") {
            None => true,
            Some((_, v)) if v == "monotonic" => false,
            Some((var, v)) => return Err(refuse(var, &v, "expected auto or monotonic")),
        };
        let (cpus, cpus_forced) = match get("MNEMOFS_CPUS") {
            None => (host_cpus.max(1), false),
            Some((var, v)) => match v.parse::<usize>() {
                Ok(n @ 1..=1024) => (n, true),
                _ => return Err(refuse(var, &v, "expected auto or a count from 1 to 1024")),
            },
        };
        Ok(HostChoices {
            flush,
            flush_forced,
            avx,
            store16,
            desc_store,
            huge_pages,
            tsc,
            cpus,
            cpus_forced,
            forced: forced.into_inner(),
        })
    }
}

/// What the CPU offers, from CPUID.
#[derive(Clone, Copy, Debug)]
struct Cpu {
    x86: bool,
    clwb: bool,
    clflushopt: bool,
    avx: bool,
    cx16: bool,
}

impl Cpu {
    #[cfg(target_arch = "x86_64")]
    fn detect() -> Cpu {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        // cpuid is available on every x86-64 CPU (the intrinsics are safe to call).
        let max_leaf = __cpuid(0).eax;
        let l7 = if max_leaf >= 7 {
            __cpuid_count(7, 0).ebx
        } else {
            0
        };
        Cpu {
            x86: true,
            clwb: l7 & (1 << 24) != 0,
            clflushopt: l7 & (1 << 23) != 0,
            avx: std::arch::is_x86_feature_detected!("avx"),
            cx16: std::arch::is_x86_feature_detected!("cmpxchg16b"),
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> Cpu {
        Cpu {
            x86: false,
            clwb: false,
            clflushopt: false,
            avx: false,
            cx16: false,
        }
    }

    fn has_flush(self, kind: FlushKind) -> bool {
        match kind {
            FlushKind::Clwb => self.clwb,
            FlushKind::Clflushopt => self.clflushopt,
            FlushKind::Clflush => self.x86,
            FlushKind::None => !self.x86,
        }
    }

    fn best_flush(self) -> FlushKind {
        [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush]
            .into_iter()
            .find(|&k| self.has_flush(k))
            .unwrap_or(FlushKind::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: Cpu = Cpu {
        x86: true,
        clwb: true,
        clflushopt: true,
        avx: true,
        cx16: true,
    };

    fn with(vars: &[(&str, &str)], cpu: Cpu) -> Result<HostChoices, HostError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HostChoices::resolve(
            |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            cpu,
            2,
        )
    }

    #[test]
    fn unset_and_auto_keep_what_the_cpu_offers() {
        for vars in [
            &[][..],
            &[("MNEMOFS_FLUSH", "auto"), ("MNEMOFS_AVX", "")][..],
        ] {
            let c = with(vars, FULL).unwrap();
            assert_eq!((c.flush, c.flush_forced), (FlushKind::Clwb, false));
            assert_eq!((c.avx, c.store16), (true, Store16Insn::Sse));
            assert_eq!((c.desc_store, c.huge_pages, c.tsc), (None, true, true));
            assert_eq!((c.cpus, c.cpus_forced), (2, false));
            assert_eq!(
                c.summary(),
                "clwb, 16-byte stores by sse, 2 CPUs, huge pages advised"
            );
        }
        let old = Cpu {
            clwb: false,
            clflushopt: false,
            avx: false,
            ..FULL
        };
        let c = with(&[], old).unwrap();
        assert_eq!(
            (c.flush, c.store16),
            (FlushKind::Clflush, Store16Insn::Cmpxchg16b)
        );
    }

    #[test]
    fn each_variable_forces_its_choice() {
        let c = with(
            &[
                ("MNEMOFS_FLUSH", "clflushopt"),
                ("MNEMOFS_AVX", "OFF"),
                ("MNEMOFS_DESC_STORE", "cached"),
                ("MNEMOFS_HUGE_PAGES", "off"),
                ("MNEMOFS_CLOCK", "monotonic"),
                ("MNEMOFS_CPUS", "64"),
            ],
            FULL,
        )
        .unwrap();
        assert_eq!((c.flush, c.flush_forced), (FlushKind::Clflushopt, true));
        assert_eq!((c.avx, c.store16), (false, Store16Insn::Cmpxchg16b));
        assert_eq!((c.desc_store, c.huge_pages), (Some(Store16::Cached), false));
        assert_eq!((c.tsc, c.cpus, c.cpus_forced), (false, 64, true));
        assert_eq!(
            c.summary(),
            "clflushopt, 16-byte stores by cmpxchg16b, 64 CPUs, huge pages not advised; \
             forced: MNEMOFS_FLUSH=clflushopt MNEMOFS_AVX=off MNEMOFS_DESC_STORE=cached \
             MNEMOFS_HUGE_PAGES=off MNEMOFS_CLOCK=monotonic MNEMOFS_CPUS=64"
        );
        let c = with(
            &[("MNEMOFS_FLUSH", "clflush"), ("MNEMOFS_DESC_STORE", "nt")],
            FULL,
        )
        .unwrap();
        assert_eq!(c.flush, FlushKind::Clflush);
        assert_eq!(c.desc_store, Some(Store16::NonTemporal));
    }

    #[test]
    fn what_the_cpu_lacks_or_an_unknown_word_is_refused() {
        let no_clwb = Cpu {
            clwb: false,
            cx16: false,
            ..FULL
        };
        let e = with(&[("MNEMOFS_FLUSH", "clwb")], no_clwb).unwrap_err();
        assert_eq!((e.var, e.value.as_str()), ("MNEMOFS_FLUSH", "clwb"));
        assert!(e.to_string().contains("does not have"), "{e}");
        assert!(with(&[("MNEMOFS_AVX", "off")], no_clwb).is_err());
        for (var, v) in [
            ("MNEMOFS_FLUSH", "fast"),
            ("MNEMOFS_AVX", "on"),
            ("MNEMOFS_DESC_STORE", "yes"),
            ("MNEMOFS_HUGE_PAGES", "on"),
            ("MNEMOFS_CLOCK", "tsc"),
            ("MNEMOFS_CPUS", "0"),
            ("MNEMOFS_CPUS", "1025"),
            ("MNEMOFS_CPUS", "many"),
        ] {
            let e = with(&[(var, v)], FULL).unwrap_err();
            assert_eq!(e.var, var);
            assert!(
                e.to_string().starts_with(&format!("{var}={v}: expected")),
                "{e}"
            );
        }
    }
}
