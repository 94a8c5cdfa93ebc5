//! `mnemofs generate`: man pages and shell completions, generated from the command
//! line definition itself (so they never disagree with `--help`).

use crate::error::{io_error, CliError, CliResult};
use clap::{Args, CommandFactory, Subcommand};
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub what: GenerateCmd,
}

#[derive(Subcommand, Debug)]
pub enum GenerateCmd {
    /// Write one man page per command into DIR (mnemofs.1, mnemofs-mount.1,
    /// mnemofs-bench-compare.1, ...); DIR is created when missing
    Man {
        /// Directory to write the pages into (e.g. /usr/local/share/man/man1)
        dir: PathBuf,
    },
    /// Write the completion script for SHELL to standard output, or into DIR
    /// (as mnemofs.bash, _mnemofs or mnemofs.fish)
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: CompletionShell,
        /// Directory to write the script into; standard output when absent
        dir: Option<PathBuf>,
    },
}

/// The shells completions are generated for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionShell {
    /// GNU bash (bash-completion)
    Bash,
    /// Z shell
    Zsh,
    /// fish
    Fish,
}

impl CompletionShell {
    fn shell(self) -> Shell {
        match self {
            CompletionShell::Bash => Shell::Bash,
            CompletionShell::Zsh => Shell::Zsh,
            CompletionShell::Fish => Shell::Fish,
        }
    }
}

/// The binary's name, as the pages and the completion scripts call it.
const BIN: &str = "mnemofs";

pub fn run(args: &GenerateArgs) -> CliResult<()> {
    match &args.what {
        GenerateCmd::Man { dir } => {
            let written = man_pages(dir)?;
            crate::output::emit(&format!("wrote {written} man pages into {}", dir.display()));
            Ok(())
        }
        GenerateCmd::Completions { shell, dir } => completions(*shell, dir.as_deref()),
    }
}

/// The complete command line definition, built (subcommands carry their display
/// names, `mnemofs-mount`, ...) and without clap's implicit `help` subcommand, which
/// would otherwise get a page of its own.
fn command() -> clap::Command {
    let mut cmd = crate::Cli::command()
        .name(BIN)
        .bin_name(BIN)
        .disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// Writes the page of `cmd` and of each of its visible subcommands, depth first, into
/// `dir`; returns how many pages were written.
fn man_pages(dir: &Path) -> CliResult<usize> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
    let mut written = 0;
    write_pages(&command(), dir, &mut written)?;
    Ok(written)
}

fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut usize) -> CliResult<()> {
    // `.TH`'s date field (the footer's middle) holds the version: a date would make
    // the pages of two builds of one version differ, and an empty field would shift
    // the fields after it.
    let man = clap_mangen::Man::new(cmd.clone())
        .date(env!("CARGO_PKG_VERSION"))
        .source(BIN)
        .manual("mnemofs manual");
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| CliError::new(format!("cannot render {}: {e}", man.get_filename())))?;
    let path = dir.join(man.get_filename());
    std::fs::write(&path, page).map_err(|e| io_error(&path, &e))?;
    *written += 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

fn completions(shell: CompletionShell, dir: Option<&Path>) -> CliResult<()> {
    let mut cmd = command();
    let shell = shell.shell();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
            let path = dir.join(clap_complete::Generator::file_name(&shell, BIN));
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, BIN, &mut script);
            std::fs::write(&path, script).map_err(|e| io_error(&path, &e))?;
            crate::output::emit(&format!("wrote {}", path.display()));
        }
        None => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, BIN, &mut script);
            let mut out = std::io::stdout().lock();
            match out.write_all(&script).and_then(|()| out.flush()) {
                // A reader that went away (`... | head`) is not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(CliError::new(format!("cannot write the output: {e}")));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_gets_a_page_named_after_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let n = man_pages(dir.path()).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), n);
        for want in [
            "mnemofs.1",
            "mnemofs-mount.1",
            "mnemofs-mkfs.1",
            "mnemofs-generate-man.1",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        // Hidden commands and clap's implicit `help` get none.
        assert!(!names
            .iter()
            .any(|n| n.contains("guard") || n.contains("help")));
    }
}
