//! The fuzzer itself (not the engine's verdicts): the corpus is valid, mutations
//! change images, a seed replays to the same bytes, and a few hundred images run
//! through the oracle in-process without the fuzzer itself failing.

use crashtest::fuzz::oracle::{self, FsckOutcome};
use crashtest::fuzz::{check_with_deadline, corpus, Fuzzer};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn corpus_images_are_clean_and_mount() {
    let fz = Fuzzer::new().unwrap();
    assert!(
        (10..=40).contains(&fz.corpus.len()),
        "{} images",
        fz.corpus.len()
    );
    for b in &fz.corpus {
        assert_eq!(
            oracle::fsck_image(&b.bytes).unwrap(),
            FsckOutcome::Clean,
            "{}",
            b.name
        );
        let mut pm = pm::Pm::anonymous(b.bytes.len() as u64).unwrap();
        pm.load_image(&b.bytes);
        let fs = mnemofs::Fs::from_pm(pm, &corpus::opts(b.mode))
            .unwrap_or_else(|e| panic!("{}: {e}", b.name));
        oracle::walk(&fs).unwrap_or_else(|e| panic!("{}: {e}", b.name));
        oracle::workload(&fs).unwrap_or_else(|e| panic!("{}: {e}", b.name));
    }
    // The corpus has the structures the mutations aim at.
    let names: Vec<&str> = fz.corpus.iter().map(|b| b.name.as_str()).collect();
    for want in [
        "fresh-2cpu",
        "mixed-clean-1cpu",
        "lawn-dirty-2cpu",
        "crash-finelog-fence0-1cpu",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[test]
fn corpus_is_deterministic() {
    let a = Fuzzer::new().unwrap();
    let b = Fuzzer::new().unwrap();
    assert_eq!(a.corpus.len(), b.corpus.len());
    for (x, y) in a.corpus.iter().zip(&b.corpus) {
        assert!(x.bytes == y.bytes, "{} differs between two builds", x.name);
    }
}

#[test]
fn mutations_change_images_and_seeds_replay() {
    let fz = Fuzzer::new().unwrap();
    let mut changed = 0;
    for seed in 1..=500u64 {
        let img = fz.image(seed);
        assert!(!img.mutations.is_empty() && img.mutations.len() <= 4);
        if img.bytes != fz.corpus[img.base].bytes {
            changed += 1;
        }
        let again = fz.image(seed);
        assert_eq!(again.base, img.base);
        assert_eq!(again.mutations, img.mutations);
        assert!(again.bytes == img.bytes, "seed {seed} does not replay");
    }
    assert!(changed >= 490, "only {changed} of 500 images changed");
}

#[test]
fn a_few_hundred_images_run_through_the_oracle() {
    oracle::install_quiet_hook();
    let fz = Fuzzer::new().unwrap();
    let (mut refused, mut mounted, mut failures) = (0, 0, 0);
    for seed in 1..=300u64 {
        let img = fz.image(seed);
        let (v, _hung) = check_with_deadline(
            Arc::new(img.bytes),
            img.mode,
            Duration::from_secs(2),
            |_| {},
        );
        match v.mount {
            oracle::MountOutcome::Refused(_) => refused += 1,
            oracle::MountOutcome::Mounted => mounted += 1,
            oracle::MountOutcome::NotRun => {}
        }
        if let Some(f) = v.failure {
            failures += 1;
            eprintln!("seed {seed}: {} in {}: {}", f.class.name(), f.step, f.msg);
        }
    }
    // Mutations reach both outcomes. Engine failures are reported above, and are
    // the business of `mnemofs fuzz` (scripts/test.sh), not of this test.
    assert!(
        refused > 10 && mounted > 10,
        "refused {refused}, mounted {mounted}"
    );
    eprintln!("{refused} refused, {mounted} mounted, {failures} failures (engine)");
}
