//! Register-cached stack values (`templates/families/cached.c`, `[[family]] test_cached`;
//! the convention is cpjit.h's `CPJIT_CACHED_OP`): on every stencil set this process can
//! execute (narrowed by `CPJIT_STENCILS`), every member, found through the generated family
//! table by element and cache state, computes on the logical stack (memory below `sp`, then
//! the cached registers) what a Rust reference computes:
//!
//! - each op in every entry/exit state: the values pass through 0 to 3 cached registers,
//!   with fills (entry states above 0 are reached by a fill from memory) and spills (the
//!   trace ends in a side exit that spills every cached value and returns the stack
//!   pointer, so the test reads the whole stack back from memory);
//! - conditional jumps that leave the cache state on both paths;
//! - chains of spills and fills through every state, mixed with uncached ops at state 0;
//! - a side-exit-like spill before a helper call that reads the stack from memory.

use crate::common;

use cpjit_model::{Family, StencilSet};
use cpjit_runtime::{InstanceId, Jit, Target, TraceBuilder};

/// The cache registers of the convention (`CPJIT_CACHE_REGS`).
const REGS: usize = 3;
/// The values on the stack before the op under test: enough that every op also pops from
/// memory when fewer values are cached.
const INITIAL: [u64; 5] = [
    0x0123_4567_89ab_cdef,
    3,
    u64::MAX,
    0x8000_0000_0000_0001,
    41,
];

extern "C" fn mul_add(a: i64, b: i64, c: i64) -> i64 {
    a.wrapping_mul(b).wrapping_add(c)
}

/// `cpjit_test_stack_digest`: reads the top three values from memory.
unsafe extern "C" fn stack_digest(sp: *const u64) -> u64 {
    // SAFETY: the digest op spills the whole stack first and has at least three values.
    let (a, b, c) = unsafe { (*sp.sub(1), *sp.sub(2), *sp.sub(3)) };
    a.wrapping_add(b.wrapping_mul(3))
        .wrapping_add(c.wrapping_mul(9))
}

fn resolve(name: &str) -> Option<u64> {
    match name {
        "cpjit_test_mul_add" => Some(mul_add as *const () as u64),
        "cpjit_test_stack_digest" => Some(stack_digest as *const () as u64),
        _ => None,
    }
}

/// What op `op` (operands 11 and 22) does to `stack`; for `dec_jump_nz`, whether it jumps.
fn reference(op: &str, stack: &mut Vec<u64>) -> bool {
    if let Some(jumps) = common::reference(op, 11, 22, stack) {
        return jumps;
    }
    let mut pop = || stack.pop().expect("the reference stack has values");
    match op {
        "helper" => {
            let (c, b, a) = (pop(), pop(), pop());
            stack.push(mul_add(a as i64, b as i64, c as i64) as u64);
        }
        "move" => {}
        "digest" => {
            let (a, b, c) = (pop(), pop(), pop());
            stack.push(
                a.wrapping_add(b.wrapping_mul(3))
                    .wrapping_add(c.wrapping_mul(9)),
            );
        }
        other => unreachable!("no reference for {other}"),
    }
    false
}

/// The ops checked by their effect on the stack (the exits are checked by how they end).
const OPS: [&str; 11] = [
    "push",
    "push2",
    "add",
    "helper",
    "table",
    "counter",
    "addr_addend",
    "pop",
    "dec_jump_nz",
    "move",
    "digest",
];

/// The set's `test_cached` family, with lookups by element name and cache state.
struct Cached<'a> {
    family: &'a Family<'a>,
    set: &'static StencilSet<'static>,
    /// Value index of each state 0..=REGS, for IN and for OUT.
    states: [[usize; REGS + 1]; 2],
}

impl<'a> Cached<'a> {
    fn new(set: &'static StencilSet<'static>, families: &'a [Family<'a>]) -> Result<Self, String> {
        let target = set.target;
        let family = families
            .iter()
            .find(|f| f.name == "test_cached")
            .ok_or_else(|| format!("{target}: no family test_cached"))?;
        let mut states = [[0; REGS + 1]; 2];
        for (p, param) in ["IN", "OUT"].iter().enumerate() {
            for (k, slot) in states[p].iter_mut().enumerate() {
                *slot = family
                    .value_index(param, &k.to_string())
                    .ok_or_else(|| format!("{target}: test_cached has no {param} = {k}"))?;
            }
        }
        Ok(Cached {
            family,
            set,
            states,
        })
    }

    /// The member for `op` from state `entry` to state `exit`, if the manifest kept it.
    fn member(&self, op: &str, entry: usize, exit: usize) -> Result<Option<usize>, String> {
        let e = self
            .family
            .element_index(op)
            .ok_or_else(|| format!("{}: test_cached has no element {op}", self.set.target))?;
        let found = self
            .family
            .stencil(e, &[self.states[0][entry], self.states[1][exit]]);
        if let Some(index) = found {
            let name = format!("op_test_cached_{op}_{entry}_{exit}");
            if self.set.stencils[index].name != name {
                return Err(format!(
                    "{}: the table gives {} for {name}",
                    self.set.target, self.set.stencils[index].name
                ));
            }
        }
        Ok(found)
    }

    fn must(&self, op: &str, entry: usize, exit: usize) -> Result<usize, String> {
        self.member(op, entry, exit)?.ok_or_else(|| {
            format!(
                "{}: op_test_cached_{op}_{entry}_{exit} is missing",
                self.set.target
            )
        })
    }
}

/// Runs a finished trace from its shim on `memory` (the value stack, `INITIAL` not yet
/// pushed); returns the exit status.
fn run(trace: &cpjit_runtime::Trace, shim: InstanceId, memory: &mut [u64]) -> i64 {
    let mut frame = [0u64; 4];
    // SAFETY: traces of test ops that ignore the frame and use fewer than `memory.len()`
    // values of the stack; `shim` is the entry shim.
    unsafe { (trace.entry_fn(shim).unwrap())(frame.as_mut_ptr().cast(), memory.as_mut_ptr()) }
}

/// The stack a side exit left: the values between `memory`'s start and the returned `sp`.
fn spilled(memory: &[u64], sp: i64, what: &str) -> Result<Vec<u64>, String> {
    let base = memory.as_ptr() as i64;
    let depth = (sp - base) / 8;
    if (sp - base) % 8 != 0 || !(0..=memory.len() as i64).contains(&depth) {
        return Err(format!(
            "{what}: the side exit returned sp {sp:#x} outside the stack at {base:#x}"
        ));
    }
    Ok(memory[..depth as usize].to_vec())
}

/// Pushes `INITIAL` with the uncached op, then fills the top `entry` values into registers.
fn prologue(b: &mut TraceBuilder<'_, '_>, c: &Cached<'_>, entry: usize) -> Result<(), String> {
    let push = c.set.index_of("op_test_push").ok_or("no op_test_push")?;
    for v in INITIAL {
        b.push(push, &[v], &[]).map_err(|e| e.to_string())?;
    }
    if entry > 0 {
        b.push(c.must("move", 0, entry)?, &[], &[])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Every op in every kept (IN, OUT): the spilled stack equals the reference; for the
/// conditional jump, both paths (the jump path pushes a marker before its side exit).
fn every_op_in_every_state(jit: &Jit<'_>, c: &Cached<'_>) -> Result<usize, String> {
    let target = c.set.target;
    let mut checks = 0;
    for op in OPS {
        for entry in 0..=REGS {
            for exit in 0..=REGS {
                let Some(index) = c.member(op, entry, exit)? else {
                    continue;
                };
                let name = &c.set.stencils[index].name;
                // dec_jump_nz: from top 1 it falls through (0), from top 5 it jumps (4).
                let tops: &[u64] = if op == "dec_jump_nz" { &[1, 5] } else { &[41] };
                for &top in tops {
                    let mut b = jit.trace();
                    let shim = b.push_shim().map_err(|e| e.to_string())?;
                    prologue(&mut b, c, 0)?;
                    // Replace INITIAL's top by `top`, still at state 0, then fill.
                    let pop = c.set.index_of("op_test_pop").ok_or("no op_test_pop")?;
                    let push = c.set.index_of("op_test_push").ok_or("no op_test_push")?;
                    b.push(pop, &[], &[]).map_err(|e| e.to_string())?;
                    b.push(push, &[top], &[]).map_err(|e| e.to_string())?;
                    if entry > 0 {
                        b.push(c.must("move", 0, entry)?, &[], &[])
                            .map_err(|e| e.to_string())?;
                    }
                    let operands: Vec<u64> = c.set.stencils[index]
                        .operands
                        .iter()
                        .map(|o| if *o == "OPERAND0" { 11 } else { 22 })
                        .collect();
                    // Instances after the op: [side exit], [marker push, side exit].
                    let at = b.len();
                    let jump_to = InstanceId::from_index(at + 2);
                    let targets: Vec<Target> = c.set.stencils[index]
                        .targets
                        .iter()
                        .map(|_| Target::Instance(jump_to))
                        .collect();
                    b.push(index, &operands, &targets)
                        .map_err(|e| format!("{target}: {name}: {e}"))?;
                    b.push(c.must("side_exit", exit, 0)?, &[], &[])
                        .map_err(|e| e.to_string())?;
                    let marked = (exit + 1).min(REGS);
                    b.push(c.must("push", exit, marked)?, &[0x3a3a], &[])
                        .map_err(|e| e.to_string())?;
                    b.push(c.must("side_exit", marked, 0)?, &[], &[])
                        .map_err(|e| e.to_string())?;
                    let trace = b.finish().map_err(|e| format!("{target}: {name}: {e}"))?;
                    let mut memory = [0u64; 16];
                    let sp = run(&trace, shim, &mut memory);
                    let got = spilled(&memory, sp, &format!("{target}: {name}"))?;
                    let mut want = INITIAL.to_vec();
                    *want.last_mut().unwrap() = top;
                    if reference(op, &mut want) {
                        want.push(0x3a3a);
                    }
                    checks += 1;
                    if got != want {
                        return Err(format!(
                            "{target}: {name} (top {top}): stack {got:x?}, want {want:x?}"
                        ));
                    }
                }
            }
        }
    }
    Ok(checks)
}

/// The exits: `exit` returns the top from every entry state; `side_exit` from every entry
/// state leaves the whole stack in memory.
fn exits(jit: &Jit<'_>, c: &Cached<'_>) -> Result<usize, String> {
    let target = c.set.target;
    let mut checks = 0;
    for entry in 0..=REGS {
        for (op, want_top) in [("exit", true), ("side_exit", false)] {
            let mut b = jit.trace();
            let shim = b.push_shim().map_err(|e| e.to_string())?;
            prologue(&mut b, c, entry)?;
            b.push(c.must(op, entry, 0)?, &[], &[])
                .map_err(|e| e.to_string())?;
            let trace = b
                .finish()
                .map_err(|e| format!("{target}: {op} {entry}: {e}"))?;
            let mut memory = [0u64; 16];
            let status = run(&trace, shim, &mut memory);
            let ok = if want_top {
                status as u64 == INITIAL[INITIAL.len() - 1]
            } else {
                spilled(&memory, status, &format!("{target}: side_exit {entry}"))? == INITIAL
            };
            checks += 1;
            if !ok {
                return Err(format!(
                    "{target}: op_test_cached_{op}_{entry}_0 returned {status:#x}, memory {memory:x?}"
                ));
            }
        }
    }
    Ok(checks)
}

/// Chains of spills and fills through every state, with uncached ops (which see state 0)
/// in between: the stack comes back unchanged, or changed only by the uncached ops.
fn spill_fill_round_trips(jit: &Jit<'_>, c: &Cached<'_>) -> Result<usize, String> {
    let target = c.set.target;
    let add = c.set.index_of("op_test_add").ok_or("no op_test_add")?;
    let chains: [&[usize]; 4] = [
        &[3, 0],
        &[1, 2, 3, 2, 1, 0],
        &[3, 1, 3, 0, 2, 0],
        &[2, 3, 0, 1, 3, 2, 0],
    ];
    let mut checks = 0;
    for chain in chains {
        for with_add in [false, true] {
            let mut b = jit.trace();
            let shim = b.push_shim().map_err(|e| e.to_string())?;
            prologue(&mut b, c, 0)?;
            let mut state = 0;
            let mut want = INITIAL.to_vec();
            for &next in chain {
                b.push(c.must("move", state, next)?, &[], &[])
                    .map_err(|e| e.to_string())?;
                state = next;
                if state == 0 && with_add {
                    b.push(add, &[], &[]).map_err(|e| e.to_string())?;
                    reference("add", &mut want);
                }
            }
            b.push(c.must("side_exit", state, 0)?, &[], &[])
                .map_err(|e| e.to_string())?;
            let trace = b
                .finish()
                .map_err(|e| format!("{target}: {chain:?}: {e}"))?;
            let mut memory = [0u64; 16];
            let sp = run(&trace, shim, &mut memory);
            let got = spilled(&memory, sp, &format!("{target}: chain {chain:?}"))?;
            checks += 1;
            if got != want {
                return Err(format!(
                    "{target}: spill/fill chain {chain:?} (uncached adds: {with_add}): stack {got:x?}, want {want:x?}"
                ));
            }
        }
    }
    Ok(checks)
}

/// A trace that keeps values cached across several ops, then a side-exit-like spill before
/// a helper call that reads the stack from memory (`digest`), then more cached ops.
fn cached_trace_with_helper(jit: &Jit<'_>, c: &Cached<'_>) -> Result<usize, String> {
    let target = c.set.target;
    // (op, entry, exit): a path through the states that ends back at 0.
    let path = [
        ("push", 0, 1),
        ("push2", 1, 3),
        ("add", 3, 2),
        ("push", 2, 3),
        ("digest", 3, 1),
        ("push2", 1, 3),
        ("helper", 3, 1),
        ("table", 1, 2),
        ("add", 2, 1),
        ("counter", 1, 1),
        ("addr_addend", 1, 2),
        ("pop", 2, 0),
    ];
    let mut b = jit.trace();
    let shim = b.push_shim().map_err(|e| e.to_string())?;
    prologue(&mut b, c, 0)?;
    let mut want = INITIAL.to_vec();
    for (op, entry, exit) in path {
        let index = c.must(op, entry, exit)?;
        let operands: Vec<u64> = c.set.stencils[index]
            .operands
            .iter()
            .map(|o| if *o == "OPERAND0" { 11 } else { 22 })
            .collect();
        b.push(index, &operands, &[]).map_err(|e| e.to_string())?;
        reference(op, &mut want);
    }
    b.push(c.must("side_exit", 0, 0)?, &[], &[])
        .map_err(|e| e.to_string())?;
    let trace = b.finish().map_err(|e| format!("{target}: {e}"))?;
    let mut memory = [0u64; 16];
    let sp = run(&trace, shim, &mut memory);
    let got = spilled(&memory, sp, &format!("{target}: cached trace"))?;
    if got != want {
        return Err(format!(
            "{target}: cached trace with a helper: stack {got:x?}, want {want:x?}"
        ));
    }
    Ok(1)
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let families = cpjit_stencils::families(set);
    let c = Cached::new(set, families)?;
    let jit = Jit::new(set, resolve).map_err(|e| format!("{}: {e}", set.target))?;
    Ok(every_op_in_every_state(&jit, &c)?
        + exits(&jit, &c)?
        + spill_fill_round_trips(&jit, &c)?
        + cached_trace_with_helper(&jit, &c)?)
}

#[test]
fn cached_register_stencils_compute_what_the_reference_computes() {
    common::check_every_executable_set("cached-register", check);
}
