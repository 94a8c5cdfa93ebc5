//! `mnemofs`: format, mount, check and inspect mnemofs file systems.

/// mimalloc instead of glibc's malloc: the engine allocates and frees small
/// per-file objects (inode state, page-index leaf, lock chunk) and per-call buffers
/// on every create, unlink and read; glibc spent 10-15 % of `varmail`'s CPU in
/// malloc, free and their chunk consolidation (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_allow_thp` in mimalloc v3.3's `mi_option_t` (libmimalloc-sys names no
/// constant for it; Cargo.toml pins the version whose C sources say 43).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// The metadata server's heap on 4 KiB pages, its PM image on 2 MiB ones.
/// With the kernel's THP mode `madvise` (Debian's default), mimalloc advises huge
/// pages on the arenas it maps, so the first touch of each 2 MiB stretch of heap
/// zeroes all of it. A metadata server's heap grows with every file created, a
/// little at a time from each of its threads, and it spent 6-7 % of all CPU of a
/// small-file cluster run in the kernel zeroing heap huge pages (docs/BENCHMARKS.md,
/// "Cluster"). (Every other subcommand keeps the advice: the local small-file run is
/// 2-3 % slower without it. In THP mode `always` the kernel gives the heap huge
/// pages unadvised, and this changes nothing.) mimalloc's own switch,
/// `MIMALLOC_ALLOW_THP=0`, read when mimalloc initialises, also turns THP off for the
/// whole process with `prctl`, which would map the PM image with 4 KiB pages too.
/// So this constructor, run before the Rust runtime's first allocation (and, with
/// the C compiler mimalloc is built with here, before mimalloc's own constructor,
/// whose later `mi_process_init` is then a no-op), initialises mimalloc with THP
/// allowed — no `prctl`, and no arena mapped: the main thread's heap is static, and
/// the page map is not a multiple of 2 MiB, so it is never advised — and then turns
/// the option off: the arenas mapped from then on get no huge-page advice, and the
/// image's mapping keeps the kernel's policy. (Arenas reserved at initialisation by
/// `MIMALLOC_RESERVE_OS_MEMORY` would keep it.) glibc passes a constructor in
/// `.init_array` the program's arguments (Rust's std reads them the same way); the
/// subcommand is the first argument, as `mnemofs` has no global options.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn heap_on_small_pages(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    if argc < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc calls `.init_array` functions with the process's argc and argv:
    // argv holds argc valid pointers to NUL-terminated strings (checked non-null
    // again below, and argc ≥ 2 above).
    let first = unsafe { *argv.add(1) };
    if first.is_null() {
        return;
    }
    // SAFETY: a non-null argv entry is a NUL-terminated string that lives as long as
    // the process.
    if unsafe { std::ffi::CStr::from_ptr(first) }.to_bytes() != b"mds" {
        return;
    }
    // SAFETY: both calls are mimalloc's public API. mi_process_init runs once (a
    // later call is a no-op) and tolerates running in a constructor (it reads the
    // environment through `environ` and allocates nothing); mi_option_set only
    // stores a value in mimalloc's option table. A constructor runs on the one
    // thread there is.
    unsafe {
        libmimalloc_sys::mi_process_init();
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array.00102")]
static HEAP_ON_SMALL_PAGES: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = heap_on_small_pages;

mod bench;
mod cluster_bench;
#[cfg(feature = "crashtest")]
mod crashtest;
mod devs;
mod error;
mod fsck;
#[cfg(feature = "crashtest")]
mod fuzz;
mod generate;
mod guard;
mod mds;
mod mkfs;
mod modes;
mod mount;
mod output;
mod paper;
mod remount;
mod report;
mod size;
mod stat;

use clap::{Parser, Subcommand};
use error::{clap_one_line, one_line, CliError};
use std::io::Write;

#[derive(Parser, Debug)]
#[command(
    name = "mnemofs",
    version,
    about = "mnemofs: a persistent-memory file system in user space (FUSE)",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Format an image file or PM device as an empty mnemofs
    Mkfs(mkfs::MkfsArgs),
    /// Mount a mnemofs on an empty directory (or, with --mds, a cluster client)
    Mount(mount::MountArgs),
    /// Serve a volume's namespace and space to cluster clients (metadata server)
    Mds(mds::MdsArgs),
    /// Check an image without changing it (exit 0 clean, 1 problems, 2 unusable)
    Fsck(fsck::FsckArgs),
    /// Show geometry, space, inodes, PM counters and modes of an image or mount point
    Stat(stat::StatArgs),
    /// Benchmarks: a workload in-process, presets side by side, kernel peers, the suite
    Bench(Box<bench::BenchArgs>),
    /// Explore crash states of generated workloads (exit 0 none, 1 violations, 2 usage)
    #[cfg(feature = "crashtest")]
    Crashtest(crashtest::CrashtestArgs),
    /// Mutation fuzzer for hostile images: mount, fsck, a workload (exit 0 none, 1 failures, 2 usage)
    #[cfg(feature = "crashtest")]
    Fuzz(fuzz::FuzzArgs),
    /// Write man pages or shell completions generated from this command line
    Generate(generate::GenerateArgs),
    /// (internal) Watch a mount's daemon; abort its connection if it dies mounted
    #[command(hide = true)]
    Guard(guard::GuardArgs),
    /// Not in this build (built without the `crashtest` feature): refused, exit 2
    #[cfg(not(feature = "crashtest"))]
    #[command(hide = true, disable_help_flag = true)]
    Crashtest {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
                _ => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "mnemofs: {}",
                        clap_one_line(&e.to_string())
                    );
                    std::process::exit(2);
                }
            }
        }
    };
    let result = match &cli.cmd {
        Cmd::Mkfs(a) => mkfs::run(a).map(|()| 0),
        Cmd::Mount(a) => mount::run(a).map(|()| 0),
        Cmd::Mds(a) => mds::run(a).map(|()| 0),
        Cmd::Fsck(a) => fsck::run(a),
        Cmd::Stat(a) => stat::run(a).map(|()| 0),
        Cmd::Generate(a) => generate::run(a).map(|()| 0),
        Cmd::Guard(a) => guard::run(a).map(|()| 0),
        Cmd::Bench(a) => bench::run(a),
        #[cfg(feature = "crashtest")]
        Cmd::Crashtest(a) => crashtest::run(a),
        #[cfg(feature = "crashtest")]
        Cmd::Fuzz(a) => fuzz::run(a),
        #[cfg(not(feature = "crashtest"))]
        Cmd::Crashtest { .. } => Err(CliError::new(
            "this mnemofs was built without the crash explorer and its fault injection \
             (cargo feature `crashtest` of mnemofs-cli, on by default); rebuild with \
             default features to run crashtest or --inject-bug",
        )
        .with_code(2)),
    };
    let code = match result {
        Ok(code) => code,
        Err(CliError { msg, code }) => {
            let _ = writeln!(std::io::stderr(), "mnemofs: {msg}");
            code
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// Last resort: a panic prints one line and exits 101. A mounted file system is
/// detached first so that the mount point is not left dead; the image was not
/// unmounted cleanly and is recovered at its next mount.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let what = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "panic".to_string()
        };
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let mut line = format!("internal error: {}{at}", one_line(&what));
        if let Some(mp) = mount::MOUNTED_AT.get() {
            if let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes()) {
                // SAFETY: `c` is a valid NUL-terminated path for the call.
                if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                    line.push_str(&format!(
                        "; detached {} (the image is recovered at its next mount)",
                        mp.display()
                    ));
                }
            }
        }
        mount::report_failure_to_parent(&line);
        let _ = writeln!(std::io::stderr(), "mnemofs: {line}");
        std::process::exit(101);
    }));
}
