//! Scenario: `mnemofs generate` writes a man page per command and completion scripts
//! from the command line definition; bad input gets a one-line error.

mod common;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn man_pages_name_every_command_and_its_options() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet is created.
    let man1 = dir.path().join("share/man/man1");
    let o = common::run(&["generate", "man", man1.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in [
        "mnemofs.1",
        "mnemofs-mkfs.1",
        "mnemofs-mount.1",
        "mnemofs-fsck.1",
        "mnemofs-stat.1",
        "mnemofs-bench.1",
        "mnemofs-bench-compare.1",
    ] {
        assert!(man1.join(page).is_file(), "{page} missing");
    }
    let mount = std::fs::read_to_string(man1.join("mnemofs-mount.1")).unwrap();
    assert!(
        mount.starts_with(".ie") || mount.contains(".TH"),
        "not roff"
    );
    for option in ["\\-\\-preset", "\\-\\-foreground", "\\-\\-read\\-cache"] {
        assert!(mount.contains(option), "{option} not in mnemofs-mount.1");
    }
    let main = std::fs::read_to_string(man1.join("mnemofs.1")).unwrap();
    assert!(
        main.contains("mnemofs\\-mount(1)"),
        "mnemofs.1 lists no mount page"
    );
    // Hidden commands get no page.
    assert!(!man1.join("mnemofs-guard.1").exists());
}

#[test]
fn completions_for_each_shell() {
    let o = common::run(&["generate", "completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bash = String::from_utf8(o.stdout).unwrap();
    assert!(bash.contains("complete -F"), "not a bash completion script");
    for word in ["mount", "mkfs", "--preset"] {
        assert!(bash.contains(word), "{word} not completed");
    }

    let dir = tempfile::tempdir().unwrap();
    for (shell, file) in [
        ("bash", "mnemofs.bash"),
        ("zsh", "_mnemofs"),
        ("fish", "mnemofs.fish"),
    ] {
        let o = common::run(&[
            "generate",
            "completions",
            shell,
            dir.path().to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        assert!(text.contains("mount"), "{file} does not complete mount");
    }
}

#[test]
fn bad_input_is_one_line_and_fails() {
    let one_line = |o: &std::process::Output, needle: &str| {
        assert!(!o.status.success(), "expected failure");
        let err = stderr(o);
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains(needle), "'{needle}' not in: {err}");
    };
    let o = common::run(&["generate", "completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    one_line(&o, "tcsh");

    // A file where the directory should be.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let o = common::run(&["generate", "man", file.to_str().unwrap()]);
    one_line(&o, file.to_str().unwrap());
    let o = common::run(&["generate", "completions", "zsh", file.to_str().unwrap()]);
    one_line(&o, file.to_str().unwrap());

    let o = common::run(&["generate", "man"]);
    assert_eq!(o.status.code(), Some(2));
    one_line(&o, "<DIR>");
}
