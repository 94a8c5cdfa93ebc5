//! Standard output that survives a closed pipe (`mnemofs stat img | head -1`).

use std::io::Write;

/// Prints `text` and a newline. A reader that went away is not an error (the exit
/// status stays the command's); any other write error ends the process.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(std::io::stderr(), "mnemofs: cannot write the output: {e}");
            std::process::exit(1);
        }
    }
}

/// A line on standard error; errors writing it are ignored (a daemon's log may be
/// gone, a terminal may have hung up).
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}
