//! `mnemofs fsck`: exit 0 clean, 1 problems found, 2 unusable input.

use crate::error::{fs_error, retry_if_busy, CliError, CliResult};
use crate::report::render_fsck;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct FsckArgs {
    /// Image file or PM device to check (read-only; it must not be mounted); the
    /// devices of a volume comma-separated, in any order
    pub image: PathBuf,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Returns the exit status (0 clean, 1 problems); errors exit 2.
pub fn run(args: &FsckArgs) -> CliResult<i32> {
    let specs = crate::devs::parse(&args.image).map_err(|e| e.with_code(2))?;
    let report = retry_if_busy(|| mnemofs::fsck_devices(&specs))
        .map_err(|e| fs_error(&args.image, &e).with_code(2))?;
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::new(format!("cannot encode the report: {e}")).with_code(2))?;
        crate::output::emit(&text);
    } else {
        crate::output::emit(&render_fsck(&args.image.display().to_string(), &report));
    }
    Ok(if report.is_clean() { 0 } else { 1 })
}
