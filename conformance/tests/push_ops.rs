//! `TraceBuilder::push_ops` (a run of ops in one call) over the test family `test_cached`, on
//! every set this process can run:
//!
//! - random op lists, cut into random runs (labels bound and jumps pushed between them, some
//!   jumps inside a run), record exactly the instances `push_op` one by one records (members,
//!   glue, operands, targets), with the family's transitions and with a `RunTable`'s rows,
//!   and the traces compute what the Rust reference computes;
//! - bad input is refused naming the op's position and why: an op id the family does not have
//!   (as from another set), a state with no member, operands that run out or are left over.

use crate::common;

use cpjit_conformance::rng::Rng;
use cpjit_model::StencilSet;
use cpjit_runtime::{Error, InstanceId, Jit, RunTable, Selector, Target, TraceBuilder};

/// The straight ops the random lists take, with their operand counts and stack effects.
const STRAIGHT: [(&str, usize, usize, usize); 7] = [
    ("push", 1, 0, 1),
    ("push2", 2, 0, 2),
    ("add", 0, 2, 1),
    ("table", 0, 1, 1),
    ("counter", 0, 1, 1),
    ("addr_addend", 0, 1, 2),
    ("pop", 0, 1, 0),
];

fn selector(set: &'static StencilSet<'static>) -> Result<Selector<'static>, String> {
    let f = cpjit_stencils::families(set)
        .iter()
        .find(|f| f.name == "test_cached")
        .ok_or_else(|| format!("{}: no family test_cached", set.target))?;
    Selector::new(f).map_err(|e| format!("{}: {e}", set.target))
}

/// One piece of a random trace: a run for `push_ops`, or a skip over the next run
/// (`push k; dec_jump_nz -> L`, `L` bound after that run).
enum Piece {
    Run { ops: Vec<u16>, operands: Vec<u64> },
    Skip { k: u64 },
}

/// A random op list keeping the reference stack between 3 and 12 values, and its result.
fn random_trace(sel: &Selector<'_>, rng: &mut Rng) -> Result<(Vec<Piece>, Vec<u64>), String> {
    let op = |n: &str| sel.op(n).map_err(|e| e.to_string());
    let mut want: Vec<u64> = Vec::new();
    let mut pieces = vec![Piece::Run {
        ops: vec![op("push")?; 4],
        operands: (0..4).map(|_| rng.operand()).collect(),
    }];
    if let Some(Piece::Run { operands, .. }) = pieces.first() {
        want.extend(operands);
    }
    for _ in 0..6 {
        // A skip's run is as long as any and leaves the stack as deep as it found it.
        let skip = rng.below(3) == 0;
        let k = 1 + rng.below(2);
        if skip {
            pieces.push(Piece::Skip { k });
            want.push(k - 1);
        }
        let mut stack = want.clone();
        let (mut ops, mut operands) = (Vec::new(), Vec::new());
        for _ in 0..rng.below(8) {
            let (name, n, pop, push) = STRAIGHT[rng.below(STRAIGHT.len() as u64) as usize];
            if stack.len() < pop + 2 || stack.len() + push - pop > 12 {
                continue;
            }
            let (x, y) = (rng.operand(), rng.operand());
            ops.push(op(name)?);
            operands.extend(&[x, y][..n]);
            common::reference(name, x, y, &mut stack).ok_or("no reference")?;
        }
        if skip {
            while stack.len() > want.len() {
                ops.push(op("pop")?);
                stack.pop();
            }
            while stack.len() < want.len() {
                ops.push(op("push")?);
                operands.push(5);
                stack.push(5);
            }
            if k == 1 {
                want = stack;
            }
        } else {
            want = stack;
        }
        pieces.push(Piece::Run { ops, operands });
    }
    Ok((pieces, want))
}

/// Pushes `pieces` into `b`: runs by `push_ops` (`by_run`) or op by op by `push_op`.
fn push_pieces(
    b: &mut TraceBuilder<'_, '_>,
    sel: &Selector<'_>,
    pieces: &[Piece],
    by_run: bool,
) -> Result<(), Error> {
    let mut open = None;
    for piece in pieces {
        match piece {
            Piece::Skip { k } => {
                let l = b.label()?;
                let (push, dec) = (sel.op("push")?, sel.op("dec_jump_nz")?);
                b.push_op(sel, push, &[*k], &[])?;
                // Through `push_ops` too: a jump to a label is taken op by op there.
                let jump = [Target::Label(l)];
                if by_run {
                    b.push_ops(sel, &[dec], &[], &jump)?;
                } else {
                    b.push_op(sel, dec, &[], &jump)?;
                }
                open = Some(l);
            }
            Piece::Run { ops, operands } if by_run => {
                b.push_ops(sel, ops, operands, &[])?;
                if let Some(l) = open.take() {
                    b.bind(sel, l)?;
                }
            }
            Piece::Run { ops, operands } => {
                let mut at = 0;
                for &op in ops {
                    let n = if op == sel.op("push")? {
                        1
                    } else if op == sel.op("push2")? {
                        2
                    } else {
                        0
                    };
                    b.push_op(sel, op, &operands[at..at + n], &[])?;
                    at += n;
                }
                if let Some(l) = open.take() {
                    b.bind(sel, l)?;
                }
            }
        }
    }
    b.push_op(sel, sel.op("side_exit")?, &[], &[])?;
    Ok(())
}

/// Every instance of a builder as recorded.
fn records(b: &TraceBuilder<'_, '_>) -> Vec<(usize, Vec<u64>, Vec<Target>)> {
    (0..b.len())
        .filter_map(|i| b.instance(InstanceId::from_index(i)))
        .map(|(s, o, t)| (s, o.to_vec(), t.to_vec()))
        .collect()
}

fn runs(jit: &Jit<'_>, set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let sel = selector(set)?;
    let table = RunTable::new(jit, &sel);
    // Another JIT's rows: its builders read the transitions (the same records).
    let other = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    let foreign = RunTable::new(&other, &sel);
    let mut rng = Rng::new(0x9a5_0f5);
    for round in 0..200 {
        let (pieces, want) = random_trace(&sel, &mut rng)?;
        let at = |e: Error| format!("{target}: round {round}: {e}");
        let mut by_op = jit.trace();
        by_op.push_shim().map_err(at)?;
        push_pieces(&mut by_op, &sel, &pieces, false).map_err(at)?;
        let mut by_run = jit.trace();
        by_run.push_shim().map_err(at)?;
        push_pieces(&mut by_run, &sel, &pieces, true).map_err(at)?;
        let mut by_table = jit.trace();
        by_table.push_shim().map_err(at)?;
        push_pieces(&mut by_table, &table.selector(), &pieces, true).map_err(at)?;
        let mut by_foreign = jit.trace();
        by_foreign.push_shim().map_err(at)?;
        push_pieces(&mut by_foreign, &foreign.selector(), &pieces, true).map_err(at)?;
        let by_op = records(&by_op);
        if [&by_run, &by_table, &by_foreign]
            .iter()
            .any(|b| records(b) != by_op)
        {
            return Err(format!(
                "{target}: round {round}: push_ops recorded other instances than push_op"
            ));
        }
        let trace = by_run.finish().map_err(at)?;
        let mut memory = [0u64; 32];
        let got = common::run_spilled(&trace, &mut memory)?;
        if got != want {
            return Err(format!(
                "{target}: round {round}: stack {got:x?}, want {want:x?}"
            ));
        }
    }
    Ok(200)
}

/// Bad input refused, naming the op and why.
fn refusals(jit: &Jit<'_>, sel: &Selector<'_>, target: &str) -> Result<usize, String> {
    let sel = *sel;
    let op = |n: &str| sel.op(n).map_err(|e| e.to_string());
    let (push, add, mv) = (op("push")?, op("add")?, op("move")?);
    let says = |r: Result<(), Error>, what: &[&str]| match r {
        Err(e) if what.iter().all(|w| e.to_string().contains(w)) => Ok(()),
        other => Err(format!(
            "{target}: expected an error saying {what:?}, got {other:?}"
        )),
    };
    let mut checks = Vec::new();
    let mut b = jit.trace();
    b.push_shim().map_err(|e| e.to_string())?;
    // An op id the family does not have (from another set or family).
    checks.push(says(
        b.push_ops(&sel, &[push, 999, push], &[1, 2], &[]),
        &["op 1 of 3", "is not an op of the family"],
    ));
    // A state with no member: the glue op `move` has none the tables pick in state 0
    // (refused as `push_op` refuses it).
    b.set_cache_state(0);
    checks.push(says(
        b.push_ops(&sel, &[mv], &[], &[]),
        &["op 0 of 1", "has no member entered"],
    ));
    b.set_cache_state(7);
    checks.push(says(
        b.push_ops(&sel, &[push], &[1], &[]),
        &["op 0 of 1", "states are 0 to 3"],
    ));
    b.set_cache_state(0);
    // Operands that run out, and operands left over.
    checks.push(says(
        b.push_ops(&sel, &[push, push], &[1], &[]),
        &["op 1 of 2", "takes 1 operands", "only 0 operands"],
    ));
    checks.push(says(
        b.push_ops(&sel, &[push, add], &[1, 2, 3], &[]),
        &["took 1 of the 3 operands"],
    ));
    let n = checks.len();
    checks.into_iter().collect::<Result<Vec<()>, String>>()?;
    Ok(n)
}

#[test]
fn runs_pushed_by_push_ops_record_what_push_op_records() {
    common::check_every_executable_set("push_ops", |set| {
        let jit = Jit::new(set, |_| None).map_err(|e| format!("{}: {e}", set.target))?;
        let sel = selector(set)?;
        let table = RunTable::new(&jit, &sel);
        let refused =
            refusals(&jit, &sel, set.target)? + refusals(&jit, &table.selector(), set.target)?;
        Ok(runs(&jit, set)? + refused)
    });
}
