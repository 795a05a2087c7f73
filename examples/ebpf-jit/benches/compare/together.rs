//! Programs loaded together: `100 × straight N` (N = 10, 100), 100 programs verified and
//! compiled per round, in ns per program. ebpf-jit compiles them into one batch
//! (`EbpfVm::jit_compile_batch_with`: one publish of their code, on Linux without `pku` one
//! `pwrite` for the 100); rbpf has no batch API, so its JIT compiles the same 100 one by
//! one (the row's measure says so, in the table and the JSON), as does ebpf-jit's per-program
//! API in the `ebpf-jit one by one` row. Each engine keeps its 100 programs until all are
//! compiled (a loaded set), then drops them; the engines alternate round by round, each
//! round's timed set right after an untimed one of the same engine (as `compile_rows`).

use super::{elapsed_ns, helper, straight_program, Row};
use ebpf_jit::{Compiler, EbpfVm};

/// Programs per set.
const SET: usize = 100;

/// The rows' measure: rbpf's JIT and `ebpf-jit one by one` compile the set one program at
/// a time.
const MEASURE: &str = "compile, 100 loaded together (rbpf JIT: one by one)";

/// The rows of `100 × straight N` for N in `sizes`, `rounds` alternated rounds.
pub(crate) fn rows(sizes: &[usize], rounds: usize, compiler: &Compiler) -> Vec<Row> {
    let mut rows = Vec::new();
    for &n in sizes {
        let prog = straight_program(n);
        let engines = ["ebpf-jit", "rbpf JIT", "ebpf-jit one by one"];
        let mut mine: Vec<Row> = engines
            .iter()
            .map(|&engine| Row {
                program: format!("{SET} × straight {n}"),
                measure: MEASURE,
                engine,
                times_ns: Vec::new(),
                skipped: None,
            })
            .collect();
        if !super::rbpf_jit_runs() {
            mine[1].skipped = Some("rbpf's JIT is x86-64 only".into());
        }
        for _ in 0..rounds {
            for (k, row) in mine.iter_mut().enumerate() {
                if row.skipped.is_some() {
                    continue;
                }
                let once = || load(k, &prog, compiler);
                once(); // untimed: the same engine warms up right before
                let (ns, ()) = elapsed_ns(once);
                row.times_ns.push(ns / SET as f64);
            }
        }
        rows.extend(mine);
    }
    rows
}

/// Verifies and compiles [`SET`] copies of `prog` with engine `k` of [`rows`], keeps them
/// all, then drops them.
fn load(k: usize, prog: &[u8], compiler: &Compiler) {
    match k {
        0 | 2 => {
            let mut vms: Vec<EbpfVm> = (0..SET)
                .map(|_| {
                    let mut vm = EbpfVm::new(prog).unwrap();
                    vm.register_helper(1, helper);
                    vm
                })
                .collect();
            if k == 0 {
                EbpfVm::jit_compile_batch_with(compiler, &mut vms).unwrap();
            } else {
                vms.iter_mut()
                    .for_each(|vm| vm.jit_compile_with(compiler).unwrap());
            }
            drop(vms);
        }
        #[cfg(all(target_arch = "x86_64", unix))]
        _ => {
            let vms: Vec<rbpf::EbpfVmRaw> = (0..SET)
                .map(|_| {
                    let mut vm = rbpf::EbpfVmRaw::new(Some(prog)).unwrap();
                    vm.register_helper(1, helper).unwrap();
                    vm.jit_compile().unwrap();
                    vm
                })
                .collect();
            drop(vms);
        }
        #[cfg(not(all(target_arch = "x86_64", unix)))]
        _ => unreachable!("rbpf's JIT row is skipped"),
    }
}
