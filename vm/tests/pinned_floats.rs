//! Pinned float locals (vm/src/pinning/float.rs): a loop body keeps its loop-carried float
//! locals in pinned FP registers, every way out writes them back (side exits, an error the
//! interpreter raises after an exit, a side trace that inherits them and links back into the
//! body), all modes agree with and without pinning, and the checker refuses a lowering that
//! breaks the protocol on a float register.

use crate::common;

use common::{agree_with, eager, example, record};

/// A loop carrying floats `a` and `b` (and an int counter): every fourth iteration a branch
/// (a side trace that inherits the pinned registers and links back into the body) moves
/// `a`; at iteration 2500 another branch divides by zero inside the body (an exit whose stub
/// must write `a` and `b` back before the interpreter raises with the locals).
const FLOAT_LOOP_RAISES: &str = "\
func main()
  locals i a b t
  const 0; store i
  const 0.5; store a
  const 1.0; store b
  const 0.0; store t
loop:
  load i; const 3000; lt; jump_if_false done
  load b; const 1.0001; mul; store b
  load a; load b; mul; const 0.25; add; const 0.5; mul; store a
  load i; const 4; mod; const 0; eq; jump_if_false even
  load a; const 0.125; sub; store a
even:
  load i; const 2500; eq; jump_if_false next
  load a; load t; div; store a
next:
  load i; const 1; add; store i
  jump loop
done:
  load a; load b; print 2
  const none; return
end
";

#[test]
fn a_float_loop_keeps_its_floats_pinned_and_writes_them_back_on_every_way_out() {
    let (out, stats) = agree_with(FLOAT_LOOP_RAISES, eager, |_| {});
    let (unpinned, _) = agree_with(FLOAT_LOOP_RAISES, eager, |c| c.pin_locals = false);
    assert_eq!(out, unpinned, "the same program without pinned locals");
    assert!(out.contains("ZeroDivisionError"), "{out}");
    assert!(stats.pinned_loops >= 1, "{stats:?}");
    assert!(stats.side_exits >= 1, "{stats:?}");
    let (keeping, recorded) = record(FLOAT_LOOP_RAISES);
    assert!(out.starts_with(&recorded), "{recorded}");
    let lowerings = keeping.lowerings.borrow();
    let floats = lowerings
        .iter()
        .map(|(_, l)| l.pinned_floats.locals().to_vec())
        .find(|f| !f.is_empty())
        .expect("a lowering with pinned float locals");
    // a (local 1) and b (local 2), both carried from iteration to iteration.
    let mut sorted = floats.clone();
    sorted.sort();
    assert_eq!(sorted, [1, 2], "{floats:?}");
}

#[test]
fn mandelbrots_loop_keeps_its_four_carried_floats_in_float_registers() {
    let (keeping, out) = record(&example("mandelbrot", "vm"));
    assert_eq!(out, example("mandelbrot", "expected"));
    let backend = &keeping.backend;
    let cached = backend.cached_ops();
    let lowerings = keeping.lowerings.borrow();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned_floats.locals().is_empty())
        .expect("mandelbrot.vm's loop pins float locals");
    backend.check_cache_states(trace, lowering).unwrap();
    // zr, zi, zr2, zi2 (locals 4 to 7); the counter `it` in a general register.
    let mut floats = lowering.pinned_floats.locals().to_vec();
    floats.sort();
    assert_eq!(floats, [4, 5, 6, 7]);
    assert!(lowering.pinned.contains(&8), "{:?}", lowering.pinned);

    // The first instance whose stencil `register_of` names a register, and the register.
    let first = |register_of: &dyn Fn(usize) -> Option<usize>| {
        let stencils = lowering.instances.iter().map(|i| i.stencil);
        stencils
            .enumerate()
            .find_map(|(k, s)| Some((k, register_of(s)?)))
    };
    // A register written back before it is loaded: the first PIN_FLOAT made the UNPIN_FLOAT
    // of the same register.
    let (pin, q) = first(&|s| cached.pin_float_register_of(s)).expect("a PIN_FLOAT");
    let mut unloaded = lowering.clone();
    unloaded.instances[pin].stencil = cached.unpin_float(q).unwrap();
    let err = backend.check_cache_states(trace, &unloaded).unwrap_err();
    assert!(err.contains("does not hold"), "{err}");

    // A stub that forgets a float register: its first UNPIN_FLOAT made a PIN_FLOAT (which
    // writes nothing back).
    let (unpin, q) =
        first(&|s| cached.unpin_float_register_of(s)).expect("an UNPIN_FLOAT in a stub");
    let mut forgetting = lowering.clone();
    forgetting.instances[unpin].stencil = cached.pin_float(q).unwrap();
    // (The stub's write-back then ends before its last registers, so the check finds the
    // stub's LINK entered with them no longer live.)
    let err = backend.check_cache_states(trace, &forgetting).unwrap_err();
    assert!(err.contains("LINK"), "{err}");
}
