//! The generated programs compiled in batches of varied sizes, alternately with
//! `EbpfVm::jit_compile_batch_with` and `Compiler::compile_batch`: each program of a batch
//! must give exactly what it gives compiled alone (r0 or the error and its instruction,
//! memory), agree with rbpf's interpreter, and have the same code size; the batch's
//! programs are then dropped in a random order.
//!
//! `EBPF_JIT_BATCHED` (default 3,000; 600 under qemu) programs, the first seeds of
//! `generated_programs_agree_with_rbpf`'s run.

use super::common::*;
use super::{env, program};
use ebpf_jit::{EbpfVm, Helper};
use std::collections::HashMap;

#[test]
fn generated_programs_in_batches_agree_with_alone_and_rbpf() {
    let under_qemu = std::env::var_os("CPJIT_EXAMPLE_QEMU").is_some();
    let count = env("EBPF_JIT_BATCHED", if under_qemu { 600 } else { 3_000 });
    let seed = env("EBPF_JIT_SEED", 0x0eb9_f00d);
    let helpers: HashMap<u32, Helper> = HELPERS
        .iter()
        .map(|&(id, h)| (id, Helper::new(h)))
        .collect();
    let mut rng = Rng(seed ^ 0x0ba7_c4e5);
    let (mut next, mut batches, mut largest) = (0u64, 0u64, 0usize);
    while next < count {
        let size = rng
            .pick(&[1u64, 2, 3, 5, 8, 13, 31, 64, 100, 257])
            .min(count - next);
        let programs: Vec<_> = (next..next + size)
            .map(|i| program(seed.wrapping_add(i.wrapping_mul(0x9e37_79b9))))
            .collect();
        next += size;
        let with_vms = batches % 2 == 0;
        batches += 1;
        largest = largest.max(programs.len());
        // Each program's outcome from the batch, and its code's size.
        let mut batched: Vec<(Outcome, usize)> = Vec::new();
        if with_vms {
            let mut vms: Vec<EbpfVm> = programs
                .iter()
                .map(|(prog, _, _)| {
                    let mut vm = EbpfVm::new(prog).expect("generated programs verify");
                    for (id, h) in HELPERS {
                        vm.register_helper(id, h);
                    }
                    vm
                })
                .collect();
            EbpfVm::jit_compile_batch_with(compiler(), &mut vms).expect("the batch compiles");
            for (vm, (_, mem, mbuff)) in vms.iter().zip(&programs) {
                let o = run_with(mem, mbuff.as_deref(), |m, b| vm.execute_jit_mbuff(m, b));
                // (`EbpfVm` shows no code: its size is checked on the other API's batches.)
                batched.push((o, 0));
            }
            drop_in_random_order(vms, &mut rng);
        } else {
            let batch: Vec<(&[u8], &HashMap<u32, Helper>)> = programs
                .iter()
                .map(|(p, _, _)| (&p[..], &helpers))
                .collect();
            let compiled = compiler()
                .compile_batch(&batch)
                .expect("the batch compiles");
            assert_eq!(compiled.len(), programs.len());
            for (c, (_, mem, mbuff)) in compiled.iter().zip(&programs) {
                let o = run_with(mem, mbuff.as_deref(), |m, b| c.run(m, b));
                batched.push((o, c.code_bytes().len()));
            }
            drop_in_random_order(compiled, &mut rng);
        }
        for ((prog, mem, mbuff), (o, size)) in programs.iter().zip(&batched) {
            let alone = run_ours(prog, mem, mbuff.as_deref(), true);
            let reference = run_rbpf(prog, mem, mbuff.as_deref());
            assert!(
                *o == alone && agree(o, &reference),
                "a program compiled in a batch of {} disagrees on\n{}\nmem {mem:02x?} mbuff \
                 {mbuff:02x?}\nrbpf:    {reference:?}\nalone:   {alone:?}\nbatched: {o:?}",
                programs.len(),
                disasm(prog)
            );
            if !with_vms {
                let alone = compiler().compile(prog, &helpers).expect("compiles alone");
                assert_eq!(
                    *size,
                    alone.code_bytes().len(),
                    "code size in a batch differs from alone for\n{}",
                    disasm(prog)
                );
            }
        }
    }
    println!("{count} generated programs in {batches} batches (the largest {largest})");
    assert!(count < 1000 || largest >= 100, "no batch of 100 or more");
}

/// Drops `items` one at a time, at random.
fn drop_in_random_order<T>(mut items: Vec<T>, rng: &mut Rng) {
    while !items.is_empty() {
        let k = rng.below(items.len() as u64) as usize;
        drop(items.swap_remove(k));
    }
}
