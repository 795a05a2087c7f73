//! Runs Brainfuck programs with the JIT and the reference interpreter and compares their
//! output and exit status: hand-written programs for each op and loop shape, the programs in
//! `programs/`, and seeded random programs (`fastrand`) whose loops always terminate.

use bf_jit::{interpret, parse, Compiler, Outcome, Status};

/// Runs `source` both ways, checks that they agree, and returns the JIT's outcome.
fn run_both(source: &[u8], input: &[u8]) -> Outcome {
    let ops = parse(source).unwrap();
    let jit = Compiler::new().unwrap().compile(&ops).unwrap().run(input);
    let reference = interpret(&ops, input);
    assert_eq!(
        jit,
        reference,
        "JIT and interpreter differ on {:?}",
        String::from_utf8_lossy(source)
    );
    jit
}

/// A program that prints `text` (one loop per character: cell 1 = 8 × (c / 8), then + rest).
fn printer(text: &str) -> String {
    let mut src = String::new();
    for &c in text.as_bytes() {
        src.push_str(&"+".repeat(usize::from(c / 8)));
        src.push_str("[>++++++++<-]>");
        src.push_str(&"+".repeat(usize::from(c % 8)));
        src.push_str(".[-]<");
    }
    src
}

#[test]
fn prints_text_through_loops_and_clears() {
    let out = run_both(
        printer("Hello from a copy-and-patch JIT!\n").as_bytes(),
        b"",
    );
    assert_eq!(out.output, b"Hello from a copy-and-patch JIT!\n");
    assert_eq!(out.status, Status::Ok);
}

#[test]
fn wraps_cells_modulo_256() {
    let out = run_both(b"-.+.[-]---------[+++].", b"");
    assert_eq!(out.output, [255, 0, 0]);
}

#[test]
fn nested_loops_multiply() {
    // 7 × 9 × 3 = 189 by three nested loops.
    let out = run_both(b"+++++++[>+++++++++[>+++<-]<-]>>.", b"");
    assert_eq!(out.output, [189]);
}

#[test]
fn skips_a_loop_on_zero_and_ends_with_an_empty_program() {
    assert_eq!(run_both(b"[.+++.]", b"").output, b"");
    assert_eq!(run_both(b"", b"").status, Status::Ok);
    // A loop that is the last op jumps to the exit instance.
    assert_eq!(run_both(b"+.[-]", b"").output, [1]);
    assert_eq!(run_both(b"+[.-]", b"").output, [1]);
}

#[test]
fn input_is_read_and_eof_leaves_the_cell() {
    // Echo each byte plus one until the input ends (the cell then keeps its last value, so
    // the loop needs its own exit: stop after a zero byte).
    let out = run_both(b",[+.[-],]", b"HAL\0ignored");
    assert_eq!(out.output, b"IBM");
    let out = run_both(b"+++,.", b"");
    assert_eq!(out.output, [3]);
}

#[test]
fn leaving_the_tape_stops_with_an_error_status() {
    let out = run_both(b"+.<.", b"");
    assert_eq!(out.output, [1]);
    assert_eq!(out.status, Status::TapeOverflow);
    let right = format!("+[>+]{}", "");
    assert_eq!(run_both(right.as_bytes(), b"").status, Status::TapeOverflow);
    // The last cell is reachable; one past it is not.
    let last = format!("{}+.", ">".repeat(bf_jit::TAPE_CELLS - 1));
    assert_eq!(run_both(last.as_bytes(), b"").status, Status::Ok);
}

#[test]
fn programs_directory() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("programs");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "bf") {
            let source = std::fs::read(&path).unwrap();
            let expected = std::fs::read(path.with_extension("expected")).unwrap();
            let input = std::fs::read(path.with_extension("input")).unwrap_or_default();
            let out = run_both(&source, &input);
            assert_eq!(out.output, expected, "{}", path.display());
            ran += 1;
        }
    }
    assert!(ran >= 2, "programs/ holds {ran} programs");
}

/// Random straight-line code and loops at relative offset >= 0 with net movement 0. A loop
/// is `[>` body `<-]`: its body never touches the loop's own cell, so it runs at most 255
/// times.
fn random_block(rng: &mut fastrand::Rng, depth: u32, out: &mut String) {
    let mut offset = 0i64;
    for _ in 0..rng.u64(..12) {
        match rng.u64(..8) {
            0 | 1 => out.push_str(&"+".repeat(rng.usize(..20))),
            2 => out.push_str(&"-".repeat(rng.usize(..20))),
            3 => {
                let n = rng.i64(0..4);
                out.push_str(&">".repeat(n as usize));
                offset += n;
            }
            4 if offset > 0 => {
                let n = rng.i64(0..=offset);
                out.push_str(&"<".repeat(n as usize));
                offset -= n;
            }
            5 => out.push('.'),
            6 => out.push(','),
            7 if depth > 0 => {
                out.push_str("[>");
                random_block(rng, depth - 1, out);
                out.push_str("<-]");
            }
            _ => out.push_str("[-]"),
        }
    }
    out.push_str(&"<".repeat(offset as usize));
}

#[test]
fn random_programs_agree_with_the_interpreter() {
    let compiler = Compiler::new().unwrap();
    for seed in 1..=300u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut source = String::new();
        random_block(&mut rng, 2, &mut source);
        let input: Vec<u8> = (0..rng.usize(..8)).map(|_| rng.u8(..)).collect();
        let ops = parse(source.as_bytes()).unwrap();
        let jit = compiler.compile(&ops).unwrap().run(&input);
        assert_eq!(
            jit,
            interpret(&ops, &input),
            "seed {seed}: {source:?} with input {input:?}"
        );
    }
}
