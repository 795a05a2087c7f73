//! Replays every fuzz target's committed seeds, and deterministic mutations of them, through
//! the same entry points the coverage-guided targets call. This is what the CI suite runs on
//! stable in place of a short nightly fuzz campaign: it keeps every target's body building and
//! passing on its seeds, and a reader panic that a flipped byte or a truncation triggers fails
//! here first. Long campaigns: `cargo xtask fuzz --seconds 600`.

use std::fs;
use std::path::{Path, PathBuf};

use cpjit_fuzz_harness::seeds::seed_files;
use cpjit_model::ObjectFormat;

/// Mutated copies made of each seed (plus truncations).
const MUTANTS_PER_SEED: u64 = 24;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A small deterministic generator (xorshift64*), so a failure replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The seed itself, its truncations at a few lengths, and copies with 1–8 bytes overwritten
/// by values at the edges of fields (0, 0xff, 0x7f, 0x80, random).
fn inputs(seed: &[u8], salt: u64) -> Vec<Vec<u8>> {
    let mut out = vec![seed.to_vec()];
    for cut in [
        0,
        1,
        4,
        16,
        64,
        seed.len() / 2,
        seed.len().saturating_sub(1),
    ] {
        if cut < seed.len() {
            out.push(seed[..cut].to_vec());
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ salt.wrapping_mul(0x1000_0000_01b3));
    for _ in 0..MUTANTS_PER_SEED {
        let mut m = seed.to_vec();
        if m.is_empty() {
            break;
        }
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(m.len());
            m[at] = match rng.below(5) {
                0 => 0,
                1 => 0xff,
                2 => 0x7f,
                3 => 0x80,
                _ => rng.next() as u8,
            };
        }
        out.push(m);
    }
    out
}

/// Runs `body` on every input made from `target`'s seeds; returns how many it ran.
fn replay(target: &str, body: impl Fn(&[u8])) -> usize {
    let seeds = seed_files(&root(), target).unwrap();
    assert!(!seeds.is_empty(), "{target}: no seeds");
    let mut count = 0;
    for (i, seed) in seeds.iter().enumerate() {
        let bytes = fs::read(seed).unwrap_or_else(|e| panic!("{}: {e}", seed.display()));
        for input in inputs(&bytes, i as u64) {
            body(&input);
            count += 1;
        }
    }
    count
}

#[test]
fn object_readers_survive_their_seeds_and_mutations() {
    for (target, format) in [
        ("object_elf", ObjectFormat::Elf),
        ("object_coff", ObjectFormat::Coff),
        ("object_macho", ObjectFormat::MachO),
    ] {
        let n = replay(target, |b| cpjit_fuzz_harness::read_object(format, b));
        assert!(n > 30, "{target}: only {n} inputs");
    }
}

#[test]
fn manifest_and_target_parsers_survive_their_seeds_and_mutations() {
    let n = replay("manifest", cpjit_fuzz_harness::parse_manifest_and_target);
    assert!(n > 30, "only {n} inputs");
}

/// The trace target has no seed files: any bytes describe a trace. Deterministic random
/// inputs must give some traces the independent checker verifies and some that `finish`
/// refuses (out-of-range targets), and never a wrong one.
#[cfg(target_arch = "x86_64")]
#[test]
fn trace_target_checks_accepted_traces_byte_by_byte() {
    use cpjit_fuzz_harness::trace::{run, Outcome};
    let mut rng = Rng(0x5eed);
    let (mut checked, mut rejected) = (0, 0);
    for _ in 0..1_500 {
        let input: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
        match run(&input) {
            Outcome::Checked => checked += 1,
            Outcome::Rejected => rejected += 1,
        }
    }
    assert!(checked > 100, "only {checked} traces accepted and checked");
    assert!(
        rejected > 0,
        "no trace was refused: the generator never leaves a hole's reach"
    );
}

/// A timed campaign on stable, for a long run by hand (the coverage-guided one needs nightly:
/// `cargo xtask fuzz`): `CPJIT_FUZZ_SECONDS` (default 10) per target of random inputs and
/// mutations of the seeds, printing the executions per target and, for the trace target,
/// how many stencils of each set it pushed. Run with `--ignored --nocapture`.
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore = "a timed campaign, run by hand"]
fn campaign() {
    use std::time::{Duration, Instant};
    let seconds: u64 = std::env::var("CPJIT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut rng = Rng(0xc0ffee);
    let mut run_for = |name: &str, seeds: &[Vec<u8>], body: &mut dyn FnMut(&[u8])| {
        let end = Instant::now() + Duration::from_secs(seconds);
        let mut n = 0u64;
        while Instant::now() < end {
            let input = if seeds.is_empty() || rng.below(4) == 0 {
                (0..rng.below(512)).map(|_| rng.next() as u8).collect()
            } else {
                let seed = &seeds[rng.below(seeds.len())];
                let mutants = inputs(seed, rng.next());
                mutants[rng.below(mutants.len())].clone()
            };
            body(&input);
            n += 1;
        }
        println!("{name}: {n} executions in {seconds} s");
    };
    let seeds_of = |target: &str| -> Vec<Vec<u8>> {
        seed_files(&root(), target)
            .unwrap()
            .iter()
            .map(|f| fs::read(f).unwrap())
            .collect()
    };
    for (target, format) in [
        ("object_elf", ObjectFormat::Elf),
        ("object_coff", ObjectFormat::Coff),
        ("object_macho", ObjectFormat::MachO),
    ] {
        run_for(target, &seeds_of(target), &mut |b| {
            cpjit_fuzz_harness::read_object(format, b)
        });
    }
    run_for("manifest", &seeds_of("manifest"), &mut |b| {
        cpjit_fuzz_harness::parse_manifest_and_target(b)
    });
    use cpjit_fuzz_harness::trace::{run_counting, sets, Outcome};
    let sets = sets();
    let mut reached: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.stencils.len()]).collect();
    let (mut checked, mut rejected) = (0u64, 0u64);
    run_for(
        "trace",
        &[],
        &mut |b| match run_counting(b, &mut |k, i| reached[k][i] = true) {
            Outcome::Checked => checked += 1,
            Outcome::Rejected => rejected += 1,
        },
    );
    println!("trace: {checked} traces checked byte by byte, {rejected} refused");
    for (k, set) in sets.iter().enumerate() {
        let n = reached[k].iter().filter(|r| **r).count();
        let name = ["default", "threearg"][k];
        println!(
            "trace: set {name} ({}): {n} of {} stencils pushed",
            set.target,
            set.stencils.len()
        );
    }
}
