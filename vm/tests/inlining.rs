//! Calls inlined into traces (`cpjit_vm::inline`): small pure callees run inside the
//! caller's trace with their locals on its value stack. Every way such a body can leave
//! (an overflow, an error, a type the trace did not expect, the recursion limit) resumes
//! the interpreter at the caller's `CALL`, which makes the call again: the output, the error
//! and the traceback (every frame's function, line, locals and stack) are the interpreter's.

use crate::calls::{CHAIN, CHAIN_TRACEBACK};
use crate::common::{agree_with, config, eager};
use cpjit_vm::{Config, Mode, Stats};

/// [`agree_with`] on `base`'s settings (the default ones, or eager tier-up).
fn agree(text: &str, base: fn(Mode) -> Config) -> (String, Stats) {
    agree_with(text, base, |_| {})
}

/// The calls example's shape: f calls g, both inlined into main's loop; no call is left
/// in compiled code.
#[test]
fn nested_pure_callees_run_inside_the_callers_trace() {
    let text = "func g(x)\n  load x; const 7; floordiv; return\nend\n\
                func f(x)\n  load x; load x; mul; load x; const 3; mul; add; const 1000; mod\n  load x; call g; add\n  return\nend\n\
                func main()\n  locals i s\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 5000; lt; jump_if_false done\n  load s; load i; call f; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";
    let (out, s) = agree(text, config);
    let want: i64 = (0..5000i64)
        .map(|x| (x * x + 3 * x).rem_euclid(1000) + x.div_euclid(7))
        .sum();
    assert_eq!(out, format!("{want}\n"));
    assert!(s.inlined_calls >= 2, "{s:?}");
    assert_eq!(s.direct_calls, 0, "{s:?}");
    // Off, the same program calls compiled code instead.
    let (off, s) = agree(text, |m| Config {
        inline_calls: false,
        ..config(m)
    });
    assert_eq!(off, out);
    assert!(s.direct_calls > 1000 && s.inlined_calls == 0, "{s:?}");
}

/// A callee with locals of its own (stored and loaded: `PUT`, `COPY`), two arguments and a
/// list argument indexed inside it.
#[test]
fn callee_locals_and_list_arguments_live_on_the_callers_stack() {
    let text = "func pick(xs, i, k)\n  locals t u\n  load xs; load i; getitem; store t\n  load t; load k; mul; store u\n  load u; load t; sub; load i; add; return\nend\n\
                func main()\n  locals i s xs\n  const 50; const 3; newlist; store xs\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 300; lt; jump_if_false done\n  load s; load xs; load i; const 50; mod; load i; call pick; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";
    let (out, s) = agree(text, eager);
    let want: i64 = (0..300i64).map(|i| 3 * i - 3 + i % 50).sum();
    assert_eq!(out, format!("{want}\n"));
    assert!(s.inlined_calls > 0 && s.direct_calls == 0, "{s:?}");
}

/// An int result beyond the tagged range in an inlined callee (at one iteration), then a
/// float argument where the trace proved ints: each leaves the trace, and the interpreter
/// makes the call (the first with a big int).
#[test]
fn an_overflow_or_a_new_type_inside_an_inlined_call_resumes_at_the_call() {
    let text = "func sq(x)\n  load x; load x; mul; const 1; add; return\nend\n\
                func main()\n  locals i s x\n  const 0; store i\n  const 0; store s\nloop:\n  load i; const 400; lt; jump_if_false done\n  load i; store x\n  load i; const 150; eq; jump_if_false small\n  const 20000000; store x\nsmall:\n  load i; const 300; lt; jump_if_true int\n  load i; float; store x\nint:\n  load s; load x; call sq; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; print\n  const none; return\nend\n";
    let (out, s) = agree(text, eager);
    // 20,000,000 squared is beyond the 48-bit ints: a big int, which the floats from
    // i = 300 on make a float (Python's sum).
    assert_eq!(out, "400000021231300.0\n");
    assert!(s.inlined_calls > 0 && s.side_exits > 0, "{s:?}");
    // Within the tagged range, the float iterations run too.
    let text = text.replace("const 20000000", "const 2000");
    let (out, s) = agree(&text, eager);
    assert!(out.ends_with(".0\n"), "{out}");
    assert!(s.inlined_calls > 0 && s.side_exits > 0, "{s:?}");
}

/// An error deep in a chain of three inlined calls has the interpreter's traceback: the
/// trace leaves at the outermost call and the interpreter runs the chain.
#[test]
fn an_error_in_an_inlined_call_chain_has_the_interpreters_traceback() {
    let (out, s) = agree(CHAIN, config);
    assert_eq!(out, CHAIN_TRACEBACK);
    assert!(s.inlined_calls >= 3 && s.direct_calls == 0, "{s:?}");
}

/// A loop at the bottom of a recursion calls an inlined chain two calls deep. Where the
/// interpreter would raise RecursionError at one of those calls, the trace's depth check
/// leaves first, and the interpreter raises it: the same call, the same frames.
#[test]
fn the_recursion_limit_holds_for_inlined_calls() {
    let text = "func leaf(x)\n  load x; const 1; add; return\nend\n\
                func mid(x)\n  load x; call leaf; const 2; mul; return\nend\n\
                func r(d, n)\n  locals i s\n  load d; const 0; eq; jump_if_false rec\n  const 0; store i\n  const 0; store s\nloop:\n  load i; load n; lt; jump_if_false done\n  load s; load i; call mid; add; store s\n  load i; const 1; add; store i\n  jump loop\ndone:\n  load s; return\nrec:\n  load d; const 1; sub; load n; call r; return\nend\n\
                func main()\n  locals k t\n  const 0; store k\n  const 0; store t\nloop:\n  load k; const 260; lt; jump_if_false done\n  load t; load k; const 70; call r; add; store t\n  load k; const 1; add; store k\n  jump loop\ndone:\n  load t; print\n  const none; return\nend\n";
    for base in [config as fn(Mode) -> Config, eager] {
        let (out, s) = agree(text, base);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0], "error: line 2:3 in leaf: RecursionError: maximum recursion depth exceeded",
            "{out}"
        );
        assert!(s.inlined_calls > 0, "{s:?}");
    }
}
