//! The kit's member selection (`Selector`, `TraceBuilder::push_op`, labels) over the test
//! family `test_cached` (`templates/families/cached.c`):
//!
//! - on every generated set (whether or not this process can run it): the generated
//!   selection tables agree with the members' names (each transition's member is
//!   `op_test_cached_<op>_<entry>_<exit>` with the canonical exit of the op's declared
//!   stack effect, or the only exit the family kept), and the op ids are the same on every
//!   set;
//! - on every set this process can run: random straight-line traces and forward skips and
//!   loops through labels, pushed by op, compute what a Rust reference computes, with glue
//!   (a `move`) inserted where a label's state differs from the fall-through's, and every
//!   refused request refused with an error saying why.

use crate::common;

use cpjit_conformance::rng::Rng;
use cpjit_model::{Family, StencilSet};
use cpjit_runtime::{Error, Jit, Selector, Target};

/// The family's ops with their stack effects as the manifest states them.
const EFFECTS: [(&str, u8, u8); 12] = [
    ("push", 0, 1),
    ("push2", 0, 2),
    ("add", 2, 1),
    ("helper", 3, 1),
    ("table", 1, 1),
    ("counter", 1, 1),
    ("addr_addend", 1, 2),
    ("pop", 1, 0),
    ("dec_jump_nz", 1, 1),
    ("exit", 1, 0),
    ("side_exit", 0, 0),
    ("digest", 3, 1),
];

fn family(set: &'static StencilSet<'static>) -> Result<&'static Family<'static>, String> {
    cpjit_stencils::families(set)
        .iter()
        .find(|f| f.name == "test_cached")
        .ok_or_else(|| format!("{}: no family test_cached", set.target))
}

/// The tables against the members' names, on one set.
fn tables(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let f = family(set)?;
    let sel = Selector::new(f).map_err(|e| format!("{target}: {e}"))?;
    let t = sel.table();
    if t.states != 4 || t.combos != 1 || t.ops() != f.elements.len() {
        return Err(format!("{target}: table shape {t:?}"));
    }
    let name = |i: u16| set.stencils[i as usize].name;
    let mut checks = 0;
    for (k, element) in f.elements.iter().enumerate() {
        let op = sel.op(element).map_err(|e| e.to_string())?;
        if op as usize != k {
            return Err(format!("{target}: op {element} is {op}, not {k}"));
        }
        let effect = EFFECTS.iter().find(|e| e.0 == *element);
        for s in 0..4u8 {
            for x in 0..4u8 {
                let m = t.member(op, s, x);
                let want = format!("op_test_cached_{element}_{s}_{x}");
                let kept = set.index_of(&want);
                if (m != Family::NONE).then_some(m as usize) != kept {
                    return Err(format!(
                        "{target}: member ({element}, {s}, {x}) = {m}, {want} is {kept:?}"
                    ));
                }
            }
            let tr = t.transition(op, s);
            checks += 1;
            let Some(&(_, pop, push)) = effect else {
                // The glue element is not selected by op.
                if tr.member != Family::NONE {
                    return Err(format!(
                        "{target}: the glue element {element} has a transition"
                    ));
                }
                continue;
            };
            let canonical = (s.saturating_sub(pop) + push).min(3);
            let exit = if t.member(op, s, canonical) != Family::NONE {
                canonical
            } else {
                (0..4)
                    .find(|&x| t.member(op, s, x) != Family::NONE)
                    .unwrap_or(9)
            };
            let want = format!("op_test_cached_{element}_{s}_{exit}");
            if tr.glue != Family::NONE || tr.via != s || tr.exit != exit || name(tr.member) != want
            {
                return Err(format!(
                    "{target}: transition ({element}, {s}) = {tr:?}, want {want}"
                ));
            }
        }
    }
    Ok(checks)
}

/// Random traces pushed by op, with forward skips and loops through labels.
fn traces(jit: &Jit<'_>, set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let sel = Selector::new(family(set)?).map_err(|e| e.to_string())?;
    let op = |n: &str| sel.op(n).map_err(|e| e.to_string());
    let straight = [
        "push",
        "push2",
        "add",
        "table",
        "counter",
        "addr_addend",
        "pop",
    ];
    let side_exit = op("side_exit")?;
    let mut rng = Rng::new(0x5e1ec7);
    let mut glued = 0;
    for round in 0..200 {
        let mut b = jit.trace();
        b.push_shim().map_err(|e| e.to_string())?;
        let mut want: Vec<u64> = Vec::new();
        let mut ops_pushed = 0;
        // One random op keeping the stack between 3 and 12 values.
        let mut random_op = |b: &mut cpjit_runtime::TraceBuilder<'_, '_>,
                             want: &mut Vec<u64>,
                             rng: &mut Rng|
         -> Result<(), String> {
            loop {
                let name = straight[rng.below(straight.len() as u64) as usize];
                let &(_, pop, push) = EFFECTS.iter().find(|e| e.0 == name).unwrap();
                let depth = want.len() + push as usize - pop as usize;
                if want.len() < pop as usize + 2 || depth > 12 {
                    continue;
                }
                let (x, y) = (rng.operand(), rng.operand());
                let operands: &[u64] = match push {
                    _ if name == "push" => &[x],
                    _ if name == "push2" => &[x, y],
                    _ => &[],
                };
                b.push_op(&sel, op(name)?, operands, &[])
                    .map_err(|e| format!("{name}: {e}"))?;
                common::reference(name, x, y, want).expect("a reference for every op pushed");
                ops_pushed += 1;
                return Ok(());
            }
        };
        for _ in 0..4 {
            let v = rng.operand();
            b.push_op(&sel, op("push")?, &[v], &[])
                .map_err(|e| e.to_string())?;
            want.push(v);
        }
        for _ in 0..3 {
            match rng.below(3) {
                // A forward skip: `push k; dec_jump_nz -> L; <block>; bind L`; k = 1 falls
                // through into the block, k = 2 jumps over it.
                0 => {
                    let k = 1 + rng.below(2);
                    let l = b.label().map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("push")?, &[k], &[])
                        .map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("dec_jump_nz")?, &[], &[Target::Label(l)])
                        .map_err(|e| e.to_string())?;
                    want.push(k - 1);
                    let mut skipped = want.clone();
                    for _ in 0..1 + rng.below(3) {
                        random_op(&mut b, &mut skipped, &mut rng)?;
                    }
                    // Both paths leave the same depth for what follows.
                    while skipped.len() > want.len() {
                        b.push_op(&sel, op("pop")?, &[], &[])
                            .map_err(|e| e.to_string())?;
                        skipped.pop();
                    }
                    while skipped.len() < want.len() {
                        b.push_op(&sel, op("push")?, &[5], &[])
                            .map_err(|e| e.to_string())?;
                        skipped.push(5);
                    }
                    let before = b.len();
                    b.bind(&sel, l).map_err(|e| e.to_string())?;
                    if b.len() > before {
                        // The glue is a move from the fall-through's state to the label's.
                        let (glue, _, _) = b
                            .instance(cpjit_runtime::InstanceId::from_index(before))
                            .ok_or("no glue instance")?;
                        let name = set.stencils[glue].name;
                        if !name.starts_with("op_test_cached_move_") {
                            return Err(format!("{target}: glue {name} at a label"));
                        }
                    }
                    glued += b.len() - before;
                    if k == 1 {
                        want = skipped;
                    }
                }
                // A loop: `push n; bind H; push2 1 0; add; pop... ; dec_jump_nz -> H; pop`.
                1 => {
                    let n = 1 + rng.below(5);
                    b.push_op(&sel, op("push")?, &[n], &[])
                        .map_err(|e| e.to_string())?;
                    let h = b.label().map_err(|e| e.to_string())?;
                    b.bind(&sel, h).map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("push2")?, &[7, 9], &[])
                        .map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("add")?, &[], &[])
                        .map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("pop")?, &[], &[])
                        .map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("dec_jump_nz")?, &[], &[Target::Label(h)])
                        .map_err(|e| e.to_string())?;
                    b.push_op(&sel, op("pop")?, &[], &[])
                        .map_err(|e| e.to_string())?;
                }
                _ => random_op(&mut b, &mut want, &mut rng)?,
            }
        }
        b.push_op(&sel, side_exit, &[], &[])
            .map_err(|e| e.to_string())?;
        let trace = b
            .finish()
            .map_err(|e| format!("{target}: round {round}: {e}"))?;
        let mut memory = [0u64; 32];
        let got = common::run_spilled(&trace, &mut memory)?;
        if got != want {
            return Err(format!(
                "{target}: round {round} ({ops_pushed} random ops): stack {got:x?}, want {want:x?}"
            ));
        }
    }
    if glued == 0 {
        return Err(format!("{target}: no round needed glue at a label"));
    }
    Ok(200)
}

/// Requests the selection cannot meet are refused, naming why.
fn refusals(jit: &Jit<'_>, set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let f = family(set)?;
    let sel = Selector::new(f).map_err(|e| e.to_string())?;
    let mut checks = Vec::new();
    let says = |r: Result<(), Error>, what: &str| match r {
        Err(e) if e.to_string().contains(what) => Ok(()),
        other => Err(format!(
            "{target}: expected an error saying `{what}`, got {other:?}"
        )),
    };
    let arith = cpjit_stencils::families(set)
        .iter()
        .find(|f| f.name == "test_arith")
        .ok_or("no test_arith")?;
    checks.push(says(
        Selector::new(arith).map(|_| ()),
        "declares no cache state",
    ));
    checks.push(says(sel.op("nope").map(|_| ()), "no element `nope`"));
    let mut b = jit.trace();
    checks.push(says(
        b.push_op(&sel, 999, &[], &[]).map(|_| ()),
        "is not an op of the family",
    ));
    b.set_cache_state(7);
    checks.push(says(
        b.push_op(&sel, 0, &[1], &[]).map(|_| ()),
        "states are 0 to 3",
    ));
    b.set_cache_state(0);
    let mv = sel.op("move").map_err(|e| e.to_string())?;
    checks.push(says(
        b.push_op(&sel, mv, &[], &[]).map(|_| ()),
        "has no member entered",
    ));
    let l = b.label().map_err(|e| e.to_string())?;
    b.bind(&sel, l).map_err(|e| e.to_string())?;
    checks.push(says(b.bind(&sel, l), "bound twice"));
    drop(b);
    // Two labels of different states, one jump to both: refused.
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    let (l1, l2) = (b.label().unwrap(), b.label().unwrap());
    b.bind(&sel, l1).map_err(|e| e.to_string())?; // state 0
    b.push_op(&sel, sel.op("push").unwrap(), &[1], &[]).unwrap(); // state 1
    b.bind(&sel, l2).map_err(|e| e.to_string())?; // state 1
    let jumps = [Target::Label(l1), Target::Label(l2)];
    let dec = sel.op("dec_jump_nz").unwrap();
    // dec_jump_nz takes one target: two are refused by count after selection agrees;
    // the different states are refused first.
    checks.push(says(
        b.push_op(&sel, dec, &[], &jumps).map(|_| ()),
        "different cache states",
    ));
    drop(b);
    // A jump to a label never bound: finishing is refused.
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    b.push_op(&sel, sel.op("push").unwrap(), &[1], &[]).unwrap();
    let never = b.label().unwrap();
    b.push_op(&sel, dec, &[], &[Target::Label(never)]).unwrap();
    b.push_op(&sel, sel.op("side_exit").unwrap(), &[], &[])
        .unwrap();
    checks.push(says(b.finish().map(|_| ()), "labels never bound"));
    // A label bound after an op that never continues (`exit` returns) takes the state its
    // jump fixed with no glue: nothing falls through into it.
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    let push = sel.op("push").unwrap();
    b.push_op(&sel, push, &[1], &[]).unwrap(); // state 1
    let back = b.label().unwrap();
    b.push_op(&sel, dec, &[], &[Target::Label(back)]).unwrap(); // fixes `back` to 1
    b.push_op(&sel, push, &[2], &[]).unwrap();
    b.push_op(&sel, push, &[3], &[]).unwrap(); // state 3
    b.push_op(&sel, sel.op("exit").unwrap(), &[], &[]).unwrap(); // state 2, returns
    let before = b.len();
    b.bind(&sel, back).map_err(|e| e.to_string())?;
    checks.push(if b.len() == before && b.cache_state() == 1 {
        Ok(())
    } else {
        Err(format!(
            "{target}: binding after `exit` pushed {} glue instance(s), state {} (want 0, 1)",
            b.len() - before,
            b.cache_state()
        ))
    });
    b.push_op(&sel, sel.op("exit").unwrap(), &[], &[]).unwrap();
    checks.push(b.finish().map(|_| ()).map_err(|e| format!("{target}: {e}")));
    let n = checks.len();
    checks.into_iter().collect::<Result<Vec<()>, String>>()?;
    Ok(n)
}

#[test]
fn selection_tables_agree_with_the_members_on_every_set() {
    common::check_every_set(tables);
}

#[test]
fn traces_pushed_by_op_compute_what_the_reference_computes() {
    common::check_every_executable_set("selection", |set| {
        let jit = Jit::new(set, |_| None).map_err(|e| format!("{}: {e}", set.target))?;
        Ok(traces(&jit, set)? + refusals(&jit, set)?)
    });
}
