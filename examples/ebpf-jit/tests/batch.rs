//! Programs compiled together (`Compiler::compile_batch`, `EbpfVm::jit_compile_batch`): a
//! refused program names its index and fails the batch, each program keeps its own helpers'
//! state, and a batch's programs are dropped in any order while the others still run.
//! (The generated programs in batches against rbpf: tests/generated/batched.rs.)

mod common;

use common::*;
use ebpf_jit::{Compiled, Compiler, EbpfVm, ErrorKind, Helper};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `r0 = k`, a few ALU instructions on it, exit: returns `k * 3 + 1`.
fn returning(k: i32) -> Vec<u8> {
    let mut p = Asm::new();
    p.mov64(0, Src::Imm(k))
        .mov64(2, Src::Imm(3))
        .alu(ebpf_jit::AluOp::Mul, true, 0, Src::Reg(2))
        .alu(ebpf_jit::AluOp::Add, true, 0, Src::Imm(1))
        .exit();
    p.bytes()
}

#[test]
fn a_refused_program_names_its_index_and_fails_the_batch() {
    // `ja +5` jumps out of the program: refused at instruction 1, as rbpf refuses it.
    let mut bad = Asm::new();
    bad.mov64(0, Src::Imm(0)).ja(5).exit();
    let bad = bad.bytes();
    assert!(rbpf::EbpfVmRaw::new(Some(&bad)).is_err());
    let alone = ebpf_jit::verify(&bad).unwrap_err();
    let good = [returning(1), returning(2), returning(3)];
    let helpers = HashMap::new();
    let batch = [
        (&good[0][..], &helpers),
        (&good[1][..], &helpers),
        (&bad[..], &helpers),
        (&good[2][..], &helpers),
    ];
    let e = match compiler().compile_batch(&batch) {
        Ok(_) => panic!("a batch with a refused program compiled"),
        Err(e) => e,
    };
    assert_eq!(e.program(), Some(2), "{e}");
    assert_eq!((e.kind(), e.insn()), (ErrorKind::Verifier, alone.insn()));
    assert_eq!(alone.insn(), Some(1));
    assert_eq!(e.to_string(), format!("program #2 of the batch: {alone}"));
    assert!(matches!(e, ebpf_jit::Error::InBatch { .. }));
    // Without it the same batch compiles, and a lone program's error names no program.
    batch_returns(&[&good[0], &good[1], &good[2]], &[4, 7, 10]);
    assert_eq!(alone.program(), None);
}

/// Compiles `programs` as one batch and checks that each returns its value.
fn batch_returns(programs: &[&[u8]], values: &[u64]) -> Vec<Compiled> {
    let helpers = HashMap::new();
    let batch: Vec<_> = programs.iter().map(|&p| (p, &helpers)).collect();
    let compiled = compiler().compile_batch(&batch).unwrap();
    assert_eq!(compiled.len(), programs.len());
    for (c, &v) in compiled.iter().zip(values) {
        assert_eq!(c.run(&mut [], &mut []).unwrap(), v);
    }
    compiled
}

#[test]
fn empty_batches_compile_to_nothing() {
    assert!(compiler().compile_batch(&[]).unwrap().is_empty());
    EbpfVm::jit_compile_batch(&mut []).unwrap();
}

#[test]
fn each_program_keeps_its_own_helpers() {
    // Two programs calling helper 1, each with its own closure and state; the maps are
    // dropped before the programs run (the compiled programs hold the state).
    let counted = |base: u64| {
        let calls = Arc::new(AtomicU64::new(0));
        let seen = calls.clone();
        let helper =
            Helper::new(move |_, b, _, _, _| base + b + seen.fetch_add(1, Ordering::Relaxed));
        (
            calls,
            [(1u32, helper)].into_iter().collect::<HashMap<_, _>>(),
        )
    };
    let (calls_a, helpers_a) = counted(100);
    let (calls_b, helpers_b) = counted(200);
    let mut p = Asm::new();
    p.mov64(2, Src::Imm(5)).call(1).exit();
    let prog = p.bytes();
    let compiled = compiler()
        .compile_batch(&[
            (&prog, &helpers_a),
            (&prog, &helpers_b),
            (&prog, &helpers_a),
        ])
        .unwrap();
    drop((helpers_a, helpers_b));
    let run = |k: usize| compiled[k].run(&mut [], &mut []).unwrap();
    assert_eq!([run(0), run(1), run(2), run(1)], [105, 205, 106, 206]);
    assert_eq!(calls_a.load(Ordering::Relaxed), 2);
    assert_eq!(calls_b.load(Ordering::Relaxed), 2);
}

#[test]
fn vms_compiled_together_run_as_if_compiled_alone() {
    let programs: Vec<Vec<u8>> = (0..40).map(|k| returning(k * 11 - 200)).collect();
    let mut vms: Vec<EbpfVm> = programs.iter().map(|p| EbpfVm::new(p).unwrap()).collect();
    assert_eq!(
        vms[0].execute_jit(&mut []).unwrap_err().kind(),
        ErrorKind::NotCompiled
    );
    EbpfVm::jit_compile_batch(&mut vms).unwrap();
    for (k, vm) in vms.iter().enumerate() {
        let mut alone = EbpfVm::new(vm.program()).unwrap();
        alone.jit_compile().unwrap();
        let want = (k as i64 * 11 - 200) * 3 + 1;
        assert_eq!(vm.execute_jit(&mut []).unwrap(), want as u64);
        assert_eq!(alone.execute_jit(&mut []).unwrap(), want as u64);
    }
}

#[test]
fn a_batch_is_dropped_in_any_order() {
    // Freed code is overwritten with traps here, so a program whose code a neighbour's drop
    // freed would trap instead of returning its value.
    let options = cpjit_runtime::JitOptions {
        trap_freed_code: true,
        ..Compiler::default_options()
    };
    let compiler = Compiler::with_options(ebpf_jit::HOST_SET, options).unwrap();
    let programs: Vec<Vec<u8>> = (0..7).map(|k| returning(k + 1)).collect();
    let helpers = HashMap::new();
    let batch: Vec<_> = programs.iter().map(|p| (&p[..], &helpers)).collect();
    let mut rng = Rng(0xd70b);
    for order in 0..40 {
        let mut live: Vec<(usize, Compiled)> = compiler
            .compile_batch(&batch)
            .unwrap()
            .into_iter()
            .enumerate()
            .collect();
        while !live.is_empty() {
            // Forwards, backwards, then at random.
            let k = match order {
                0 => 0,
                1 => live.len() - 1,
                _ => rng.below(live.len() as u64) as usize,
            };
            drop(live.remove(k));
            for (i, c) in &live {
                assert_eq!(
                    c.run(&mut [], &mut []).unwrap(),
                    *i as u64 * 3 + 4,
                    "order {order}"
                );
            }
            // A program compiled alone meanwhile may reuse the freed code's memory.
            let alone = compiler.compile(&programs[0], &helpers).unwrap();
            assert_eq!(alone.run(&mut [], &mut []).unwrap(), 4);
        }
    }
}
