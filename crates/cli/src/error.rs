//! CLI errors: a one-line message and an exit status.

use mnemofs::FsError;
use mnemofs_fuse::mountpoint::strip_os_error;
use std::path::Path;
use std::time::{Duration, Instant};

/// An error that ends the command: printed as `mnemofs: <msg>`, exits with `code`.
#[derive(Debug)]
pub struct CliError {
    pub msg: String,
    pub code: i32,
}

impl CliError {
    pub fn new(msg: impl Into<String>) -> CliError {
        CliError {
            msg: one_line(&msg.into()),
            code: 1,
        }
    }

    pub fn with_code(mut self, code: i32) -> CliError {
        self.code = code;
        self
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// An engine error about `path`, with the path named once, on one line. An image
/// that is not a usable mnemofs (corrupt, foreign, too small) exits 2.
pub fn fs_error(path: &Path, err: &FsError) -> CliError {
    let shown = path.display();
    let code = match err {
        FsError::Corrupt(_) | FsError::NotMnemofs(_) | FsError::ImageTooSmall { .. } => 2,
        _ => 1,
    };
    let e = CliError::new(match err {
        // These already name the path.
        FsError::Pm(_) | FsError::AlreadyFormatted { .. } | FsError::Volume(_) => {
            without_os_error_codes(&err.to_string())
        }
        FsError::Io(e) => format!("{shown}: {}", strip_os_error(e)),
        _ => format!("{shown}: {err}"),
    });
    e.with_code(code)
}

/// How long a command waits for an image that another mnemofs process holds. A
/// daemon releases its image a moment after `umount` returns (the unmount itself
/// does not wait for it), so `umount /mnt && mnemofs fsck img` would otherwise race.
pub const BUSY_GRACE: Duration = Duration::from_secs(3);

/// Whether an engine error says another process holds the image.
pub fn is_busy(err: &FsError) -> bool {
    matches!(err, FsError::Busy | FsError::Pm(pm::PmError::Busy { .. }))
}

/// Runs `op`, retrying for up to [`BUSY_GRACE`] while the image is busy.
pub fn retry_if_busy<T>(mut op: impl FnMut() -> mnemofs::Result<T>) -> mnemofs::Result<T> {
    let deadline = Instant::now() + BUSY_GRACE;
    loop {
        match op() {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// An I/O error about `path`.
pub fn io_error(path: &Path, err: &std::io::Error) -> CliError {
    CliError::new(format!("{}: {}", path.display(), strip_os_error(err)))
}

/// Drops the " (os error N)" that `io::Error` appends to its text.
pub fn without_os_error_codes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(" (os error ") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + " (os error ".len()..];
        match tail.find(')') {
            Some(j) if tail[..j].chars().all(|c| c.is_ascii_digit()) => rest = &tail[j + 1..],
            _ => {
                out.push_str(" (os error ");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Joins the lines of a message into one.
pub fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A clap error as one line: the lines before the usage, without `error:` and tips.
pub fn clap_one_line(rendered: &str) -> String {
    let mut parts = Vec::new();
    for line in rendered.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if line.is_empty() || line.starts_with("tip:") {
            continue;
        }
        parts.push(line.strip_prefix("error:").unwrap_or(line).trim());
    }
    let msg = parts.join(" ");
    if msg.is_empty() {
        "invalid command line (see mnemofs --help)".to_string()
    } else {
        format!("{msg} (see --help)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let r = "error: the following required arguments were not provided:\n  <IMAGE>\n  <MOUNTPOINT>\n\nUsage: mnemofs mount <IMAGE> <MOUNTPOINT>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_one_line(r),
            "the following required arguments were not provided: <IMAGE> <MOUNTPOINT> (see --help)"
        );
        let r = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: mnemofs fsck [OPTIONS] <IMAGE>\n";
        assert_eq!(
            clap_one_line(r),
            "unexpected argument '--bogus' found (see --help)"
        );
    }

    #[test]
    fn engine_errors_name_the_path_once() {
        let p = Path::new("/x/img");
        assert_eq!(
            fs_error(p, &FsError::ImageTooSmall { size: 1, min: 2 }).msg,
            "/x/img: image too small: 1 bytes, the minimum is 2 bytes"
        );
        let e = FsError::AlreadyFormatted { path: p.into() };
        assert_eq!(fs_error(p, &e).msg, e.to_string());
        let io = FsError::Io(std::io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(fs_error(p, &io).msg, "/x/img: Permission denied");
        assert_eq!(one_line("a\n b \n\nc"), "a b c");
        assert!(is_busy(&FsError::Busy));
        assert_eq!(
            without_os_error_codes("a: No such file or directory (os error 2)"),
            "a: No such file or directory"
        );
        assert_eq!(without_os_error_codes("x (os error y)"), "x (os error y)");
        assert!(!is_busy(&FsError::NotFound));
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn retries_only_while_busy() {
        let mut calls = 0;
        let r = retry_if_busy(|| {
            calls += 1;
            if calls < 3 {
                Err(FsError::Busy)
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r.unwrap(), 3);
        let mut calls = 0;
        let r: mnemofs::Result<()> = retry_if_busy(|| {
            calls += 1;
            Err(FsError::NotFound)
        });
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
