//! `mnemofs`: format, mount, check and inspect mnemofs file systems.

/// mimalloc instead of glibc's malloc: the engine allocates and frees small
/// per-file objects (inode state, page-index leaf, lock chunk) and per-call buffers
/// on every create, unlink and read; glibc spent 10-15 % of `varmail`'s CPU in
/// malloc, free and their chunk consolidation (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod cluster_bench;
#[cfg(feature = "crashtest")]
mod crashtest;
mod devs;
mod error;
mod fsck;
#[cfg(feature = "crashtest")]
mod fuzz;
mod mds;
mod mkfs;
mod modes;
mod mount;
mod output;
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
