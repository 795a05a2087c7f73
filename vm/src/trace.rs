//! The trace projector: turns the bytecodes recorded for one path (with the operand types
//! seen) into a straight line of type-specialised micro-ops with guards, like CPython's
//! tier-2 optimizer. Every micro-op that can leave the trace gets an exit stub
//! (`EXIT_TRACE pc`) that resumes the interpreter at the bytecode it came from, with the
//! frame exactly as the interpreter would have it there.
//!
//! The projector tracks an abstract type for each stack slot and local, so a value is guarded
//! once and specialised ops (`ADD_INT`, `LT_FLOAT_GUARD_TRUE`, `GETITEM_LIST_INT`, ...) follow
//! without further checks; a guard on a value loaded from a local refines the local too.
//! A loop trace is peeled (`peel`): its first iteration guards what it needs, and the loop
//! jumps back to a second copy projected from the locals' types the first one proved, so
//! guards that hold around the loop run once per entry, not once per iteration. Known ints
//! divided by a constant become a shift, a mask or a multiplication (`divide`).
//!
//! The projection runs in stages, one module each: `pass` walks the recorded path and
//! hands each record to a recogniser (`idioms` for the statements a `load` starts,
//! `fusion` for typed binary ops, `multiply` for a multiplication by a constant, `inlined`
//! for inlined calls), all on the state of
//! `projector`; `peel` projects a loop's body again; `exits` appends the exit stubs;
//! `bounded` drops the overflow check of increments that guards before them prove in range;
//! `listing` is what the VM asks of a trace afterwards.

mod bounded;
mod convert;
mod divide;
mod exits;
mod fusion;
mod idioms;
mod inlined;
mod item_update;
mod list;
mod listing;
mod merge;
mod multiply;
mod pass;
mod peel;
mod projector;
mod reuse;
mod stored;

pub(crate) use bounded::increment_proved_in_range;
pub use divide::{any_magic, division_by, small_magic, DivisorOperands};

use crate::abi::{Inst, Record, TYPE_FLOAT, TYPE_INT, TYPE_LIST};
use crate::inline::Inlining;
use crate::parser::{Function, Program};
use crate::value::Value;
use projector::{guardable, specialisations};
use std::collections::BTreeMap;

/// How a recorded path ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The path came back to its start: jump to the first micro-op.
    JumpTop,
    /// Leave the trace and resume the interpreter at this bytecode.
    Exit(u32),
    /// The last recorded bytecode is a `RETURN`.
    Return,
}

/// A projected trace: micro-ops, then one exit stub per distinct resume point.
#[derive(Clone, Debug)]
pub struct Trace {
    pub uops: Vec<Inst>,
    /// Number of micro-ops before the exit stubs.
    pub body_len: usize,
    /// Resume pc of each exit, by exit index. Every `EXIT_TRACE` (the stubs from `body_len`
    /// on, and a final one in the body) has operand `pc << 32 | index` and, once attached,
    /// the address of its link slot in `arg1`.
    pub exit_pcs: Vec<u32>,
    /// The exit taken at the end of the path (`End::Exit`), if any.
    pub end_exit: Option<usize>,
    /// Globals whose current values were folded into the trace.
    pub deps: Vec<u64>,
    /// The calls of the trace, in order: `CALL_JIT` number `k` has operand `k` until the VM
    /// attaches the trace and points the operand to the call site it built from `calls[k]`.
    pub calls: Vec<TraceCall>,
    /// By exit index: the locals' types the trace has proved where it leaves through the
    /// exit (those of every use of the exit alike), which a side trace started there knows
    /// from its first micro-op.
    exit_locals: Vec<Vec<Ty>>,
    /// Calls inlined into the trace ([`crate::inline`]), nested ones included.
    pub inlined_calls: u64,
    /// Set by the VM on a side trace whose parent leaves through an exit stub that can enter
    /// a trace with the parent's pinned registers live: those locals, held so. The trace
    /// compiler may then compile the side trace to be entered so too ([`crate::pinning`],
    /// "Inherited pinning").
    pub inherited_pins: Option<crate::pinning::Pins>,
    /// A peeled loop's body (after the preamble): where it starts and what it assumes.
    loop_body: Option<LoopBody>,
    /// How many calls deep the trace checks the frame stack has room for, and how deep its
    /// inlined calls go (`GUARD_CALL_DEPTH`).
    depth_checked: u32,
    depth_needed: u32,
}

/// The body of a peeled loop trace ([`peel`]): its first micro-op and the locals' types the
/// preamble proved for it.
#[derive(Clone, Debug)]
struct LoopBody {
    at: usize,
    assumed: Vec<Ty>,
}

/// What a projector needs to inline calls: the program's functions and which of them are
/// inlined ([`crate::inline`]).
#[derive(Clone, Copy)]
pub struct Inliner<'a> {
    pub program: &'a Program,
    pub inlining: &'a Inlining,
}

/// A call in a trace: the function called, the caller's `CALL` bytecode, the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceCall {
    pub func: u32,
    pub pc: u32,
    pub argc: u32,
}

impl TraceCall {
    /// The call made by bytecode `call` (`CALL f argc`) at `pc`.
    fn of(call: Inst, pc: u32) -> TraceCall {
        TraceCall {
            func: call.arg0 as u32,
            pc,
            argc: call.arg1 as u32,
        }
    }
}

/// What the projector knows of a value's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Unknown,
    Int,
    Float,
    Bool,
    List,
}

/// The type of a constant.
fn ty_of(v: Value) -> Ty {
    match v.type_code() {
        TYPE_INT => Ty::Int,
        TYPE_FLOAT => Ty::Float,
        TYPE_LIST => Ty::List,
        crate::abi::TYPE_BOOL => Ty::Bool,
        _ => Ty::Unknown,
    }
}

/// The type a record saw (`Record::types`); bools are not specialised on.
fn recorded(t: u8) -> Ty {
    match t {
        TYPE_INT => Ty::Int,
        TYPE_FLOAT => Ty::Float,
        TYPE_LIST => Ty::List,
        _ => Ty::Unknown,
    }
}

/// A value-stack slot as the projector knows it.
#[derive(Clone, Copy)]
struct Slot {
    ty: Ty,
    /// The local this value was loaded from, while that local still holds it.
    local: Option<u64>,
}

/// The projection's state: the micro-ops so far, the exits they take and the types known
/// (its operations are in `projector`, the recognisers that drive it in `pass`, `idioms`,
/// `fusion` and `inlined`).
struct Projector<'a> {
    func: &'a Function,
    uops: Vec<Inst>,
    /// Index in `uops` of each micro-op whose target is an exit, with the exit's pc.
    exit_uses: Vec<(usize, u32)>,
    /// The locals' types known where each of `exit_uses` leaves (before its op's effect).
    exit_types: Vec<Vec<Ty>>,
    stack: Vec<Slot>,
    locals: Vec<Ty>,
    calls: Vec<TraceCall>,
    /// The last `CONST` emitted: its index in `uops` and the pc of the bytecode that pushed
    /// the constant (where an exit resumes with the constant not yet pushed).
    last_const: Option<(usize, u32)>,
    /// The current values of the globals, those the recording stores (never folded), and
    /// those folded into the trace.
    globals: &'a [u64],
    stored_globals: Vec<u64>,
    deps: Vec<u64>,
    /// Calls are inlined when set.
    inliner: Option<Inliner<'a>>,
    /// While inside an inlined call: the caller's `CALL`, where every exit resumes.
    inlined_at: Option<u32>,
    /// Inside `s = s + e` ([`accumulation`]): every exit resumes at the statement's start,
    /// so an inlined call's arguments need not be on the stack ([`Projector::inline_call`]).
    statement_exits: bool,
    /// How many inlined calls deep the projection is.
    callee_depth: u32,
    /// The pcs of the `CALL`s inlined, with the value stack's depth there: the exit stub
    /// resuming at one first cuts the stack back to it (`RESET_STACK`).
    inline_exits: BTreeMap<u32, u32>,
    /// How many calls deep the trace has checked the frame stack has room for
    /// (`GUARD_CALL_DEPTH`): the depth does not change while a trace runs.
    depth_checked: u32,
    /// The deepest nesting of the calls inlined so far.
    depth_needed: u32,
    /// The first micro-op a fusion may replace: a peeled loop's body starts a new one (the
    /// loop jumps back to it).
    fusion_floor: usize,
    inlined_calls: u64,
}

/// The recorded path being projected: the function's bytecode, the records, how it ends.
#[derive(Clone, Copy)]
struct Path<'a> {
    code: &'a [Inst],
    records: &'a [Record],
    end: End,
}

impl Path<'_> {
    /// The pc of record `i`.
    fn pc(&self, i: usize) -> u32 {
        self.records[i].pc as u32
    }

    /// Where the path goes after record `i`: the next record's pc, or where it ends.
    fn next_pc(&self, i: usize) -> Option<u32> {
        match self.records.get(i + 1) {
            Some(r) => Some(r.pc as u32),
            None => match self.end {
                End::Exit(pc) => Some(pc),
                End::JumpTop => Some(self.records[0].pc as u32),
                End::Return => None,
            },
        }
    }
}

/// Projects the recorded path `records` of `func` (bytecode `code`) into a trace.
/// `globals` are the current global values (folded into the trace unless the trace stores
/// them). `from`: the parent trace and exit a side trace starts at, whose proved local
/// types the side trace starts from.
pub fn project(
    func: &Function,
    code: &[Inst],
    records: &[Record],
    end: End,
    globals: &[u64],
    from: Option<(&Trace, usize)>,
    inliner: Option<Inliner<'_>>,
) -> Result<Trace, String> {
    if records.is_empty() {
        return Err("empty recording".into());
    }
    let path = Path { code, records, end };
    let locals = match from.and_then(|(parent, exit)| parent.exit_types(exit)) {
        Some(types) if types.len() == func.locals.len() => types,
        _ => vec![Ty::Unknown; func.locals.len()],
    };
    let stored_globals = records
        .iter()
        .filter(|r| code[r.pc as usize].op == crate::ops::op::STORE_GLOBAL)
        .map(|r| code[r.pc as usize].arg0)
        .collect();
    let mut p = Projector::new(func, locals, globals, stored_globals, inliner);
    pass::pass(&mut p, &path)?;
    let loop_body = match end {
        End::JumpTop => peel::peel(&mut p, &mut |p| pass::pass(p, &path))?,
        _ => None,
    };
    let mut trace = exits::finish(p, &path, loop_body)?;
    bounded::mark(&mut trace);
    Ok(trace)
}

/// Small recorded paths for the recognisers' unit tests.
#[cfg(test)]
mod testing {
    use super::{pass, Path, Projector, Ty};
    use crate::abi::{Inst, Record, TYPE_NONE};
    use crate::ops;
    use crate::parser::{Function, Program};

    /// `main` of a program whose text is `main`'s body (locals `locals`), the program
    /// holding it.
    pub fn function(locals: &str, body: &str) -> Program {
        let text = format!("func main()\n  locals {locals}\n{body}\n  const none; return\nend\n");
        crate::parser::parse(&text).expect("test program parses")
    }

    /// The records of main's pcs `pcs`, each with the types (top first) `types` gives for
    /// its pc, else none.
    pub fn records(pcs: std::ops::Range<usize>, types: &[(usize, [u8; 3])]) -> Vec<Record> {
        pcs.map(|pc| Record {
            pc: pc as i64,
            types: types
                .iter()
                .find(|t| t.0 == pc)
                .map_or([TYPE_NONE; 3], |t| t.1),
            pad: [0; 5],
        })
        .collect()
    }

    /// A projector for `func` with the locals named in `proved` proved of those types.
    pub fn projector<'a>(func: &'a Function, proved: &[(&str, Ty)]) -> Projector<'a> {
        let mut locals = vec![Ty::Unknown; func.locals.len()];
        for &(name, ty) in proved {
            let l = func.locals.iter().position(|n| n == name).expect("a local");
            locals[l] = ty;
        }
        Projector::new(func, locals, &[], Vec::new(), None)
    }

    /// The micro-ops emitted so far, by name.
    pub fn names(p: &Projector<'_>) -> Vec<&'static str> {
        op_names(&p.uops)
    }

    /// Micro-ops `uops` by name.
    pub fn op_names(uops: &[Inst]) -> Vec<&'static str> {
        uops.iter().map(|u| ops::info(u.op).name).collect()
    }

    /// The trace of `main` loading `x`, calling `twice(x)` (inlined) and popping the result,
    /// `x` recorded an int.
    pub fn inlined_call() -> super::Trace {
        let text = "func twice(a)\n  load a; load a; add; return\nend\n\
                    func main()\n  locals x\n  load x; call twice; pop\n  const none; return\nend\n";
        let prog = crate::parser::parse(text).unwrap();
        let f = &prog.functions[prog.main];
        let rs = records(0..3, &[(1, [crate::abi::TYPE_INT, TYPE_NONE, TYPE_NONE])]);
        let inlining = crate::inline::Inlining::of(&prog);
        let inliner = super::Inliner {
            program: &prog,
            inlining: &inlining,
        };
        super::project(
            f,
            &f.code,
            &rs,
            super::End::Exit(3),
            &[],
            None,
            Some(inliner),
        )
        .unwrap()
    }

    /// A path over `records` of `func` going on to the record after the last.
    pub fn path<'a>(func: &'a Function, records: &'a [Record]) -> Path<'a> {
        let next = records.last().map_or(0, |r| r.pc as u32 + 1);
        Path {
            code: &func.code,
            records,
            end: super::End::Exit(next),
        }
    }

    /// Projects `records` of `func` from the types `proved`: the micro-ops by name.
    pub fn project(
        func: &Function,
        records: &[Record],
        proved: &[(&str, Ty)],
    ) -> Vec<&'static str> {
        let mut p = projector(func, proved);
        pass::pass(&mut p, &path(func, records)).expect("projects");
        names(&p)
    }
}
