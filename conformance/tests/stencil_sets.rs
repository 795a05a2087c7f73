//! Runs the hole-exercising test ops of every stencil set this process can execute
//! (narrowed by `CPJIT_STENCILS`, corrupted by `CPJIT_BREAK`; see `select`) and compares
//! every run with the Rust reference.

use crate::common;

use common::all_sets;
use cpjit_conformance::exec::{self, Compiled};
use cpjit_conformance::program::{self, Instr, Op, Program, Reference, TABLE};
use cpjit_conformance::select;
use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat, StencilSet};
use std::collections::BTreeSet;

fn sets() -> Vec<&'static StencilSet<'static>> {
    select::selected(&all_sets())
}

/// Stitches `program` for `set` and runs it `runs` times, comparing every run (exit value
/// and the whole stack) with the reference; `what` names the program in failures.
fn check(
    jit: &cpjit_runtime::Jit<'_>,
    program: &Program,
    runs: usize,
    what: &str,
) -> Result<Compiled, String> {
    let target = jit.stencil_set().target;
    let compiled = exec::compile(jit, program)?;
    let mut reference = Reference::new(program);
    for run in 0..runs {
        let want = reference
            .run(program)
            .map_err(|e| format!("{target}: {what}: invalid test program: {e}"))?;
        let got = compiled.run(want.stack.len());
        if got != want {
            return Err(format!(
                "{target}: {what}, run {}: got exit {:#x} stack {:x?}, reference exit {:#x} stack {:x?}\nprogram: {:?}",
                run + 1,
                got.exit,
                got.stack,
                want.exit,
                want.stack,
                program.instrs
            ));
        }
    }
    Ok(compiled)
}

fn prog(instrs: Vec<Instr>) -> Program {
    Program { instrs }
}

fn push(v: u64) -> Instr {
    Instr::new(Op::Push, &[v])
}

fn op(op: Op) -> Instr {
    Instr::new(op, &[])
}

/// One short program per test op, with operand values at the edges of every encoding.
fn op_programs() -> Vec<(String, Program)> {
    let values = [
        0,
        1,
        u64::MAX,
        0x8000_0000,
        0xffff_ffff,
        0x1_0000_0000,
        0x0123_4567_89ab_cdef,
    ];
    let mut out = Vec::new();
    for &v in &values {
        out.push((format!("push {v:#x}"), prog(vec![push(v), op(Op::Exit)])));
        out.push((
            format!("push2 {v:#x}"),
            prog(vec![Instr::new(Op::Push2, &[v, !v]), op(Op::Exit)]),
        ));
        out.push((
            format!("add {v:#x}"),
            prog(vec![push(v), push(v ^ 0x5555), op(Op::Add), op(Op::Exit)]),
        ));
        out.push((
            format!("helper {v:#x}"),
            prog(vec![
                Instr::new(Op::Push2, &[v, 3]),
                push(!v),
                op(Op::Helper),
                op(Op::Exit),
            ]),
        ));
        out.push((
            format!("table {v:#x}"),
            prog(vec![push(v), op(Op::Table), op(Op::Exit)]),
        ));
        out.push((
            format!("counter {v:#x}"),
            prog(vec![push(v), op(Op::Counter), op(Op::Exit)]),
        ));
        out.push((
            format!("addr_addend {v:#x}"),
            prog(vec![push(v), op(Op::AddrAddend), op(Op::Exit)]),
        ));
        out.push((
            format!("pop {v:#x}"),
            prog(vec![push(v), push(!v), op(Op::Pop), op(Op::Exit)]),
        ));
    }
    for i in 0..8 {
        out.push((
            format!("table[{i}]"),
            prog(vec![push(i), op(Op::Table), op(Op::Exit)]),
        ));
    }
    // dec_jump_nz falling through (1 -> 0) and jumping forward (2 -> 1, over a push).
    out.push((
        "dec_jump_nz fall-through".into(),
        prog(vec![push(1), Instr::jump(3), push(7), op(Op::Exit)]),
    ));
    out.push((
        "dec_jump_nz forward".into(),
        prog(vec![push(2), Instr::jump(3), push(7), op(Op::Exit)]),
    ));
    out
}

#[test]
fn cpjit_stencils_selects_exactly_the_named_set() {
    let sets = sets();
    if let Ok(only) = std::env::var(select::SELECT_VAR) {
        if !only.is_empty() {
            assert_eq!(sets.len(), 1);
            assert_eq!(sets[0].target, only);
        }
    }
    for s in &sets {
        println!(
            "conformance: running {} ({} stencils)",
            s.target,
            s.stencils.len()
        );
    }
}

#[test]
fn selection_errors_instead_of_testing_nothing() {
    let mut all = all_sets();
    let e = select::select(&all, Some("mips64-unknown-linux-gnuabi64"), None).unwrap_err();
    assert!(e.contains("no such stencil set"), "{e}");
    // A process links only its own architecture's sets (the facade), which it may all be
    // able to run: a copy of one under another architecture is a set no process runs.
    let own = all[0];
    let arch = [Arch::X86_64, Arch::Aarch64, Arch::Riscv64]
        .into_iter()
        .find(|&a| a != own.arch)
        .expect("another architecture");
    let foreign: &'static StencilSet<'static> = Box::leak(Box::new(StencilSet {
        target: "foreign-test-set",
        arch,
        ..*own
    }));
    assert!(!select::compatible(foreign));
    all.push(foreign);
    let e = select::select(&all, Some(foreign.target), None).unwrap_err();
    assert!(e.contains("cannot run that set"), "{e}");
    let e = select::select(&[], None, None).unwrap_err();
    assert!(e.contains("nothing would be tested"), "{e}");
}

#[test]
fn every_test_op_matches_the_reference() {
    let mut runs = 0;
    for set in sets() {
        let jit = exec::jit(set, None);
        for (what, p) in op_programs() {
            check(&jit, &p, 2, &what).unwrap_or_else(|e| panic!("{e}"));
            runs += 2;
        }
    }
    assert!(runs > 0);
    println!("conformance: {runs} runs");
}

#[test]
fn random_programs_match_the_reference() {
    let count: u64 = std::env::var("CPJIT_CONFORMANCE_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut programs = 0;
    for set in sets() {
        let jit = exec::jit(set, None);
        for seed in 0..count {
            let p = program::generate(seed);
            check(&jit, &p, 2, &format!("random program, seed {seed}"))
                .unwrap_or_else(|e| panic!("{e}"));
            programs += 1;
        }
    }
    assert!(programs > 0);
    println!("conformance: {programs} random programs");
}

#[test]
fn loops_jump_backward_and_stack_results_match() {
    for set in sets() {
        let jit = exec::jit(set, None);
        // push n; L: dup; dec_jump_nz L -- leaves n, n-1, ..., 0; fold them with add.
        for n in [1u64, 2, 7, 100] {
            let mut instrs = vec![push(n)];
            program::push_dup(&mut instrs);
            instrs.push(Instr::jump(1));
            instrs.extend((0..n).map(|_| op(Op::Add)));
            instrs.push(op(Op::Counter));
            instrs.push(op(Op::Exit));
            check(&jit, &prog(instrs), 3, &format!("count-down loop from {n}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // push n; L: dec_jump_nz L -- a branch to itself, taken n - 1 times.
        for n in [1u64, 3, 50_000] {
            let instrs = vec![push(n), Instr::jump(1), op(Op::Table), op(Op::Exit)];
            check(&jit, &prog(instrs), 2, &format!("self loop from {n}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn counters_are_per_instance_and_persist_across_runs() {
    for set in sets() {
        let jit = exec::jit(set, None);
        let p = prog(vec![
            push(5),
            op(Op::Counter),
            op(Op::Counter),
            op(Op::Counter),
            op(Op::Exit),
        ]);
        let compiled = check(&jit, &p, 4, "three counters").unwrap_or_else(|e| panic!("{e}"));
        // Run 5 on top of the 4 checked: the counters hold 5r, 5r(r+1)/2, 5r(r+1)(r+2)/6.
        assert_eq!(compiled.run(1).exit, 175, "{}", set.target);
        // A second trace of the same program has its own, fresh counters.
        check(&jit, &p, 1, "three counters, second trace").unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn far_code_reaches_the_helper_through_veneers() {
    let helper = exec::resolve("cpjit_test_mul_add").unwrap();
    for set in sets() {
        let reach: u64 = match set.arch {
            cpjit_model::Arch::X86_64 | cpjit_model::Arch::Riscv64 => 1 << 31,
            cpjit_model::Arch::Aarch64 => 128 << 20,
        };
        // Far beyond a direct branch's reach: 64 GiB below the helper where there is room
        // (a static-pie binary sits near the top of the 47-bit space, where 64 GiB above
        // would be no user address at all and the hint ignored), else 64 GiB above.
        let base = helper & !0xffff_ffff;
        let far = if base > 128 << 30 {
            base - (64 << 30)
        } else {
            base + (64 << 30)
        };
        let jit = exec::jit(set, Some(far));
        let p = prog(vec![
            Instr::new(Op::Push2, &[6, 7]),
            push(8),
            op(Op::Helper),
            op(Op::Exit),
        ]);
        let compiled =
            check(&jit, &p, 2, "helper call from far code").unwrap_or_else(|e| panic!("{e}"));
        let code = compiled.trace.code_range().start as u64;
        let distance = code.abs_diff(helper);
        assert!(
            distance > reach,
            "{}: code at {code:#x} is within reach of the helper at {helper:#x}: the far placement was not tested",
            set.target
        );
        let helper_stencil = set.get(Op::Helper.stencil_name()).unwrap();
        let direct_call = helper_stencil
            .holes
            .iter()
            .any(|h| h.kind.is_branch() && matches!(h.value, HoleValue::Symbol(_)));
        if direct_call {
            assert!(
                compiled.trace.veneers() > 0,
                "{}: a far direct call without a veneer",
                set.target
            );
        }
        println!(
            "conformance: {}: far code {code:#x}, helper {helper:#x}, {} veneers, {} GOT slots",
            set.target,
            compiled.trace.veneers(),
            compiled.trace.got_slots()
        );
    }
}

#[test]
fn a_corrupted_set_is_caught_by_the_reference() {
    for set in sets() {
        let original = all_sets()
            .into_iter()
            .find(|s| s.target == set.target)
            .unwrap();
        let broken = select::corrupted(original).unwrap_or_else(|e| panic!("{e}"));
        let jit = exec::jit(broken, None);
        let p = prog(vec![
            Instr::new(Op::Push2, &[1, 2]),
            op(Op::Add),
            op(Op::Exit),
        ]);
        let Err(e) = check(&jit, &p, 1, "push2 on a corrupted set") else {
            panic!("{}: the corrupted push2 went unnoticed", set.target);
        };
        assert!(e.contains("got exit 0x4"), "{e}");
    }
}

/// Hole kinds of the test ops and the shim per architecture, pinned: a change of compiler
/// flags or of the object readers that changes them must be looked at (and this table
/// updated).
fn expected_kinds(set: &StencilSet<'_>) -> Vec<HoleKind> {
    use HoleKind::*;
    // Narrow operands (narrow.c): their range checks on every target, and their immediates
    // where the format has a relocation for them: x86-64 imm32s, AArch64 ELF movz/movk,
    // RISC-V lui/addi[w]. AArch64 Mach-O and COFF have none: GOT loads there.
    let mut narrow = vec![
        OperandU8, OperandS8, OperandU16, OperandS16, OperandU32, OperandS32,
    ];
    match (set.arch, set.format) {
        (Arch::X86_64, _) => narrow.push(X86Abs32),
        (Arch::Aarch64, ObjectFormat::Elf) => narrow.extend([Aarch64MovwG0, Aarch64MovwG1]),
        (Arch::Riscv64, _) => narrow.extend([RiscvHi20, RiscvLo12I]),
        _ => {}
    }
    let instructions: &[HoleKind] = match (set.arch, set.format) {
        // ELF's REX_GOTPCRELX says which GOT uses have a REX prefix; for COFF (`__imp_`) and
        // Mach-O (`GOT`) the toolchain decides it from the disassembly. Every GOT use of the
        // test ops is a `mov`, `test` or ALU operation with REX, or Windows' `call [rip+G]`.
        // A float operand is read from its GOT slot straight into an FP register (`movsd
        // G(%rip), %xmm0`, no REX: the float ops' `fpush`), which no relaxation turns into
        // an immediate.
        (Arch::X86_64, ObjectFormat::Elf | ObjectFormat::MachO) => {
            &[X86Pc32, X86Branch32, X86GotPc32, X86RexGotPc32Relaxable]
        }
        (Arch::X86_64, ObjectFormat::Coff) => &[
            X86Pc32,
            X86Branch32,
            X86GotPc32,
            X86GotPc32Relaxable,
            X86RexGotPc32Relaxable,
        ],
        // A hot part reaches its cold part (split off on ELF, the tail after the last
        // continuation jump moved on COFF and Mach-O) with `b.cond`/`cbz`/`cbnz`.
        (Arch::Aarch64, _) => &[
            Aarch64Branch26,
            Aarch64Branch19,
            Aarch64AdrPage21,
            Aarch64AdrGotPage21,
            Aarch64AddLo12,
            Aarch64LdSt64Lo12,
            Aarch64Ld64GotLo12,
        ],
        // Calls and continuations are auipc+jalr pairs; operands and helpers come through
        // the GOT, the ops' own data PC-relative, stored to through an S-type lo12; a hot
        // part reaches its cold part (split off by the toolchain) with a `jal`.
        (Arch::Riscv64, _) => &[
            RiscvCall,
            RiscvPcrelHi20,
            RiscvPcrelLo12I,
            RiscvPcrelLo12S,
            RiscvGotHi20,
            RiscvGotLo12I,
            RiscvJal,
        ],
    };
    narrow.extend_from_slice(instructions);
    narrow
}

/// Static data only, so it checks every linked set (the row's architecture's) in every row:
/// the test ops' hole kinds are the pinned ones, and they include every kind any stencil
/// of the set uses (so the traces above exercise every encoding the target needs).
#[test]
fn hole_kind_coverage_is_pinned_and_complete() {
    for set in all_sets() {
        let kinds_of = |filter: &dyn Fn(&str) -> bool| -> BTreeSet<HoleKind> {
            set.stencils
                .iter()
                .filter(|s| filter(s.name))
                .flat_map(|s| s.holes.iter().map(|h| h.kind))
                .collect()
        };
        let shim = set.shim().expect("set has a shim").name;
        let tested = kinds_of(&|n| n.starts_with("op_test_") || n == shim);
        let all = kinds_of(&|_| true);
        let expected: BTreeSet<HoleKind> = expected_kinds(set).into_iter().collect();
        assert_eq!(
            tested, expected,
            "{}: hole kinds of the test ops changed",
            set.target
        );
        let untested: Vec<_> = all.difference(&tested).collect();
        assert!(
            untested.is_empty(),
            "{}: stencils use hole kinds {untested:?} that no test op exercises: add one to templates/testing/holes.c",
            set.target
        );
        println!("conformance: {}: test ops cover {tested:?}", set.target);
        for op in Op::ALL {
            assert!(
                set.get(op.stencil_name()).is_some(),
                "{}: missing {}",
                set.target,
                op.stencil_name()
            );
        }
    }
}

#[test]
fn table_reference_matches_holes_c() {
    // The table in holes.c is {3,1,4,1,5,9,2,6} x 1000003.
    assert_eq!(TABLE.map(|v| v / 1000003), [3, 1, 4, 1, 5, 9, 2, 6]);
}
