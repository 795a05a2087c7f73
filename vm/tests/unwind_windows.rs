//! `run --unwind` on Windows x64: the VM registers every trace's function table
//! (`RtlAddFunctionTable`, from the set's `.pdata`-derived frame layouts) and runs the
//! program to the same output as without it, compiling the same traces. (Under wine in the
//! Windows x64 matrix row; the runtime's `debug_unwind_generated.rs` checks that the
//! registration lets backtraces and panics walk through traces.)
#![cfg(all(windows, target_arch = "x86_64"))]

use std::process::Command;

const VM: &str = env!("CARGO_BIN_EXE_cpjit-vm");

#[test]
fn unwind_runs_every_example_trace_with_registration() {
    for program in ["examples/calls.vm", "examples/fib.vm"] {
        let run = |unwind: bool| {
            let mut args = vec!["run", program, "--stats"];
            if unwind {
                args.push("--unwind");
            }
            let out = Command::new(VM).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{program} {args:?}: {err}");
            (String::from_utf8_lossy(&out.stdout).into_owned(), err)
        };
        let (plain, plain_stats) = run(false);
        let (unwound, unwound_stats) = run(true);
        assert_eq!(
            plain, unwound,
            "{program}: output with and without --unwind"
        );
        // Same traces, none failing to compile (a registration error would be a failure).
        let traces = |stats: &str| {
            stats
                .lines()
                .find(|l| l.starts_with("traces compiled:"))
                .map(str::to_string)
                .unwrap_or_else(|| panic!("{program}: no statistics:\n{stats}"))
        };
        assert_eq!(traces(&plain_stats), traces(&unwound_stats), "{program}");
        assert!(
            traces(&unwound_stats).contains("compile failures: 0")
                && !traces(&unwound_stats).starts_with("traces compiled: 0"),
            "{program}:\n{unwound_stats}"
        );
    }
}
