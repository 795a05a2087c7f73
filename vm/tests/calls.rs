//! Calls between compiled functions (`CALL_JIT`; calls a trace inlines are in
//! tests/inlining.rs): recursion and call chains give the same
//! output in every mode while compiled code calls compiled code; a callee whose code leaves
//! (a failing guard, an error, an invalidation) is finished exactly as through Rust; the
//! recursion limit and the frames of a traceback (function, line, locals, stack) are the
//! interpreter's; frames beyond the frame stack's room work too.

use crate::common::{agree_with, config};
use cpjit_vm::{Config, Stats};

/// [`agree_with`] on the default configuration changed by `adjust`.
fn agree(text: &str, adjust: impl Fn(&mut Config)) -> (String, Stats) {
    agree_with(text, config, adjust)
}

#[test]
fn recursive_fibonacci_runs_compiled_code_calling_itself() {
    let text = "func fib(n)\n  load n; const 2; lt; jump_if_false rec\n  load n; return\nrec:\n  load n; const 1; sub; call fib\n  load n; const 2; sub; call fib\n  add; return\nend\n\
                func main()\n  const 22; call fib; print\n  const none; return\nend\n";
    let (out, s) = agree(text, |_| {});
    assert_eq!(out, "17711\n");
    // fib(22) makes 57,313 calls; all but the first few hundred go compiled to compiled.
    assert!(s.direct_calls > 50_000, "{s:?}");
}

/// The callee's entry trace is specialised for ints; a float from a list (the caller's
/// trace does not guard it) makes its guard fail while it runs called from compiled code:
/// Rust finishes the call.
#[test]
fn a_guard_failing_in_a_directly_called_callee_is_finished_in_rust() {
    let text = "func sq(x)\n  load x; load x; mul; return\nend\n\
                func main()\n  locals i s l\n  const 400; const 0; newlist; store l\n  const 0; store i\nfill:\n  load i; const 400; lt; jump_if_false filled\n  load l; load i; load i; setitem\n  load i; const 50; mod; const 49; eq; jump_if_false next\n  load l; load i; load i; float; setitem\nnext:\n  load i; const 1; add; store i\n  jump fill\nfilled:\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 400; lt; jump_if_false done\n  load s; load l; load i; getitem; call sq; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";
    // (sq is small enough to be inlined; here it must be called.)
    let (out, s) = agree(text, |c| c.inline_calls = false);
    assert_eq!(out, "21253400.0\n");
    assert!(s.direct_calls > 300 && s.finished_calls > 0, "{s:?}");
}

/// A chain of calls main -> a -> b -> c whose last iteration divides by zero in c.
pub const CHAIN: &str = "func c(x, y)\n  load x; load y; floordiv; return\nend\n\
                func b(x, y)\n  locals t\n  load x; const 2; mul; store t\n  load t; load y; call c; const 1; add; return\nend\n\
                func a(x, y)\n  load x; const 7; load x; load y; call b; add; return\nend\n\
                func main()\n  locals i s\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 200; lt; jump_if_false done\n  load s; load i; const 150; load i; sub; call a; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";

/// [`CHAIN`]'s error and traceback (the interpreter's).
pub const CHAIN_TRACEBACK: &str = "error: line 2:19 in c: ZeroDivisionError: division by zero\n\
         \x20 at line 18:43 in main (locals [150, 2517], stack [2517])\n\
         \x20 at line 10:36 in a (locals [150, 0], stack [150, 7])\n\
         \x20 at line 7:19 in b (locals [150, 0, 300], stack [])\n\
         \x20 at line 2:19 in c (locals [300, 0], stack [300, 0])\n";

/// An error raised three compiled calls deep: the same message and the same frames (each
/// caller at its call with its locals and the values under the arguments) in every mode.
#[test]
fn an_error_deep_in_a_compiled_call_chain_has_the_interpreters_traceback() {
    // (The chain is pure and short enough to be inlined: tests/inlining.rs has that case.)
    let (out, s) = agree(CHAIN, |c| c.inline_calls = false);
    assert_eq!(out, CHAIN_TRACEBACK);
    assert!(s.direct_calls > 100 && s.finished_calls > 0, "{s:?}");
}

const DEEP: &str = "func r(n, d)\n  load d; const 0; eq; jump_if_false rec\n  load n; return\nrec:\n  load n; const 1; add; load d; const 1; sub; call r; return\nend\n\
                    func main()\n  locals i s\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 100; lt; jump_if_false done\n  load s; load i; load i; const 90; eq; const 1000; mul; const 3; add; call r; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";

/// Compiled recursion reaches the recursion limit at the same call as the interpreter.
#[test]
fn the_recursion_limit_is_the_same_for_compiled_calls() {
    let (out, s) = agree(DEEP, |_| {});
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "error: line 2:3 in r: RecursionError: maximum recursion depth exceeded"
    );
    // main and 255 frames of r: 256 frames, the default limit.
    assert_eq!(lines.len(), 1 + 256, "{out}");
    assert!(
        lines[1].starts_with("  at line 13:72 in main (locals [90, "),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[256],
        "  at line 5:47 in r (locals [344, 749], stack [])"
    );
    assert!(s.direct_calls > 200, "{s:?}");
}

/// With room for only a few frames on the frame stack, the others get memory of their own
/// (their calls go through Rust); results, limit and frames do not change.
#[test]
fn frames_beyond_the_frame_stack_get_memory_of_their_own() {
    let (reference, _) = agree(DEEP, |_| {});
    let (out, s) = agree(DEEP, |c| c.frame_stack_words = 64);
    assert_eq!(out, reference);
    assert!(s.direct_calls > 0, "{s:?}");
    let (out, _) = agree(DEEP, |c| c.frame_stack_words = 0);
    assert_eq!(out, reference);
}

/// The innermost of a chain of compiled recursive calls stores a global that the function's
/// own entry trace folded: the outer frames are still in that code, which stays mapped; each
/// leaves it after its call, and later calls go through Rust.
#[test]
fn invalidating_the_code_of_running_frames_leaves_it_after_each_call() {
    let text = "global G 1\n\
                func r(d, i)\n  load d; const 0; eq; jump_if_false rec\n  load i; const 150; eq; jump_if_false keep\n  const 5; store_global G\nkeep:\n  load_global G; return\nrec:\n  load d; const 1; sub; load i; call r; load_global G; add; return\nend\n\
                func main()\n  locals i s\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 300; lt; jump_if_false done\n  load s; const 3; load i; call r; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";
    let (out, s) = agree(text, |_| {});
    // 150 iterations of 4 * 1, then 150 of 4 * 5.
    assert_eq!(out, "3600\n");
    assert!(s.invalidations > 0 && s.direct_calls > 100, "{s:?}");
}
