//! Float cache slots (cpjit.h's `CPJIT_FLOAT_CACHE`) over the test family `test_float`
//! (`templates/families/float.c`): states numbered (count, classes), up to two slots each
//! an int (`c<k>`) or a float (`f<k>`), and four pinned float registers (before the slots'
//! float registers, so that the slots' add below is `f0`'s and `f1`'s: xmm4, xmm5 on x86-64).
//!
//! - on every generated set: the selection tables pick, per op and entry state, the member
//!   whose exit is the canonical one computed here (pops take the top slots, pushes add
//!   slots of the op's class, a full set spills its bottom slot), and a float add of two
//!   float slots is one FP instruction, no value leaving the FP registers;
//! - on every set this process can run: random traces of int and float ops, with float
//!   loops through labels (glue converting classes where a label's state differs) and a
//!   helper call, pushed by op, compute what a Rust reference computes, bit for bit.

use crate::common;

use cpjit_conformance::rng::Rng;
use cpjit_model::{Arch, Family, FloatState, StencilSet};
use cpjit_runtime::{InstanceId, Jit, Selector, Target, TraceBuilder};

/// The family's ops: stack effect and whether they push floats, as the manifest states.
const EFFECTS: [(&str, u8, u8, bool); 13] = [
    ("push", 0, 1, false),
    ("fpush", 0, 1, true),
    ("add", 2, 1, false),
    ("fadd", 2, 1, true),
    ("fmul", 2, 1, true),
    ("i2f", 1, 1, true),
    ("fhelper", 1, 1, true),
    ("facc", 1, 0, false),
    ("fget", 0, 1, true),
    ("fswap", 0, 0, false),
    ("fzero", 0, 0, false),
    ("fjump_lt", 2, 0, false),
    ("side_exit", 0, 0, false),
];

fn family(set: &'static StencilSet<'static>) -> Result<&'static Family<'static>, String> {
    cpjit_stencils::families(set)
        .iter()
        .find(|f| f.name == "test_float")
        .ok_or_else(|| format!("{}: no family test_float", set.target))
}

/// The canonical exit of an op of effect (`pop`, `push`, pushing floats if `float`) from
/// state `entry`, with two slots: worked out on (count, classes) here, independently of
/// the toolchain.
fn canonical(entry: u8, pop: u8, push: u8, float: bool) -> u8 {
    let s = FloatState::from_number(entry);
    let mut slots: Vec<bool> = (0..s.count).map(|k| s.is_float(k)).collect();
    slots.truncate(slots.len().saturating_sub(pop as usize));
    for _ in 0..push {
        if slots.len() == 2 {
            slots.remove(0);
        }
        slots.push(float);
    }
    let floats = slots
        .iter()
        .enumerate()
        .map(|(k, &f)| u8::from(f) << k)
        .sum();
    FloatState {
        count: slots.len() as u8,
        floats,
    }
    .number()
}

/// One FP add of the two float slots into the first: `op_test_float_fadd_6_2`'s whole code.
/// The slots' registers follow the four pinned float registers.
fn fp_add(arch: Arch) -> &'static [u8] {
    match arch {
        Arch::X86_64 => &[0xf2, 0x0f, 0x58, 0xe5], // addsd %xmm5, %xmm4
        Arch::Aarch64 => &[0x84, 0x28, 0x65, 0x1e], // fadd d4, d4, d5
        Arch::Riscv64 => &[0x53, 0x77, 0xf7, 0x02], // fadd.d fa4, fa4, fa5
    }
}

/// The tables against the canonical exits, and the FP add's code, on one set.
fn tables(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let f = family(set)?;
    let sel = Selector::new(f).map_err(|e| format!("{target}: {e}"))?;
    let t = sel.table();
    if t.states != 7 || t.ops() != f.elements.len() {
        return Err(format!("{target}: table shape {t:?}"));
    }
    let mut checks = 0;
    for &(element, pop, push, float) in &EFFECTS {
        let op = sel.op(element).map_err(|e| e.to_string())?;
        for s in 0..7u8 {
            let tr = t.transition(op, s);
            // The canonical exit, else (`side_exit` keeps OUT = 0 only) the lowest one kept.
            let exit = Some(canonical(s, pop, push, float))
                .filter(|&x| t.member(op, s, x) != Family::NONE)
                .or_else(|| (0..7).find(|&x| t.member(op, s, x) != Family::NONE))
                .unwrap_or(u8::MAX);
            let want = format!("op_test_float_{element}_{s}_{exit}");
            let name = set.stencils.get(tr.member as usize).map(|st| st.name);
            if tr.glue != Family::NONE || tr.exit != exit || name != Some(want.as_str()) {
                return Err(format!(
                    "{target}: transition ({element}, {s}) = {tr:?}, want {want}"
                ));
            }
            checks += 1;
        }
    }
    let fadd = set
        .index_of("op_test_float_fadd_6_2")
        .ok_or_else(|| format!("{target}: no op_test_float_fadd_6_2"))?;
    let code = set.stencils[fadd].code;
    // x86-64 macOS keeps the frame pointer: `push %rbp; mov %rsp, %rbp` ... `pop %rbp`.
    let body = code
        .strip_prefix(&[0x55, 0x48, 0x89, 0xe5])
        .and_then(|c| c.strip_suffix(&[0x5d]))
        .unwrap_or(code);
    if body != fp_add(set.arch) {
        return Err(format!(
            "{target}: op_test_float_fadd_6_2 is {code:02x?}, not one FP add {:02x?}",
            fp_add(set.arch)
        ));
    }
    Ok(checks + 1)
}

/// A value of the reference stack: its 64 bits and whether an op pushed it as a float.
#[derive(Clone, Copy, Debug)]
struct Value {
    bits: u64,
    float: bool,
}

/// The pinned float registers the ops use: q0 and q3.
#[derive(Clone, Copy, Debug, Default)]
struct Pinned {
    q0: f64,
    q3: f64,
}

/// The reference: what `op` (operand `x`) does to `stack` and the pinned float registers.
fn reference(op: &str, x: u64, stack: &mut Vec<Value>, q: &mut Pinned) {
    let int = |bits| Value { bits, float: false };
    let float = |v: f64| Value {
        bits: v.to_bits(),
        float: true,
    };
    let mut pop = || f64::from_bits(stack.pop().expect("a value").bits);
    let value = match op {
        "push" => int(x),
        "fpush" => float(f64::from_bits(x)),
        "add" => {
            let (b, a) = (pop().to_bits(), pop().to_bits());
            int(a.wrapping_add(b))
        }
        "fadd" => {
            let (b, a) = (pop(), pop());
            float(a + b)
        }
        "fmul" => {
            let (b, a) = (pop(), pop());
            float(a * b)
        }
        "i2f" => float(pop().to_bits() as i64 as f64),
        "fhelper" => float(cpjit_conformance::exec::cpjit_test_fscale(pop())),
        "facc" => {
            q.q0 += pop();
            return;
        }
        "fget" => float(q.q0),
        "fswap" => {
            (q.q0, q.q3) = (q.q3, q.q0);
            return;
        }
        _ => unreachable!("no reference for {op}"),
    };
    stack.push(value);
}

/// Pushes one random straight-line op whose inputs keep every value finite (an int add
/// only of ints: a float's bits added could make a NaN, whose payload no two targets
/// agree on), keeping the stack between 2 and 10 values.
fn random_op(
    b: &mut TraceBuilder<'_, '_>,
    sel: &Selector<'_>,
    want: &mut Vec<Value>,
    q: &mut Pinned,
    rng: &mut Rng,
) -> Result<(), String> {
    let ops = [
        "push", "fpush", "add", "fadd", "fmul", "i2f", "fhelper", "facc", "fget", "fswap",
    ];
    loop {
        let name = ops[rng.below(ops.len() as u64) as usize];
        let &(_, pop, push, _) = EFFECTS.iter().find(|e| e.0 == name).unwrap();
        let depth = want.len() + push as usize - pop as usize;
        let ints = want.iter().rev().take(2).all(|v| !v.float);
        if want.len() < pop as usize + 2 || depth > 10 || (name == "add" && !ints) {
            continue;
        }
        let x = match name {
            "push" => 1 + rng.below(1000),
            _ => (0.5 + rng.below(28) as f64 / 8.0).to_bits(),
        };
        let operands: &[u64] = if name.ends_with("push") { &[x] } else { &[] };
        let op = sel.op(name).map_err(|e| e.to_string())?;
        b.push_op(sel, op, operands, &[])
            .map_err(|e| format!("{name}: {e}"))?;
        reference(name, x, want, q);
        return Ok(());
    }
}

/// A float loop on pinned `q0`: `bind H; fpush 1.0; facc; fget; fpush n; fjump_lt -> H`
/// (while q0 < n), then `fget`: q0 counts up to n, and the label's state is whatever the
/// fall-through left, which `fjump_lt`'s member must exit in; 1 if that is not the
/// canonical exit.
fn float_loop(
    b: &mut TraceBuilder<'_, '_>,
    sel: &Selector<'_>,
    want: &mut Vec<Value>,
    q: &mut Pinned,
    n: u64,
) -> Result<usize, String> {
    let op = |name: &str| sel.op(name).map_err(|e| e.to_string());
    let h = b.label().map_err(|e| e.to_string())?;
    b.bind(sel, h).map_err(|e| e.to_string())?;
    b.push_op(sel, op("fpush")?, &[1.0f64.to_bits()], &[])
        .map_err(|e| e.to_string())?;
    b.push_op(sel, op("facc")?, &[], &[])
        .map_err(|e| e.to_string())?;
    b.push_op(sel, op("fget")?, &[], &[])
        .map_err(|e| e.to_string())?;
    b.push_op(sel, op("fpush")?, &[(n as f64).to_bits()], &[])
        .map_err(|e| e.to_string())?;
    let (before, state) = (b.len(), b.cache_state());
    let jump = op("fjump_lt")?;
    b.push_op(sel, jump, &[], &[Target::Label(h)])
        .map_err(|e| e.to_string())?;
    let (member, _, _) = b
        .instance(InstanceId::from_index(before))
        .ok_or("no jump")?;
    // The label's state is the fall-through's: the jump exits in it, filling, spilling or
    // moving values between register files where the canonical exit differs.
    let converted = member != sel.table().transition(jump, state).member as usize;
    // do { q0 += 1 } while (q0 < n); q0 is never NaN here, so `>=` ends it as `!(<)` does.
    loop {
        q.q0 += 1.0;
        if q.q0 >= n as f64 {
            break;
        }
    }
    reference("fget", 0, want, q);
    b.push_op(sel, op("fget")?, &[], &[])
        .map_err(|e| e.to_string())?;
    Ok(usize::from(converted))
}

/// Random traces pushed by op, each with a float loop, on one set.
fn traces(jit: &Jit<'_>, set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let sel = Selector::new(family(set)?).map_err(|e| e.to_string())?;
    let op = |n: &str| sel.op(n).map_err(|e| e.to_string());
    let mut rng = Rng::new(0xf10a7);
    let mut converted = 0;
    for round in 0..200 {
        let mut b = jit.trace();
        b.push_shim().map_err(|e| e.to_string())?;
        b.push_op(&sel, op("fzero")?, &[], &[])
            .map_err(|e| e.to_string())?;
        let (mut want, mut q) = (Vec::new(), Pinned::default());
        for v in [3, 4] {
            b.push_op(&sel, op("push")?, &[v], &[])
                .map_err(|e| e.to_string())?;
            want.push(Value {
                bits: v,
                float: false,
            });
        }
        for step in 0..8 {
            if step == 3 {
                converted += float_loop(&mut b, &sel, &mut want, &mut q, 1 + rng.below(4))?;
            } else {
                random_op(&mut b, &sel, &mut want, &mut q, &mut rng)?;
            }
        }
        b.push_op(&sel, op("side_exit")?, &[], &[])
            .map_err(|e| e.to_string())?;
        let trace = b
            .finish()
            .map_err(|e| format!("{target}: round {round}: {e}"))?;
        let got = common::run_spilled(&trace, &mut [0u64; 32])?;
        let bits: Vec<u64> = want.iter().map(|v| v.bits).collect();
        if got != bits {
            return Err(format!(
                "{target}: round {round}: stack {got:x?}, want {want:x?}"
            ));
        }
    }
    if converted == 0 {
        return Err(format!(
            "{target}: no loop's jump left another state than its canonical one"
        ));
    }
    Ok(200)
}

#[test]
fn float_selection_tables_keep_each_values_class_on_every_set() {
    common::check_every_set(tables);
}

#[test]
fn float_cached_traces_compute_what_the_reference_computes() {
    common::check_every_executable_set("float cache", |set| {
        let jit = Jit::new(set, cpjit_conformance::exec::resolve)
            .map_err(|e| format!("{}: {e}", set.target))?;
        traces(&jit, set)
    });
}
