//! `mnemofs bench paper`: with tiny durations it prints each headline beside the
//! paper's figure, names the command that reproduces it and draws the SVG; bad input
//! gets one line and a non-zero exit. No test here looks at a timing.

use std::process::{Command, Output};

fn mnemofs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnemofs"))
        .args(args)
        .output()
        .expect("run mnemofs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn one_line_error(o: &Output, needle: &str) {
    assert!(!o.status.success(), "expected a failure");
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.contains(needle), "'{needle}' not in: {err}");
}

#[test]
fn lawn_prints_its_rows_and_draws_its_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("svgs");
    let o = mnemofs(&[
        "bench",
        "paper",
        "lawn",
        "--duration",
        "100ms",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}\n{stdout}", text(&o.stderr));
    for s in [
        "LAWN (DAC '18)",
        "12.0×: LAWN over NOVA",
        "Fig. 5",
        "profile optane",
        "--medium pm",
        "reproduce   mnemofs bench compare --workload randwrite --presets nova,full \
         --pm-profiles optane --io-size 128",
        "machine     ",
        "Headlines",
    ] {
        assert!(stdout.contains(s), "'{s}' not in:\n{stdout}");
    }
    // One summary row per run of the headline (optane, and DRAM told it is PM), each
    // with our factor beside the paper's.
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("LAWN small writes"))
        .collect();
    assert_eq!(summary.len(), 2, "{stdout}");
    for l in &summary {
        assert!(l.contains("12.0×") && l.matches('×').count() == 2, "{l}");
    }
    let svg = std::fs::read_to_string(out.join("lawn.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
    for s in ["LAWN, Fig. 5", "nova", "full", "optane", "paper: 12.0×"] {
        assert!(svg.contains(s), "{s} not in the SVG");
    }
    assert!(stdout.contains(&out.join("lawn.svg").display().to_string()));
}

#[test]
fn json_rows_carry_the_claim_ours_and_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let o = mnemofs(&[
        "bench",
        "paper",
        "mbs-lvm",
        "--json",
        "--duration",
        "100ms",
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}\n{stdout}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let rows: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|v| v["schema"] == "mnemofs-bench-paper/1")
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    let r = rows[0];
    assert_eq!(r["paper"], "mbs-lvm");
    assert_eq!(r["paper_value"], 20.0);
    assert!(r["paper_source"].as_str().unwrap().contains("Fig. 5(a)"));
    assert!(r["ours_value"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["ours"].as_str().unwrap().ends_with('×'), "{r}");
    assert!(r["command"].as_str().unwrap().starts_with(
        "mnemofs bench compare --workload randwrite --presets full --placement single,local"
    ));
    assert!(!r["machine"].as_str().unwrap().is_empty());
    let svg = r["svg"].as_str().unwrap();
    assert!(std::fs::read_to_string(svg).unwrap().starts_with("<svg"));
    // The runs' own records come too (as `bench compare --json` prints them): 2
    // placements x 3 rounds.
    let runs = lines
        .iter()
        .filter(|v| v["schema"] == "mnemofs-bench/1")
        .count();
    assert_eq!(runs, 6, "{stdout}");
}

#[test]
fn bad_input_is_refused_on_one_line() {
    let o = mnemofs(&["bench", "paper", "nova"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    one_line_error(&o, "unknown paper 'nova'");
    one_line_error(&o, "pnova, lawn, rcache, mbs-lvm, delayed-commit, all");
    one_line_error(
        &mnemofs(&["bench", "paper", "lawn", "--rounds", "2"]),
        "--rounds",
    );
    one_line_error(
        &mnemofs(&["bench", "paper", "all", "--duration", "fast"]),
        "invalid duration",
    );
    one_line_error(
        &mnemofs(&["bench", "paper", "pnova", "--threads", "0"]),
        "--threads",
    );
    one_line_error(&mnemofs(&["bench", "paper"]), "PAPER");
}
