//! `cargo bench --bench compare`: compile and run times of this JIT against rbpf 0.4's
//! interpreter and (on x86-64) its JIT, on three programs. Each measurement is repeated in
//! rounds that alternate the engines; the table shows medians.

use ebpf_jit::{Compiler, EbpfVm};
use std::time::Instant;

const ROUNDS: usize = 9;

fn helper(a: u64, b: u64, _: u64, _: u64, _: u64) -> u64 {
    a.wrapping_add(b)
}

/// Little assembler: (opcode, dst, src, off, imm).
fn asm(insns: &[(u8, u8, u8, i16, i32)]) -> Vec<u8> {
    insns
        .iter()
        .flat_map(|&(opc, dst, src, off, imm)| {
            let mut b = vec![opc, (src << 4) | dst];
            b.extend(off.to_le_bytes());
            b.extend(imm.to_le_bytes());
            b
        })
        .collect()
}

/// A loop of `n` iterations over a 64-byte memory: a load, ALU work, a store.
fn loop_program(n: i32) -> Vec<u8> {
    asm(&[
        (0xb7, 0, 0, 0, 0),   // mov r0, 0
        (0xb7, 2, 0, 0, n),   // mov r2, n
        (0xbf, 3, 2, 0, 0),   // loop: mov r3, r2
        (0x57, 3, 0, 0, 63),  // and r3, 63
        (0x0f, 3, 1, 0, 0),   // add r3, r1
        (0x71, 4, 3, 0, 0),   // ldxb r4, [r3]
        (0x0f, 0, 4, 0, 0),   // add r0, r4
        (0xaf, 0, 2, 0, 0),   // xor r0, r2
        (0x27, 0, 0, 0, 3),   // mul r0, 3
        (0x73, 3, 0, 0, 0),   // stxb [r3], r0
        (0x17, 2, 0, 0, 1),   // sub r2, 1
        (0x55, 2, 0, -10, 0), // jne r2, 0, loop
        (0x95, 0, 0, 0, 0),   // exit
    ])
}

/// `n` straight-line ALU instructions (compile time; rbpf's JIT has one 4 KiB page of code).
fn straight_program(n: usize) -> Vec<u8> {
    let ops = [0x07u8, 0x0f, 0x27, 0xaf, 0x77, 0x67, 0x04, 0x5f, 0xb4, 0x1f];
    let mut v: Vec<(u8, u8, u8, i16, i32)> = (0..n)
        .map(|i| {
            (
                ops[i % ops.len()],
                (i % 9) as u8,
                ((i + 3) % 9) as u8,
                0,
                (i % 31) as i32 + 1,
            )
        })
        .collect();
    v.push((0x95, 0, 0, 0, 0));
    asm(&v)
}

/// A loop of `n` helper calls.
fn calls_program(n: i32) -> Vec<u8> {
    asm(&[
        (0xb7, 6, 0, 0, n),  // mov r6, n
        (0xb7, 1, 0, 0, 0),  // mov r1, 0
        (0xbf, 2, 6, 0, 0),  // loop: mov r2, r6
        (0x85, 0, 0, 0, 1),  // call 1
        (0xbf, 1, 0, 0, 0),  // mov r1, r0
        (0x17, 6, 0, 0, 1),  // sub r6, 1
        (0x55, 6, 0, -5, 0), // jne r6, 0, loop
        (0x95, 0, 0, 0, 0),  // exit
    ])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed().as_secs_f64() * 1e3, r)
}

fn main() {
    let compiler = Compiler::new().unwrap();
    let programs = [
        ("loop 1M", loop_program(1_000_000)),
        ("helper calls 200k", calls_program(200_000)),
        ("straight 200", straight_program(200)),
    ];
    println!("ebpf-jit vs rbpf 0.4, medians of {ROUNDS} alternated rounds, ms");
    println!(
        "{:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "program", "compile", "rbpf cmp", "jit run", "interp", "rbpf int", "rbpf jit"
    );
    for (name, prog) in &programs {
        let mut t: [Vec<f64>; 6] = Default::default();
        let mut results = Vec::new();
        for _ in 0..ROUNDS {
            let mut mem = vec![7u8; 64];
            // ebpf-jit: verify + compile, run; its interpreter.
            let (c, mut vm) = time(|| {
                let mut vm = EbpfVm::new(prog).unwrap();
                vm.register_helper(1, helper);
                vm.jit_compile_with(&compiler).unwrap();
                vm
            });
            t[0].push(c);
            let (r, v) = time(|| vm.execute_jit(&mut mem).unwrap());
            t[2].push(r);
            results.push(v);
            let mut mem = vec![7u8; 64];
            let (r, v) = time(|| vm.interpret(&mut mem).unwrap());
            t[3].push(r);
            results.push(v);
            vm.register_helper(1, helper);
            // rbpf: verify (+ JIT compile on x86-64), interpreter, JIT.
            let mut mem = vec![7u8; 64];
            let (c, mut rvm) = time(|| {
                let mut rvm = rbpf::EbpfVmRaw::new(Some(prog)).unwrap();
                rvm.register_helper(1, helper).unwrap();
                #[cfg(target_arch = "x86_64")]
                rvm.jit_compile().unwrap();
                rvm
            });
            t[1].push(c);
            let (r, v) = time(|| rvm.execute_program(&mut mem).unwrap());
            t[4].push(r);
            results.push(v);
            #[cfg(target_arch = "x86_64")]
            {
                let mut mem = vec![7u8; 64];
                // SAFETY: the program stays inside its memory (checked by the runs above).
                let (r, v) = time(|| unsafe { rvm.execute_program_jit(&mut mem).unwrap() });
                t[5].push(r);
                results.push(v);
            }
            let _ = &mut rvm;
        }
        assert!(
            results.windows(2).all(|w| w[0] == w[1]),
            "engines disagree on {name}: {results:x?}"
        );
        let m: Vec<String> = t
            .into_iter()
            .map(|v| {
                if v.is_empty() {
                    "-".into()
                } else {
                    format!("{:.3}", median(v))
                }
            })
            .collect();
        println!(
            "{:<20} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            name, m[0], m[1], m[2], m[3], m[4], m[5]
        );
    }
    println!(
        "compile: ebpf-jit verify + JIT compile; rbpf cmp: rbpf verify + JIT compile (x86-64)"
    );
}
