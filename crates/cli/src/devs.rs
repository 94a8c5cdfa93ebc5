//! Device lists on the command line: `DEV[@NODE][,DEV[@NODE]...]` wherever an image
//! is taken (mkfs, mount, fsck, stat, bench). One path without a comma is the
//! one-device volume it always was.

use crate::error::{fs_error, io_error, CliResult};
use mnemofs::DeviceSpec;
use std::path::{Path, PathBuf};

/// The devices an image argument names.
pub fn parse(arg: &Path) -> CliResult<Vec<DeviceSpec>> {
    let text = arg.to_string_lossy();
    if !text.contains(',') && !text.contains('@') {
        return Ok(vec![DeviceSpec {
            path: arg.to_path_buf(),
            node: None,
        }]);
    }
    DeviceSpec::parse_list(&text).map_err(|e| fs_error(arg, &e))
}

/// The same list with every path made absolute (a daemon runs from `/`).
pub fn canonical(arg: &Path) -> CliResult<PathBuf> {
    let specs = parse(arg)?;
    let mut items = Vec::with_capacity(specs.len());
    for s in &specs {
        let p = std::fs::canonicalize(&s.path).map_err(|e| io_error(&s.path, &e))?;
        if p.is_dir() {
            return Err(crate::error::CliError::new(format!(
                "{} is a directory, not an image",
                p.display()
            )));
        }
        items.push(match s.node {
            Some(n) => format!("{}@{n}", p.display()),
            None => p.display().to_string(),
        });
    }
    Ok(PathBuf::from(items.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_path_stays_one_device() {
        let v = parse(Path::new("/dev/shm/x.img")).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].node, None);
        let v = parse(Path::new("/a.img@2,/b.img@3")).unwrap();
        assert_eq!((v[0].node, v[1].node), (Some(2), Some(3)));
        assert!(parse(Path::new("/a.img,,/b")).is_err());
    }
}
