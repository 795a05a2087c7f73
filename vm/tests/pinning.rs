//! Pinned locals (vm/src/pinning.rs): loop bodies keep their hottest locals in registers,
//! every way out of the body writes them back (side exits, errors raised by the
//! interpreter after an exit, links of side traces back into the body), all modes agree, and
//! the checker refuses a lowering that breaks the protocol.

use crate::common;

use common::{agree_with, eager, example, gen, record};
use cpjit_vm::ops::{self, op};
use cpjit_vm::pinning::Held;
use cpjit_vm::{Config, Mode, Vm};

/// `text` in jit mode (`adjust` applied to the default configuration): the rendered output
/// (traceback included) and the statistics.
fn jit_run(text: &str, adjust: impl Fn(&mut Config)) -> (String, cpjit_vm::Stats) {
    let mut config = common::config(Mode::Jit);
    adjust(&mut config);
    let vm = Vm::new(cpjit_vm::parse(text).unwrap(), config).unwrap();
    let result = vm.run();
    (common::render(&vm, result), vm.stats())
}

// jit mode only (twice, with and without pinned locals): the interpreter's and the micro-op
// interpreter's runs of the examples are `examples.rs`'s, which the matrix runs once per
// Rust target rather than in every row (under qemu they are most of a row's time).
#[test]
fn loops_of_the_examples_pin_their_counters_and_give_the_same_output() {
    for name in ["sum", "nested", "collatz", "mandelbrot", "sieve"] {
        let text = example(name, "vm");
        let (out, stats) = jit_run(&text, |_| {});
        assert_eq!(out, example(name, "expected"), "examples/{name}.vm");
        assert!(
            stats.pinned_loops >= 1,
            "{name}: no loop pinned a local: {stats:?}"
        );
        let (unpinned, stats) = jit_run(&text, |c| c.pin_locals = false);
        assert_eq!(unpinned, out, "{name} with --no-pin");
        assert_eq!(stats.pinned_loops, 0, "{name} with --no-pin: {stats:?}");
    }
}

/// [`agree_with`] on `text` with pinned locals and without: both render the same (output,
/// traceback and locals); that rendering and each run's statistics, pinned first.
fn with_and_without_pins(text: &str) -> (String, cpjit_vm::Stats, cpjit_vm::Stats) {
    let (out, pinned) = agree_with(text, eager, |_| {});
    let (unpinned_out, unpinned) = agree_with(text, eager, |c| c.pin_locals = false);
    assert_eq!(unpinned_out, out, "the same program without pinned locals");
    (out, pinned, unpinned)
}

/// A loop whose body leaves at its 700th iteration (a guard the trace took the other way
/// fails) and in between runs side traces that link back into the pinned body; then a loop
/// whose pinned sum leaves the tagged range (its add leaves the body, the sum goes on as a
/// big int) and a ZeroDivisionError after it (the traceback lists the locals as the frame
/// has them).
const LEAVES_AND_RAISES: &str = "\
func main()
  locals i s t
  const 0; store i
  const 0; store s
  const 0; store t
loop:
  load i; const 1000; lt; jump_if_false done
  load s; load i; add; store s
  load i; const 700; lt; jump_if_false late
  jump next
late:
  load t; const 1; add; store t
next:
  load i; const 1; add; store i
  jump loop
done:
  load i; print
  load s; print
  load t; print
  const 0; store i
big:
  load i; const 3000; lt; jump_if_false raise
  load s; const 68719476736; add; store s
  load i; const 1; add; store i
  jump big
raise:
  load s; load i; const 3000; sub; floordiv; print
  const none; return
end
";

#[test]
fn exits_and_errors_inside_a_pinned_body_see_every_local_written_back() {
    let (out, stats, _) = with_and_without_pins(LEAVES_AND_RAISES);
    assert!(out.starts_with("1000\n499500\n300\nerror: "), "{out}");
    assert!(out.contains("ZeroDivisionError"), "{out}");
    // s = 499500 + 3000 * 2**36, a big int, in main's locals.
    assert!(out.contains("[3000, 206158430707500, 300]"), "{out}");
    assert!(stats.pinned_loops >= 1, "{stats:?}");
    assert!(stats.side_exits >= 1, "{stats:?}");
}

#[test]
fn random_programs_agree_with_pinned_locals() {
    let mut pinned = 0;
    for seed in 0..60 {
        let text = gen::program(seed);
        let reference = common::run_traced(&text, eager(Mode::Interp));
        let (out, stats) = jit_run(&text, |c| *c = eager(Mode::Jit));
        assert_eq!(out, reference, "seed {seed}, pinned locals:\n{text}");
        let (unpinned, _) = jit_run(&text, |c| {
            *c = eager(Mode::Jit);
            c.pin_locals = false;
        });
        assert_eq!(unpinned, reference, "seed {seed}, --no-pin:\n{text}");
        pinned += stats.pinned_loops;
    }
    assert!(pinned > 0, "no random program pinned a local");
}

#[test]
fn the_checker_refuses_a_lowering_that_breaks_the_pinning_protocol() {
    let (keeping, out) = record(&example("sum", "vm"));
    assert_eq!(out, example("sum", "expected"));
    let backend = &keeping.backend;
    let cached = backend.cached_ops();
    let lowerings = keeping.lowerings.borrow();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned.is_empty())
        .expect("sum.vm's loop pins its locals");
    backend.check_cache_states(trace, lowering).unwrap();

    // An exit from the body straight to an EXIT_TRACE, past the write-back: the body's
    // stubs are each one stencil that writes back (LINK, UNPINs, EXIT_TRACE), made the
    // uncached EXIT_TRACE.
    let stubs = whole_stubs(lowering, cached);
    let stub = *stubs.first().expect("a stub of the body");
    let mut skipped = lowering.clone();
    skipped.instances[stub].stencil = backend
        .set()
        .index_of(ops::info(op::EXIT_TRACE).stencil)
        .unwrap();
    let err = backend.check_cache_states(trace, &skipped).unwrap_err();
    assert!(err.contains("writes back"), "{err}");

    // A preamble exit into a stub that writes back registers holding nothing.
    let preamble_stub = trace.uops[..trace.loop_body_start().unwrap()]
        .iter()
        .find(|u| cpjit_vm::ops::info(u.op).exits)
        .map(|u| u.target as usize)
        .expect("the preamble has an exit");
    let mut garbage = lowering.clone();
    garbage.exit_entry[preamble_stub] = Some(cpjit_vm::jit::LoweredId(stub));
    let err = backend.check_cache_states(trace, &garbage).unwrap_err();
    assert!(err.contains("writes back"), "{err}");

    // A stub whose operand names other locals than the body pins.
    let mut other = lowering.clone();
    other.exit_pins += 8;
    let err = backend.check_cache_states(trace, &other).unwrap_err();
    assert!(err.contains("not the pinning's"), "{err}");

    // A member on a pinned register before the register is loaded: drop the PINs' effect by
    // turning the first PIN into a spill-free UNPIN of the same register.
    let first_pin = lowering.body_entry.unwrap().index();
    let mut unloaded = lowering.clone();
    let (register, scaled) = cached
        .pin_register_of(lowering.instances[first_pin].stencil)
        .unwrap();
    unloaded.instances[first_pin].stencil = cached.unpin(register, scaled).unwrap();
    assert!(backend.check_cache_states(trace, &unloaded).is_err());

    // sum.vm's locals are ints where its body starts: the sum, only added into, is held
    // wide, and so is the counter, which the body bounds (vm/src/pinning/wide.rs); a PIN
    // that loads one boxed no longer matches the members that take it unboxed.
    let pins = &lowering.instances[first_pin..first_pin + 2];
    let mut held: Vec<Held> = pins
        .iter()
        .map(|p| cached.pin_register_of(p.stencil).unwrap().1)
        .collect();
    held.sort();
    assert_eq!(
        held,
        [Held::Wide, Held::Wide],
        "sum.vm's body pins its locals unboxed"
    );
    let mut boxed = lowering.clone();
    boxed.instances[first_pin].stencil = cached.pin(register, Held::Boxed).unwrap();
    let err = backend.check_cache_states(trace, &boxed).unwrap_err();
    assert!(err.contains(&format!("held {scaled:?}")), "{err}");
}

/// A loop whose branch taken every fourth iteration (`x = x * 2 + 1`) grows a side trace,
/// which keeps the loop's pinned registers (it inherits them) and links back into the
/// pinned body; the side trace's multiply leaves the tagged range after 47 doublings, in the
/// middle of it, and the loop goes on with x a big int (the trace's guards reject it: the
/// generic ops take it).
const HOT_BRANCH_OVERFLOWS: &str = "\
func main()
  locals i x t
  const 0; store i
  const 0; store x
  const 0; store t
loop:
  load i; const 400; lt; jump_if_false done
  load i; const 4; mod; const 0; eq; jump_if_false other
  load x; const 2; mul; const 1; add; store x
  jump next
other:
  load t; load i; add; store t
next:
  load i; const 1; add; store i
  jump loop
done:
  load x; print
  const none; return
end
";

#[test]
fn a_hot_branch_of_a_pinned_loop_keeps_its_registers_and_leaves_through_their_write_back() {
    // Linked as a side trace (merged into the loop, below, it is a block of the body).
    let unmerged = |c: &mut Config| c.merge_branches = false;
    let (out, stats) = agree_with(HOT_BRANCH_OVERFLOWS, eager, unmerged);
    assert_eq!(out, format!("{}\n", (1u128 << 100) - 1));
    assert!(stats.inherited_pins >= 1, "{stats:?}");
    assert!(stats.pinned_links >= 1, "{stats:?}");
    let (_, unpinned) = agree_with(HOT_BRANCH_OVERFLOWS, eager, |c| {
        unmerged(c);
        c.pin_locals = false;
    });
    assert_eq!(unpinned.inherited_pins, 0, "{unpinned:?}");
    // With fewer doublings, x stays tagged.
    let short = HOT_BRANCH_OVERFLOWS.replace("const 400", "const 120");
    let (out, stats) = agree_with(&short, eager, unmerged);
    assert_eq!(out, format!("{}\n", (1u64 << 30) - 1));
    assert!(stats.pinned_links >= 1, "{stats:?}");
}

/// The same hot branch merged into the pinned loop: the block keeps the registers, and its
/// multiply leaving the tagged range writes them back through the block's own exit.
#[test]
fn a_hot_branch_merged_into_a_pinned_loop_keeps_its_registers_and_leaves_through_their_write_back()
{
    let (out, stats, unpinned) = with_and_without_pins(HOT_BRANCH_OVERFLOWS);
    assert_eq!(out, format!("{}\n", (1u128 << 100) - 1));
    assert_eq!(stats.merged_branches, 1, "{stats:?}");
    assert_eq!(stats.pinned_loops, 1, "{stats:?}");
    assert_eq!(unpinned.merged_branches, 1, "{unpinned:?}");
    assert_eq!(unpinned.pinned_loops, 0, "{unpinned:?}");
}

#[test]
fn collatz_side_traces_inherit_the_pinned_locals_and_their_stubs_link_first() {
    let (keeping, out) = record(&example("collatz", "vm"));
    assert_eq!(out, example("collatz", "expected"));
    let backend = &keeping.backend;
    let cached = backend.cached_ops();
    let lowerings = keeping.lowerings.borrow();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| l.inherited)
        .expect("a side trace of collatz.vm's loop inherits its pinned locals");
    let (_, parent) = lowerings
        .iter()
        .find(|(_, l)| !l.inherited && !l.pinned.is_empty())
        .expect("collatz.vm's loop pins its locals");
    assert_eq!(
        (&lowering.pinned, &lowering.pinned_held),
        (&parent.pinned, &parent.pinned_held)
    );
    // Entered from Rust through its PINs; by a link past them.
    let entry = lowering
        .pinned_entry
        .expect("an entry with the registers live");
    assert!(lowering.instances[..entry.index()]
        .iter()
        .all(|i| cached.pin_register_of(i.stencil).is_some()));
    // Every stub it leaves through, its end's included, is one stencil that links first,
    // then writes back and leaves (LINK, UNPINs, EXIT_TRACE), entered from the body.
    let stubs = whole_stubs(lowering, cached);
    let exits = trace.uops[..trace.body_len]
        .iter()
        .filter(|u| ops::info(u.op).exits)
        .map(|u| u.target as usize)
        .chain([trace.body_len - 1]);
    for exit in exits {
        let k = lowering.exit_instance(exit).index();
        assert!(
            stubs.contains(&k),
            "micro-op {exit}'s stub is {k}, not one stencil"
        );
        assert_eq!(lowering.instances[k].uop, Some(exit));
        assert_eq!(trace.uops[exit].op, op::EXIT_TRACE);
    }
    assert_eq!(lowering.links.len(), stubs.len());
    // The checker refuses the trace's end, which the body falls into with the registers
    // live, as the uncached EXIT_TRACE (which would lose them).
    let end = lowering.exit_instance(trace.body_len - 1).index();
    let mut lost = lowering.clone();
    lost.instances[end].stencil = backend
        .set()
        .index_of(ops::info(op::EXIT_TRACE).stencil)
        .unwrap();
    let err = backend.check_cache_states(trace, &lost).unwrap_err();
    assert!(err.contains("uncached stencil"), "{err}");
}

/// The instances of `lowering` that are a whole exit stub of a pinned body (LINK, UNPINs,
/// EXIT_TRACE in one stencil), by index.
fn whole_stubs(
    lowering: &cpjit_vm::jit::Lowering,
    cached: &cpjit_vm::jit::CachedOps,
) -> Vec<usize> {
    let stubs: Vec<usize> = (0..lowering.instances.len())
        .filter(|&k| cached.is_exit_pinned(lowering.instances[k].stencil))
        .collect();
    assert!(!stubs.is_empty(), "no whole exit stub");
    stubs
}

/// A loop summing its counter and storing `xs[i] = ys[i] + i`: the counter names list items,
/// whose members take the index from its pinned register (families `vm_pinned_index_*`), so
/// it stays pinned, scaled; the read at i = 40 is past the end of `ys`, and the interpreter
/// raises IndexError there with every local written back.
const INDEXED: &str = "\
func main()
  locals xs ys i s
  const 50; const 2; newlist; store xs
  const 40; const 3; newlist; store ys
  const 0; store i
  const 0; store s
loop:
  load i; const 45; lt; jump_if_false done
  load s; load i; add; store s
  load xs; load i; load ys; load i; getitem; load i; add; setitem
  load i; const 1; add; store i
  jump loop
done:
  load s; print
  load xs; const 39; getitem; print
  const none; return
end
";

#[test]
fn a_loop_counter_used_as_a_list_index_stays_pinned() {
    let (out, stats, _) = with_and_without_pins(INDEXED);
    assert!(out.contains("IndexError"), "{out}");
    assert!(stats.pinned_loops >= 1, "{stats:?}");
    let short = INDEXED.replace("const 45", "const 40");
    let (out, _) = agree_with(&short, eager, |_| {});
    assert_eq!(out, "780\n42\n");

    let (keeping, _) = record(&short);
    let cached = keeping.backend.cached_ops();
    let lowerings = keeping.lowerings.borrow();
    let (trace, lowering) = lowerings
        .iter()
        .find(|(_, l)| !l.pinned.is_empty())
        .expect("the loop pins its locals");
    const I: u64 = 2;
    let register = lowering
        .pinned
        .iter()
        .position(|&l| l == I)
        .expect("the counter is pinned");
    assert!(
        lowering.pinned_held[register] == Held::Scaled,
        "an int counter is held scaled"
    );
    // (`ys[i] + i` reads its item as an int.)
    for item in [op::GETITEM_INT_LOCALS_KNOWN, op::SETITEM_LOCALS_KNOWN] {
        let on_register = lowering.instances.iter().any(|inst| {
            inst.uop.is_some_and(|u| trace.uops[u].op == item)
                && cached.pinned_register_of(inst.stencil) == Some(register)
        });
        assert!(
            on_register,
            "{}: not on the counter's register",
            ops::info(item).name
        );
    }
}

/// Pinned adds that overflow: an increment of a pinned counter (`i += c`), then a sum into a
/// pinned local held scaled (`s += n`, s also read, so not held wide), each leaving the
/// tagged range inside its loop's body. Both add in place (vm/templates/ops.def,
/// `UNDO_LOCAL0_SCALED`): the exit must put the local back from the wrapped sum, so that the
/// interpreter redoes the add from the value before it, up and down, every mode agreeing
/// with Python's result computed here.
#[test]
fn pinned_adds_that_leave_the_tagged_range_put_their_local_back() {
    for (start, step) in [((1i64 << 47) - 300, 1i64), (-(1i64 << 47) + 300, -1)] {
        let text = format!(
            "func main()
  locals n i s t
  const {start}; store i
  const {start}; store s
  const 0; store n
counter:
  load n; const 600; lt; jump_if_false summed
  load i; const {step}; add; store i
  load n; const 1; add; store n
  jump counter
summed:
  const 0; store n
sum:
  load n; const 600; lt; jump_if_false done
  load s; load n; const {step}; mul; add; store s
  load s; store t
  load n; const 1; add; store n
  jump sum
done:
  load i; print
  load s; print
  load t; print
  const none; return
end
"
        );
        let (out, stats, _) = with_and_without_pins(&text);
        let i = i128::from(start) + 600 * i128::from(step);
        let s = i128::from(start) + (0..600).map(|n| n * i128::from(step)).sum::<i128>();
        assert_eq!(out, format!("{i}\n{s}\n{s}\n"), "from {start} by {step}");
        assert!(stats.pinned_loops >= 2, "{stats:?}");
        assert!(stats.side_exits >= 2, "{stats:?}");
    }
}
