//! Tier-up behaviour: thresholds, the failed-compile marker, side exits that resume at the
//! right instruction, invalidation, entry traces, and every linked stencil set.

use crate::common;

use common::{config, run, MODES};
use cpjit_vm::abi::ExitLink;
use cpjit_vm::ops::op;
use cpjit_vm::{Config, Mode, Vm};

/// `main` with a counted loop of `n` iterations around `body`, printing `s` at the end.
fn looped(n: u64, body: &str) -> String {
    format!(
        "global K 3\nfunc main()\n  locals i s x\n  const 0; store i; const 0; store s; const 0; store x\n\
         top:\n  load i; const {n}; lt; jump_if_false done\n{body}\n  load i; const 1; add; store i\n  jump top\n\
         done:\n  load s; print\n  const none; return\nend\n"
    )
}

fn vm(text: &str, config: Config) -> Vm {
    let vm = Vm::new(cpjit_vm::parse(text).unwrap(), config).unwrap();
    vm.run().unwrap();
    vm
}

#[test]
fn threshold_reached_compiles_exactly_once() {
    let text = looped(1000, "  load s; load i; add; store s");
    for mode in [Mode::Uops, Mode::Jit] {
        let cold = vm(
            &text,
            Config {
                backedge_threshold: 2000,
                ..config(mode)
            },
        );
        assert_eq!(
            cold.function_state(0).compiles.get(),
            0,
            "{mode:?}: below the threshold"
        );
        let hot = vm(
            &text,
            Config {
                backedge_threshold: 50,
                ..config(mode)
            },
        );
        assert_eq!(hot.function_state(0).compiles.get(), 1, "{mode:?}");
        assert_eq!(hot.stats().loop_traces, 1);
        assert_eq!(hot.output(), "499500\n");
        // Entered once from the back-edge, then it loops inside the trace.
        assert_eq!(hot.stats().executor_runs, 1);
    }
    let interp = vm(&text, config(Mode::Interp));
    assert_eq!(interp.stats().traces, 0);
}

#[test]
fn failed_compile_is_never_retried() {
    // Two loops in one function: after the first compile fails, the second loop never
    // compiles either, and back-edges stop counting.
    let text = "func main()\n  locals i s\n  const 0; store i; const 0; store s\n\
                a:\n  load i; const 500; lt; jump_if_false b0\n  load s; load i; add; store s\n  load i; const 1; add; store i\n  jump a\n\
                b0:\n  const 0; store i\n\
                b:\n  load i; const 500; lt; jump_if_false done\n  load s; const 2; add; store s\n  load i; const 1; add; store i\n  jump b\n\
                done:\n  load s; print\n  const none; return\nend\n";
    for mode in [Mode::Uops, Mode::Jit] {
        let v = vm(
            text,
            Config {
                backedge_threshold: 20,
                fail_compiles: true,
                ..config(mode)
            },
        );
        let st = v.function_state(0);
        assert!(st.jit_failed.get());
        assert_eq!(
            st.compiles.get(),
            1,
            "{mode:?}: a failed compile must not be retried"
        );
        assert_eq!(v.stats().compile_failures, 1);
        assert_eq!(v.stats().traces, 0);
        assert_eq!(v.output(), "125750\n");
    }
}

#[test]
fn side_exit_resumes_at_the_right_instruction() {
    // The trace is recorded on the `then` path; from i = 300 on the branch goes the other
    // way, and from i = 600 `x` turns into a float, failing a type guard mid-trace. Prints
    // before and after each guard would be lost or repeated if the interpreter resumed at
    // the wrong instruction.
    let body = "  load i; const 100; mod; const 0; eq; jump_if_false np\n  load i; load x; print 2\nnp:\n\
                load i; const 300; lt; jump_if_false big\n  load s; const 1; add; store s\n  jump join\n\
                big:\n  load s; const 1000; add; store s\n\
                join:\n  load i; const 600; eq; jump_if_false nf\n  const 0.5; store x\n\
                nf:\n  load x; const 1; add; store x";
    let text = looped(900, body);
    let reference = run(&text, config(Mode::Interp));
    assert!(reference.ends_with("600300\n"), "{reference}");
    for mode in [Mode::Uops, Mode::Jit] {
        let v = vm(
            &text,
            Config {
                backedge_threshold: 10,
                side_exit_threshold: 5,
                ..config(mode)
            },
        );
        assert_eq!(v.output(), reference, "{mode:?}");
        let s = v.stats();
        assert!(s.side_exits > 0 && s.side_traces > 0, "{mode:?}: {s:?}");
        assert_link_blocks_hold_their_exits(&v);
    }
}

/// Every `EXIT_TRACE` of `v`'s first function points at its exit's link block, which holds
/// the exit's `arg0` (its pc, executor and exit), where the stencils read it when they leave
/// to the interpreter.
fn assert_link_blocks_hold_their_exits(v: &Vm) {
    let executors = v.function_state(0).executors.borrow();
    let mut exits = 0;
    for e in executors.iter() {
        let stubs = e.trace.uops.iter().filter(|u| u.op == op::EXIT_TRACE);
        for u in stubs {
            let link = &e.links[(u.arg0 & 0xffff) as usize];
            assert_eq!(u.arg1, link as *const ExitLink as u64, "{:#x}", u.arg0);
            assert_eq!(link.exit_at.get(), u.arg0);
            exits += 1;
        }
    }
    assert!(exits > 0, "no exit stub");
}

#[test]
fn storing_a_folded_global_invalidates_the_trace() {
    // K is folded into the trace as a constant; storing it at i = 700 must invalidate the
    // trace (the loop is then traced again with the new value).
    let body = "  load s; load_global K; add; store s\n  load i; const 700; eq; jump_if_false same\n  const 10; store_global K\nsame:";
    let text = looped(1000, body);
    let expected = format!("{}\n", 701 * 3 + 299 * 10);
    for mode in MODES {
        let v = vm(
            &text,
            Config {
                backedge_threshold: 20,
                ..config(mode)
            },
        );
        assert_eq!(v.output(), expected, "{mode:?}");
        if mode != Mode::Interp {
            let s = v.stats();
            assert_eq!(s.invalidations, 1, "{mode:?}: {s:?}");
            assert!(
                s.loop_traces >= 2,
                "{mode:?}: the loop is traced again: {s:?}"
            );
        }
    }
}

#[test]
fn a_callee_storing_a_folded_global_leaves_the_running_trace() {
    let text = "global K 1\nfunc bump(i)\n  load i; const 400; eq; jump_if_false no\n  const 5; store_global K\nno:\n  const none; return\nend\n\
                func main()\n  locals i s\n  const 0; store i; const 0; store s\n\
                top:\n  load i; const 1000; lt; jump_if_false done\n  load i; call bump; pop\n  load s; load_global K; add; store s\n  load i; const 1; add; store i\n  jump top\n\
                done:\n  load s; print\n  const none; return\nend\n";
    let expected = format!("{}\n", 400 + 600 * 5);
    for mode in MODES {
        assert_eq!(
            run(
                text,
                Config {
                    backedge_threshold: 20,
                    call_threshold: 10,
                    ..config(mode)
                }
            ),
            expected,
            "{mode:?}"
        );
    }
}

#[test]
fn hot_functions_get_an_entry_trace() {
    let text = "func sq(x)\n  load x; load x; mul; return\nend\nfunc main()\n  locals i s\n  const 0; store i; const 0; store s\n\
                top:\n  load i; const 200; lt; jump_if_false done\n  load s; load i; call sq; add; store s\n  load i; const 1; add; store i\n  jump top\n\
                done:\n  load s; print\n  const none; return\nend\n";
    for mode in [Mode::Uops, Mode::Jit] {
        let v = vm(
            text,
            Config {
                backedge_threshold: 1000,
                call_threshold: 10,
                ..config(mode)
            },
        );
        assert_eq!(v.output(), "2646700\n");
        assert_eq!(v.stats().entry_traces, 1, "{mode:?}");
        assert!(v.function_state(0).entry.get().is_some());
    }
}

#[test]
fn errors_in_traces_are_raised_by_the_interpreter_at_the_same_place() {
    let body = "  load i; const 500; eq; jump_if_false ok\n  const 0; store x\nok:\n  const 10; load x; floordiv; pop\n  const 1; store x";
    let text = looped(1000, body).replace("const 0; store x\ntop", "const 1; store x\ntop");
    let expected = run(&text, config(Mode::Interp));
    assert!(
        expected.ends_with("error: line 10:21 in main: ZeroDivisionError: division by zero\n"),
        "{expected}"
    );
    for mode in [Mode::Uops, Mode::Jit] {
        assert_eq!(
            run(
                &text,
                Config {
                    backedge_threshold: 10,
                    ..config(mode)
                }
            ),
            expected,
            "{mode:?}"
        );
    }
}

#[test]
fn dump_trace_lists_micro_ops_and_machine_code() {
    let text = looped(200, "  load s; load i; add; store s");
    let v = vm(
        &text,
        Config {
            backedge_threshold: 10,
            dump_traces: true,
            ..config(Mode::Jit)
        },
    );
    let dump = v.trace_dump();
    assert!(
        dump.contains("ADD_INT") && dump.contains("JUMP_TOP"),
        "{dump}"
    );
    assert!(dump.contains("machine code:"), "{dump}");
    // The runtime's listing: instances with their stencils and patched holes; the add runs
    // with both operands cached in registers and leaves its result there.
    assert!(dump.contains("] op_ADD_INT_cached_2_1 at 0x"), "{dump}");
    assert!(dump.contains("    hole code+0x"), "{dump}");
}

#[test]
fn every_linked_stencil_set_runs_the_examples() {
    let sets = cpjit_vm::jit::available_sets();
    assert!(!sets.is_empty(), "no stencil set linked for this host");
    for (name, text, expected) in [
        (
            "sum",
            include_str!("../examples/sum.vm"),
            include_str!("../examples/sum.expected"),
        ),
        (
            "collatz",
            include_str!("../examples/collatz.vm"),
            include_str!("../examples/collatz.expected"),
        ),
        (
            "nbody",
            include_str!("../examples/nbody.vm"),
            include_str!("../examples/nbody.expected"),
        ),
    ] {
        for set in &sets {
            let vm =
                Vm::with_stencils(cpjit_vm::parse(text).unwrap(), Config::default(), set).unwrap();
            vm.run().unwrap();
            assert_eq!(
                vm.output(),
                expected,
                "{name} with the {} stencils",
                set.target
            );
            assert!(vm.stats().traces > 0);
        }
    }
}

#[test]
fn unbounded_recursion_is_a_clean_error() {
    let text = "func r(n)\n  load n; const 1; add; call r; return\nend\nfunc main()\n  const 0; call r; print\n  const none; return\nend\n";
    for mode in MODES {
        let out = run(
            text,
            Config {
                call_threshold: 10,
                ..config(mode)
            },
        );
        assert_eq!(
            out, "error: line 2:3 in r: RecursionError: maximum recursion depth exceeded\n",
            "{mode:?}"
        );
    }
}

#[test]
fn recursive_fibonacci_agrees_in_all_modes() {
    let text = "func fib(n)\n  load n; const 2; lt; jump_if_false rec\n  load n; return\nrec:\n  load n; const 1; sub; call fib\n  load n; const 2; sub; call fib\n  add; return\nend\n\
                func main()\n  const 20; call fib; print\n  const none; return\nend\n";
    for mode in MODES {
        assert_eq!(
            run(
                text,
                Config {
                    call_threshold: 50,
                    ..config(mode)
                }
            ),
            "6765\n",
            "{mode:?}"
        );
    }
}

/// A side trace that ends at its loop's head re-enters the loop past its preamble only
/// where it has proved what the loop's body assumes. Here the odd path keeps `x` an int
/// (its trace links into the body) until iteration 2,000, from where it makes `x` a float:
/// the side trace grown for that path must enter the loop at its start, whose guards
/// send the float path back out, and every mode prints the interpreter's sum.
#[test]
fn side_traces_skip_a_loops_preamble_only_where_they_prove_its_assumptions() {
    let body = "  load i; const 3; mod; const 0; eq; jump_if_false other\n\
                \x20 load x; const 1; add; store x\n  jump next\n\
                other:\n  load i; const 2000; lt; jump_if_true keep\n  load x; float; store x\n\
                keep:\n  load x; const 2; add; store x\n\
                next:\n  load s; load x; add; store s";
    let text = looped(3000, body);
    // (Linked, not merged into the loop: merged, the odd path is a block of the body.)
    let unmerged = |c: &mut Config| c.merge_branches = false;
    let (merged_out, merged) = common::agree_with(&text, config, |_| {});
    assert!(merged.merged_branches > 0, "{merged:?}");
    let (out, s) = common::agree_with(&text, config, unmerged);
    assert_eq!(merged_out, out);
    // x grows by 5 every 3 iterations, and is a float from 2000 on.
    let (mut x, mut sum) = (0f64, 0f64);
    for i in 0..3000 {
        x += if i % 3 == 0 { 1.0 } else { 2.0 };
        sum += x;
    }
    assert_eq!(out, format!("{sum:?}\n"));
    assert!(s.loop_body_links > 0, "{s:?}");
    // The same program whose odd path never changes x's type.
    let text = looped(3000, &body.replace("const 2000", "const 5000"));
    let (out, s) = common::agree_with(&text, config, unmerged);
    assert!(!out.contains('.'), "{out}");
    assert!(s.loop_body_links > 0, "{s:?}");
}

/// A path that ends at a loop's back-edge before that loop had an executor (collatz.vm's
/// inner loop leaves, adds up the chain and reaches the outer loop's `jump outer` before the
/// outer loop is traced) links to the loop's executor once it has one: no side trace of
/// that one jump grows there.
#[test]
fn a_path_ending_at_a_back_edge_links_to_its_loops_executor() {
    let (recorder, out) = common::record(&common::example("collatz", "vm"));
    assert_eq!(out, common::example("collatz", "expected"));
    let traces = recorder.traces();
    let one_jump = traces
        .iter()
        .filter(|t| t.body_len == 1 && t.uops[0].op == cpjit_vm::ops::op::EXIT_TRACE)
        .count();
    assert_eq!(one_jump, 0, "{} traces", traces.len());
}
