//! The three-argument set (`templates/threearg/`: ops and an entry shim taking a frame, a
//! value stack pointer and a thread state): on every set of it this process can execute
//! (narrowed by `CPJIT_STENCILS`), traces entered through a typed entry compute results
//! that depend on all three arguments, forwards and around a loop, and leave the thread
//! state as the Rust reference says. A function type of another arity is refused with
//! `Error::EntrySignature`, on this set and on the default one. On x86-64 ELF the set is
//! built with the medium code model: its operand is a `movabs` imm64 hole and no trace
//! needs a GOT slot.

use crate::common;

use cpjit_conformance::select;
use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat, StencilSet};
use cpjit_runtime::{Error, InstanceId, Jit, Target};

/// `struct t3_frame` of `templates/threearg/include/t3.h`.
#[repr(C)]
struct Frame {
    scale: u64,
    base: u64,
}

/// `struct t3_state`.
#[repr(C)]
#[derive(Debug, PartialEq, Eq)]
struct State {
    bias: u64,
    counter: u64,
    steps: u64,
}

/// The shim's C signature: `int64_t t3_entry(struct t3_frame *, uint64_t *, struct t3_state *)`.
type Shim = unsafe extern "C" fn(*mut Frame, *mut u64, *mut State) -> i64;

/// One run's inputs.
#[derive(Clone, Copy, Debug)]
struct Case {
    value: u64,
    scale: u64,
    base: u64,
    bias: u64,
    /// Times the loop body (`op_t3_mix`) runs: the thread state's counter on entry (≥ 1).
    rounds: u64,
}

/// What the trace `[shim, push(value), L: mix, loop(→ L), exit]` returns, and the thread
/// state it leaves, by the ops' comments in `templates/threearg/ops.c`.
fn reference(c: Case) -> (u64, u64, State) {
    let mut top = c.value;
    for _ in 0..c.rounds {
        top = top.wrapping_mul(c.scale).wrapping_add(c.bias);
    }
    let steps = 1 + c.rounds;
    let status = top.wrapping_add(c.base).wrapping_add(steps);
    let state = State {
        bias: c.bias,
        counter: 0,
        steps,
    };
    (status, top, state)
}

/// Builds and runs the case's trace: (exit status, stack top, thread state).
fn run(jit: &Jit<'_>, c: Case) -> Result<(u64, u64, State), String> {
    let text = |e: Error| e.to_string();
    let mut b = jit.trace();
    let entry = b.push_shim_as::<Shim>().map_err(text)?;
    b.push_named("op_t3_push", &[c.value], &[]).map_err(text)?;
    let body = b.push_named("op_t3_mix", &[], &[]).map_err(text)?;
    b.push_named("op_t3_loop", &[], &[Target::Instance(body)])
        .map_err(text)?;
    b.push_named("op_t3_exit", &[], &[]).map_err(text)?;
    let trace = b.finish().map_err(text)?;
    if medium_code_model(jit.stencil_set()) && trace.got_slots() != 0 {
        return Err(format!(
            "{} GOT slot(s) in a medium-code-model trace, which addresses everything with movabs",
            trace.got_slots()
        ));
    }
    let mut frame = Frame {
        scale: c.scale,
        base: c.base,
    };
    let mut stack = [0u64; 8];
    let mut state = State {
        bias: c.bias,
        counter: c.rounds,
        steps: 0,
    };
    let shim = trace.entry_typed(entry).map_err(text)?;
    // SAFETY: the trace's ops use the frame, one value of `stack` and the thread state,
    // each the `#[repr(C)]` mirror of t3.h's struct; the entry is the shim, of 3 arguments.
    let status = unsafe { shim(&mut frame, stack.as_mut_ptr(), &mut state) } as u64;
    Ok((status, stack[0], state))
}

/// The set was built with the medium code model (its manifest's x86-64 ELF target table).
fn medium_code_model(set: &StencilSet<'_>) -> bool {
    set.arch == Arch::X86_64 && set.format == ObjectFormat::Elf
}

/// The operand hole of `op_t3_push` has the kind the set's code model gives it: `movabs`
/// imm64 under the medium model, and never that kind elsewhere.
fn check_hole_kinds(set: &StencilSet<'_>) -> Result<(), String> {
    let push = set.get("op_t3_push").ok_or("no op_t3_push")?;
    let kinds: Vec<HoleKind> = push
        .holes
        .iter()
        .filter(|h| matches!(h.value, HoleValue::Operand(_)))
        .map(|h| h.kind)
        .collect();
    let imm64 = kinds.contains(&HoleKind::X86Imm64);
    if medium_code_model(set) != imm64 || kinds.is_empty() {
        return Err(format!(
            "op_t3_push's operand holes are {kinds:?} (medium code model: {})",
            medium_code_model(set)
        ));
    }
    if medium_code_model(set) {
        for s in set.stencils {
            if let Some(h) = s.holes.iter().find(|h| h.kind.uses_got()) {
                return Err(format!(
                    "{}: a {} hole under the medium code model",
                    s.name, h.kind
                ));
            }
        }
    }
    Ok(())
}

/// A function type of another arity is refused, wherever a typed entry is asked for.
fn check_refusals(jit: &Jit<'_>) -> Result<(), String> {
    type Two = unsafe extern "C" fn(*mut Frame, *mut u64) -> i64;
    type Four = unsafe extern "C" fn(*mut Frame, *mut u64, *mut State, u64) -> i64;
    let refused = |what: &str, r: Result<InstanceId, Error>, declared: usize| match r {
        Err(Error::EntrySignature {
            stencil,
            expected: 3,
            declared: d,
            ..
        }) if stencil == "t3_entry" && d == declared => Ok(()),
        other => Err(format!(
            "{what}: {other:?}, want EntrySignature(3, {declared})"
        )),
    };
    refused("push_shim", jit.trace().push_shim(), 2)?;
    refused(
        "push_shim_as::<Four>",
        jit.trace().push_shim_as::<Four>().map(|e| e.id()),
        4,
    )?;
    let mut b = jit.trace();
    let entry = b.push_shim_as::<Shim>().map_err(|e| e.to_string())?;
    b.push_named("op_t3_push", &[1], &[])
        .map_err(|e| e.to_string())?;
    b.push_named("op_t3_exit", &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| e.to_string())?;
    refused(
        "entry_as::<Two>",
        trace.entry_as::<Two>(entry.id()).map(|_| entry.id()),
        2,
    )?;
    match trace.entry_as::<Shim>(InstanceId::from_index(1)) {
        Err(Error::NotAnEntry { instance: 1 }) => Ok(()),
        other => Err(format!(
            "entry_as of instance 1: {:?}, want NotAnEntry",
            other.map(|_| ())
        )),
    }
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let jit = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    check_hole_kinds(set).map_err(|e| format!("{target}: {e}"))?;
    check_refusals(&jit).map_err(|e| format!("{target}: {e}"))?;
    let mut checks = 0;
    for c in [
        Case {
            value: 7,
            scale: 3,
            base: 100,
            bias: 5,
            rounds: 1,
        },
        Case {
            value: 0x1234_5678_9abc_def0,
            scale: 0x1_0000_0001,
            base: 0xdead_beef_0000_0000,
            bias: 0x8000_0000_0000_0001,
            rounds: 5,
        },
        Case {
            value: u64::MAX,
            scale: u64::MAX,
            base: 1,
            bias: 2,
            rounds: 17,
        },
        Case {
            value: 0,
            scale: 0,
            base: 0,
            bias: 0,
            rounds: 3,
        },
    ] {
        let got = run(&jit, c).map_err(|e| format!("{target}: {c:?}: {e}"))?;
        let want = reference(c);
        if got != want {
            return Err(format!("{target}: {c:?}: got {got:x?}, want {want:x?}"));
        }
        checks += 1;
    }
    Ok(checks)
}

#[test]
fn three_argument_shims_and_ops_run_on_every_compatible_set() {
    let sets = select::selected(cpjit_stencils_threearg::all());
    assert!(
        !sets.is_empty(),
        "no three-argument set this process can execute"
    );
    let mut failures = Vec::new();
    for set in &sets {
        match check(set) {
            Ok(n) => eprintln!("{}: {n} three-argument traces checked", set.target),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_two_argument_set_refuses_a_three_argument_entry() {
    for set in select::selected(&common::all_sets()) {
        let jit = Jit::new(set, |_| None).unwrap();
        let pushed = jit.trace().push_shim_as::<Shim>().map(|e| e.id());
        match pushed {
            Err(Error::EntrySignature {
                expected: 2,
                declared: 3,
                ..
            }) => {}
            other => panic!(
                "{}: push_shim_as::<3 arguments> on a 2-parameter shim: {other:?}",
                set.target
            ),
        }
    }
}
