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
//! divided by a positive constant become a shift, a mask or a multiplication by the
//! divisor's reciprocal (`constant_division`).

use crate::abi::{Inst, Record, TYPE_FLOAT, TYPE_INT, TYPE_LIST};
use crate::inline::{Inlinable, Inlining};
use crate::ops::{self, op};
use crate::parser::{Function, Program};
use crate::value::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Unknown,
    Int,
    Float,
    Bool,
    List,
}

fn ty_of(v: Value) -> Ty {
    match v.type_code() {
        TYPE_INT => Ty::Int,
        TYPE_FLOAT => Ty::Float,
        TYPE_LIST => Ty::List,
        crate::abi::TYPE_BOOL => Ty::Bool,
        _ => Ty::Unknown,
    }
}

fn recorded(t: u8) -> Ty {
    match t {
        TYPE_INT => Ty::Int,
        TYPE_FLOAT => Ty::Float,
        TYPE_LIST => Ty::List,
        _ => Ty::Unknown,
    }
}

#[derive(Clone, Copy)]
struct Slot {
    ty: Ty,
    /// The local this value was loaded from, while that local still holds it.
    local: Option<u64>,
}

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

impl Projector<'_> {
    fn emit(&mut self, id: u32, arg0: u64, arg1: u64) {
        self.uops.push(Inst {
            op: id,
            target: 0,
            arg0,
            arg1,
        });
    }

    /// Emits a micro-op that leaves the trace at bytecode `pc` when it cannot go on.
    fn emit_exiting(&mut self, id: u32, arg0: u64, arg1: u64, pc: u32) {
        let pc = self.inlined_at.unwrap_or(pc);
        self.exit_uses.push((self.uops.len(), pc));
        self.exit_types.push(self.locals.clone());
        self.emit(id, arg0, arg1);
    }

    fn pop(&mut self) -> Slot {
        self.stack.pop().unwrap_or(Slot {
            ty: Ty::Unknown,
            local: None,
        })
    }

    fn push(&mut self, ty: Ty) {
        self.stack.push(Slot { ty, local: None });
    }

    /// The slot `depth` below the top (0 = top), growing the known stack downwards if the
    /// trace started with values already on it.
    fn slot(&mut self, depth: usize) -> &mut Slot {
        while self.stack.len() <= depth {
            self.stack.insert(
                0,
                Slot {
                    ty: Ty::Unknown,
                    local: None,
                },
            );
        }
        let n = self.stack.len();
        &mut self.stack[n - 1 - depth]
    }

    fn refine(&mut self, depth: usize, ty: Ty) {
        let slot = self.slot(depth);
        slot.ty = ty;
        if let Some(l) = slot.local {
            self.locals[l as usize] = ty;
        }
    }

    /// Guards that the slots have the given types (depth 0 = top), unless already known.
    fn guard(&mut self, pc: u32, wanted: &[(usize, Ty)]) {
        let mut missing: Vec<(usize, Ty)> = wanted
            .iter()
            .copied()
            .filter(|&(d, ty)| self.slot(d).ty != ty)
            .collect();
        missing.sort_by_key(|&(d, _)| d);
        if missing == [(1, Ty::Int), (2, Ty::List)] {
            self.emit_exiting(op::GUARD_INT_NOS_LIST_3RD, 0, 0, pc);
        } else if missing == [(0, Ty::Int), (1, Ty::Int)] {
            self.emit_exiting(op::GUARD_INT_BOTH, 0, 0, pc);
        } else if missing == [(0, Ty::Float), (1, Ty::Float)] {
            self.emit_exiting(op::GUARD_FLOAT_BOTH, 0, 0, pc);
        } else {
            for &(d, ty) in &missing {
                let id = match (d, ty) {
                    (0, Ty::Int) => op::GUARD_INT_TOS,
                    (1, Ty::Int) => op::GUARD_INT_NOS,
                    (0, Ty::Float) => op::GUARD_FLOAT_TOS,
                    (1, Ty::Float) => op::GUARD_FLOAT_NOS,
                    (1, Ty::List) => op::GUARD_LIST_NOS,
                    (2, Ty::List) => op::GUARD_LIST_3RD,
                    _ => unreachable!("no guard for {ty:?} at depth {d}"),
                };
                self.emit_exiting(id, 0, 0, pc);
            }
        }
        for &(d, ty) in wanted {
            self.refine(d, ty);
        }
    }

    fn store_local(&mut self, l: u64, ty: Ty) {
        self.locals[l as usize] = ty;
        for s in &mut self.stack {
            if s.local == Some(l) {
                s.local = None;
            }
        }
    }

    /// `POP`, `DUP` or `SWAP`: the same micro-op, and the known slots moved alike.
    fn shuffle(&mut self, id: u32) {
        self.emit(id, 0, 0);
        match id {
            op::POP => {
                self.pop();
            }
            op::DUP => {
                let top = *self.slot(0);
                self.stack.push(top);
            }
            _ => {
                let (a, b) = (self.pop(), self.pop());
                self.stack.push(a);
                self.stack.push(b);
            }
        }
    }

    /// `LOAD_GLOBAL`: the global's current value as a constant (the trace then depends on
    /// the global), unless the recording stores it.
    fn load_global(&mut self, g: u64, pc: u32) {
        if self.stored_globals.contains(&g) {
            self.emit(op::LOAD_GLOBAL, g, 0);
            self.push(Ty::Unknown);
        } else {
            let v = self.globals[g as usize];
            self.last_const = Some((self.uops.len(), pc));
            self.emit(op::CONST, v, 0);
            self.push(ty_of(Value(v)));
            if !self.deps.contains(&g) {
                self.deps.push(g);
            }
        }
    }

    /// The generic op of a bytecode the trace does not specialise; if it would raise, the
    /// trace leaves and the interpreter raises at this bytecode.
    fn generic(&mut self, inst: Inst, pc: u32) {
        let info = ops::info(inst.op);
        let args = [inst.arg0, inst.arg1];
        if info.exits {
            self.emit_exiting(inst.op, args[0], args[1], pc);
        } else {
            self.emit(inst.op, args[0], args[1]);
        }
        for _ in 0..info.pop.count(args) {
            self.pop();
        }
        let result = match inst.op {
            op::NOT | op::LT | op::LE | op::GT | op::GE | op::EQ | op::NE => Ty::Bool,
            op::DIV | op::FLOAT | op::SQRT => Ty::Float,
            op::INT | op::LEN => Ty::Int,
            op::NEWLIST | op::BUILD_LIST => Ty::List,
            _ => Ty::Unknown,
        };
        for _ in 0..info.push.count(args) {
            self.push(result);
        }
    }

    /// Whether (and at what cost) a call of function `f` is inlined.
    fn inlinable(&self, f: u64) -> Option<Inlinable> {
        self.inliner?.inlining.callee(f as usize)
    }

    /// A `CALL` (at `pc`, of an inlinable function) replaced by the callee's body, its
    /// locals on the value stack above the arguments ([`crate::inline`]; arguments a
    /// statement's exits do not need are forwarded instead, [`Projector::forwardable_arguments`]).
    /// Every exit of the body resumes at the outermost inlined `CALL` (`inlined_at`, or the
    /// start of the statement it is in when that is where exits resume), where the stub cuts
    /// the stack back to the arguments and the interpreter makes the call. `arg_types`: the
    /// types recorded at the call (the outermost one only), guarded on the arguments so that
    /// the body is specialised.
    fn inline_call(
        &mut self,
        call: Inst,
        pc: u32,
        arg_types: Option<[u8; 3]>,
    ) -> Result<(), String> {
        let (Some(inliner), Some(info)) = (self.inliner, self.inlinable(call.arg0)) else {
            return Err(format!("call at pc {pc} is not inlinable"));
        };
        let callee = &inliner.program.functions[call.arg0 as usize];
        let argc = call.arg1 as usize;
        let outermost = self.callee_depth == 0;
        // Where every exit of a statement resumes at its start, arguments that are loads of
        // locals proved a type are taken off the stack again: the callee's parameters read
        // those locals instead (the callee never stores into them), one register shallower.
        let forwarded = if argc == callee.params {
            self.forwardable_arguments(argc)
        } else {
            Vec::new()
        };
        for _ in 0..forwarded.len() {
            self.uops.pop();
            self.stack.pop();
        }
        if outermost {
            self.depth_needed = self.depth_needed.max(info.nesting);
            if self.inlined_at.is_none() {
                self.inline_exits
                    .insert(pc, self.func.depths.get(pc as usize).copied().unwrap_or(0));
            }
            if self.depth_checked < info.nesting {
                let site = self.calls.len() as u64;
                self.calls.push(TraceCall {
                    func: call.arg0 as u32,
                    pc,
                    argc: argc as u32,
                });
                self.emit_exiting(op::GUARD_CALL_DEPTH, site, u64::from(info.nesting), pc);
                self.depth_checked = info.nesting;
            }
            if let Some(types) = arg_types.filter(|_| forwarded.is_empty()) {
                let wanted: Vec<(usize, Ty)> = (0..argc.min(types.len()))
                    .map(|d| (d, recorded(types[d])))
                    .filter(|&(d, ty)| guardable(d, ty))
                    .collect();
                self.guard(pc, &wanted);
            }
        }
        let saved_at = self.inlined_at;
        if self.inlined_at.is_none() {
            self.inlined_at = Some(pc);
        }
        self.callee_depth += 1;
        self.inlined_calls += 1;
        let at = self.inlined_at.unwrap_or(pc);
        let on_stack = argc - forwarded.len();
        if on_stack > 0 {
            self.slot(on_stack - 1);
        }
        for _ in callee.params..callee.locals.len() {
            self.emit(op::CONST, Value::NONE.0, 0);
            self.push(Ty::Unknown);
        }
        // Locals below `forwarded.len()` are the forwarded parameters; the others are on the
        // stack from `base` on.
        let skip = forwarded.len();
        let base = self.stack.len() - (callee.locals.len() - skip);
        // The inlining analysis keeps callees' frames small (`MAX_FRAME_WORDS`): a local is
        // never deeper than that below the top.
        let depth_of = |p: &Projector<'_>, l: u64| -> Result<usize, String> {
            let d = p.stack.len() - 1 - (base + l as usize - skip);
            if d > crate::inline::MAX_FRAME_WORDS {
                return Err(format!(
                    "inlined local {l} of {} is {d} values deep",
                    callee.name
                ));
            }
            Ok(d)
        };
        let Some((last, body)) = callee.code.split_last() else {
            return Err(format!("inlined function {} has no code", callee.name));
        };
        for &inst in body {
            match inst.op {
                op::NOP => {}
                op::CONST => {
                    self.last_const = Some((self.uops.len(), at));
                    self.emit(op::CONST, inst.arg0, 0);
                    self.push(ty_of(Value(inst.arg0)));
                }
                op::LOAD if (inst.arg0 as usize) < skip => {
                    let (local, ty) = forwarded[inst.arg0 as usize];
                    let id = if ty == Ty::Int {
                        op::LOAD_INT
                    } else {
                        op::LOAD
                    };
                    self.emit(id, local, 0);
                    self.stack.push(Slot {
                        ty,
                        local: Some(local),
                    });
                }
                op::LOAD => {
                    let local = self.stack[base + inst.arg0 as usize - skip];
                    match depth_of(self, inst.arg0)? {
                        0 => self.emit(op::DUP, 0, 0),
                        // A local proved an int: COPY_INT (see LOAD_INT).
                        d if local.ty == Ty::Int => self.emit(op::COPY_INT, d as u64, 0),
                        d => self.emit(op::COPY, d as u64, 0),
                    }
                    self.stack.push(local);
                }
                op::STORE if (inst.arg0 as usize) < skip => {
                    return Err(format!(
                        "inlined function {} stores into parameter {}",
                        callee.name, inst.arg0
                    ));
                }
                op::STORE => {
                    let d = depth_of(self, inst.arg0)?;
                    self.emit(op::PUT, d as u64, 0);
                    let v = self.pop();
                    self.stack[base + inst.arg0 as usize - skip] = Slot {
                        ty: v.ty,
                        local: None,
                    };
                }
                op::LOAD_GLOBAL => self.load_global(inst.arg0, at),
                op::POP | op::DUP | op::SWAP => self.shuffle(inst.op),
                op::CALL => self.inline_call(inst, at, None)?,
                op::GETITEM if self.slot(1).ty == Ty::List && self.slot(0).ty == Ty::Int => {
                    self.emit_exiting(op::GETITEM_LIST_INT, 0, 0, at);
                    self.pop();
                    self.pop();
                    self.push(Ty::Unknown);
                }
                bytecode => {
                    let typed =
                        specialisations(bytecode).and_then(|(int_op, float_op, cmp)| {
                            match (self.slot(1).ty, self.slot(0).ty) {
                                (Ty::Int, Ty::Int) => int_op.map(|o| (o, Ty::Int, cmp)),
                                (Ty::Float, Ty::Float) => float_op.map(|o| (o, Ty::Float, cmp)),
                                _ => None,
                            }
                        });
                    let Some((uop, ty, cmp)) = typed else {
                        self.generic(inst, at);
                        continue;
                    };
                    if let Some(c) = constant_division(self, uop) {
                        // The dividend is a known int: no guard (`guard_at` is none).
                        self.uops.pop();
                        self.last_const = None;
                        self.pop();
                        self.pop();
                        self.emit(c.op, c.arg0, c.arg1);
                        self.push(Ty::Int);
                        continue;
                    }
                    self.pop();
                    self.pop();
                    self.emit_exiting(uop, 0, 0, at);
                    self.push(if cmp { Ty::Bool } else { ty });
                }
            }
        }
        if last.op != op::RETURN {
            return Err(format!(
                "inlined function {} does not end in RETURN",
                callee.name
            ));
        }
        // The result takes the place of the callee's locals (its arguments among them) and
        // of any value its code left under the result.
        let below = self.stack.len() - 1 - base;
        let result = self.pop();
        for _ in 0..below {
            self.emit(op::NIP, 0, 0);
            self.pop();
        }
        self.stack.push(result);
        self.callee_depth -= 1;
        self.inlined_at = saved_at;
        Ok(())
    }

    /// The arguments of a call with `argc` of them that can be forwarded: inside a statement
    /// whose exits all resume at its start, when the last `argc` micro-ops are the loads that
    /// pushed them (`LOAD`/`LOAD_INT` of the local each slot copies) and the trace has proved
    /// each local's type. By parameter: the local and its type; empty when not all can be.
    fn forwardable_arguments(&self, argc: usize) -> Vec<(u64, Ty)> {
        if !self.statement_exits || argc == 0 || argc > self.uops.len() {
            return Vec::new();
        }
        let (Some(uops), Some(slots)) = (
            self.uops.get(self.uops.len() - argc..),
            self.stack.get(self.stack.len().wrapping_sub(argc)..),
        ) else {
            return Vec::new();
        };
        let args: Vec<(u64, Ty)> = uops
            .iter()
            .zip(slots)
            .filter(|(u, s)| {
                matches!(u.op, op::LOAD | op::LOAD_INT)
                    && s.local == Some(u.arg0)
                    && s.ty != Ty::Unknown
                    && self.locals.get(u.arg0 as usize) == Some(&s.ty)
            })
            .map(|(u, s)| (u.arg0, s.ty))
            .collect();
        if args.len() == argc {
            args
        } else {
            Vec::new()
        }
    }
}

/// Whether the projector has a guard for a value of type `ty` `depth` values below the top.
fn guardable(depth: usize, ty: Ty) -> bool {
    matches!(
        (depth, ty),
        (0 | 1, Ty::Int) | (0 | 1, Ty::Float) | (1 | 2, Ty::List)
    )
}

/// The int and float micro-ops specialising a binary bytecode, and whether it compares.
fn specialisations(bytecode: u32) -> Option<(Option<u32>, Option<u32>, bool)> {
    Some(match bytecode {
        op::ADD => (Some(op::ADD_INT), Some(op::ADD_FLOAT), false),
        op::SUB => (Some(op::SUB_INT), Some(op::SUB_FLOAT), false),
        op::MUL => (Some(op::MUL_INT), Some(op::MUL_FLOAT), false),
        op::DIV => (None, Some(op::DIV_FLOAT), false),
        op::FLOORDIV => (Some(op::FLOORDIV_INT), None, false),
        op::MOD => (Some(op::MOD_INT), None, false),
        op::LT => (Some(op::LT_INT), Some(op::LT_FLOAT), true),
        op::LE => (Some(op::LE_INT), Some(op::LE_FLOAT), true),
        op::GT => (Some(op::GT_INT), Some(op::GT_FLOAT), true),
        op::GE => (Some(op::GE_INT), Some(op::GE_FLOAT), true),
        op::EQ => (Some(op::EQ_INT), Some(op::EQ_FLOAT), true),
        op::NE => (Some(op::NE_INT), Some(op::NE_FLOAT), true),
        _ => return None,
    })
}

/// Loop peeling. A loop trace's first iteration (the preamble) is projected knowing nothing
/// of the locals; the loop then jumps back to a second copy projected from the types the
/// first one leaves in them, so that what the preamble's guards proved is not guarded again
/// on every iteration. The second copy's assumptions must hold where the loop jumps back: a
/// local assumed to have a type must have it at the copy's end too (a local that does not
/// is dropped from the assumptions and the copy projected again). Returns where the loop
/// body starts and the locals' types it assumes, or `None` (no peeling) when the copy would
/// not be shorter than the preamble.
fn peel<'a>(
    p: &mut Projector<'a>,
    pass: &mut impl FnMut(&mut Projector<'a>) -> Result<(), String>,
) -> Result<Option<LoopBody>, String> {
    let preamble = (p.uops.len(), p.exit_uses.len(), p.calls.len());
    let (end_stack, end_locals) = (p.stack.clone(), p.locals.clone());
    let (inlined_calls, depth_checked) = (p.inlined_calls, p.depth_checked);
    let restore = |p: &mut Projector<'a>| {
        p.uops.truncate(preamble.0);
        p.exit_uses.truncate(preamble.1);
        p.exit_types.truncate(preamble.1);
        p.calls.truncate(preamble.2);
        p.inlined_calls = inlined_calls;
        p.depth_checked = depth_checked;
        p.stack.clone_from(&end_stack);
        p.locals.clone_from(&end_locals);
    };
    let mut assumed = end_locals.clone();
    p.fusion_floor = preamble.0;
    while assumed.iter().any(|&t| t != Ty::Unknown) {
        p.locals.clone_from(&assumed);
        for slot in &mut p.stack {
            *slot = Slot {
                ty: Ty::Unknown,
                local: None,
            };
        }
        pass(p)?;
        let unstable: Vec<usize> = (0..assumed.len())
            .filter(|&l| assumed[l] != Ty::Unknown && p.locals[l] != assumed[l])
            .collect();
        if unstable.is_empty() {
            if p.uops.len() - preamble.0 < preamble.0 {
                return Ok(Some(LoopBody {
                    at: preamble.0,
                    assumed,
                }));
            }
            break;
        }
        restore(p);
        for l in unstable {
            assumed[l] = Ty::Unknown;
        }
    }
    restore(p);
    Ok(None)
}

/// What replaces `const d; floordiv` (`mod`) on an int: [`constant_division`].
struct ConstantDivision {
    op: u32,
    arg0: u64,
    arg1: u64,
    /// Where the dividend's int guard resumes (the constant's bytecode), when the trace does
    /// not know the dividend's type yet.
    guard_at: Option<u32>,
}

/// The micro-op (and its operands) that replaces `uop` (`FLOORDIV_INT` or `MOD_INT`) and the
/// constant pushed just before it, when that constant is a positive int and the dividend
/// below it was recorded as an int: a power of two shifts or masks (`*_POW2`, the divisor
/// as operand), any other divisor from 3 to 2**16 - 1 multiplies by its [`reciprocal`]
/// (`*_BY`). Neither leaves the trace; a dividend of unknown type is guarded before the
/// constant. A larger divisor keeps the typed division.
fn constant_division(p: &mut Projector<'_>, uop: u32) -> Option<ConstantDivision> {
    let floor = match uop {
        op::FLOORDIV_INT => true,
        op::MOD_INT => false,
        _ => return None,
    };
    let at = p.uops.len().checked_sub(1)?;
    let (_, const_pc) = p
        .last_const
        .filter(|&(i, _)| i == at && p.uops[at].op == op::CONST)?;
    let d = Value(p.uops[at].arg0)
        .as_int()
        .filter(|&d| d > 0 && (d < RECIPROCAL_LIMIT as i64 || (d as u64).is_power_of_two()))?
        as u64;
    let guard_at = (p.slot(1).ty != Ty::Int).then_some(const_pc);
    let (op, arg1) = match (d.is_power_of_two(), floor) {
        (true, true) => (op::FLOORDIV_INT_POW2, 0),
        (true, false) => (op::MOD_INT_POW2, 0),
        (false, true) => (op::FLOORDIV_INT_BY, reciprocal(d)),
        (false, false) => (op::MOD_INT_BY, reciprocal(d)),
    };
    // The shift takes its count (a shift by a count read from a hole is two instructions;
    // computing it from d at run time was five).
    let arg0 = if op == op::FLOORDIV_INT_POW2 {
        u64::from(d.trailing_zeros())
    } else {
        d
    };
    Some(ConstantDivision {
        op,
        arg0,
        arg1,
        guard_at,
    })
}

/// Divisors from 3 below this (powers of two aside) are divided by multiplying by their
/// [`reciprocal`].
const RECIPROCAL_LIMIT: u64 = 1 << 16;

/// The reciprocal of a divisor `d` (3 <= d < 2**16, not a power of two) that `vm_floordiv_by`
/// (vm/templates/vm_values.h) takes: floor(2**64 / d), which it multiplies by plus one, so
/// that the product with any 0 <= n < 2**48 has floor(n / d) as its high word.
pub fn reciprocal(d: u64) -> u64 {
    assert!(
        (3..RECIPROCAL_LIMIT).contains(&d) && !d.is_power_of_two(),
        "no reciprocal for divisor {d}"
    );
    ((1u128 << 64) / u128::from(d)) as u64
}

/// A comparison fused with the branch after it: (op if the branch goes on when true, op if
/// it goes on when false).
fn fused_compare_branch(specialised: u32) -> Option<(u32, u32)> {
    Some(match specialised {
        op::LT_INT => (op::LT_INT_GUARD_TRUE, op::LT_INT_GUARD_FALSE),
        op::LE_INT => (op::LE_INT_GUARD_TRUE, op::LE_INT_GUARD_FALSE),
        op::GT_INT => (op::GT_INT_GUARD_TRUE, op::GT_INT_GUARD_FALSE),
        op::GE_INT => (op::GE_INT_GUARD_TRUE, op::GE_INT_GUARD_FALSE),
        op::EQ_INT => (op::EQ_INT_GUARD_TRUE, op::EQ_INT_GUARD_FALSE),
        op::NE_INT => (op::NE_INT_GUARD_TRUE, op::NE_INT_GUARD_FALSE),
        op::LT_FLOAT => (op::LT_FLOAT_GUARD_TRUE, op::LT_FLOAT_GUARD_FALSE),
        op::GT_FLOAT => (op::GT_FLOAT_GUARD_TRUE, op::GT_FLOAT_GUARD_FALSE),
        op::LE_FLOAT => (op::LE_FLOAT_GUARD_TRUE, op::LE_FLOAT_GUARD_FALSE),
        op::GE_FLOAT => (op::GE_FLOAT_GUARD_TRUE, op::GE_FLOAT_GUARD_FALSE),
        _ => return None,
    })
}

/// `x % 2**k` (the last two micro-ops: `MOD_INT_POW2`, then `CONST 0`) compared by `uop`
/// (`EQ_INT` or `NE_INT`) before a branch that goes on when the comparison is `truthy`: the
/// guard on x's low bits that replaces the three (going on needs x to be a multiple of
/// 2**k: `GUARD_POW2_MULTIPLE`, else `GUARD_POW2_NOT_MULTIPLE`) and 2**k (the guard's
/// operands are 2**k and its low-bit mask scaled, (2**k - 1) * 2**16).
fn pow2_multiple_guard(p: &Projector<'_>, uop: u32, truthy: bool) -> Option<(u32, u64)> {
    let equal = match uop {
        op::EQ_INT => true,
        op::NE_INT => false,
        _ => return None,
    };
    let [.., rem, zero] = p.uops.get(p.fusion_floor..)? else {
        return None;
    };
    let fusable =
        rem.op == op::MOD_INT_POW2 && zero.op == op::CONST && Value(zero.arg0).as_int() == Some(0);
    let guard = if equal == truthy {
        op::GUARD_POW2_MULTIPLE
    } else {
        op::GUARD_POW2_NOT_MULTIPLE
    };
    fusable.then_some((guard, rem.arg0))
}

/// The fusion of `load b` and float op `uop` (add, sub, mul: they cannot fail, so no exit
/// needs b on the stack) into one micro-op reading local b, when the last micro-op is that
/// load of the value `top` (the op's right operand) or, if `other_guarded`, that load and
/// then the guard of the other operand, and b is proved a float: the fused op and b.
fn float_local_op(
    p: &Projector<'_>,
    uop: u32,
    top: Slot,
    other_guarded: bool,
) -> Option<(u32, u64)> {
    let fused = match uop {
        op::ADD_FLOAT => op::ADD_FLOAT_LOCAL,
        op::SUB_FLOAT => op::SUB_FLOAT_LOCAL,
        op::MUL_FLOAT => op::MUL_FLOAT_LOCAL,
        _ => return None,
    };
    let load = match (p.uops.get(p.fusion_floor..)?, other_guarded) {
        ([.., load], false) | ([.., load, _], true) => load,
        _ => return None,
    };
    let b = top.local?;
    let float = |l: u64| p.locals.get(l as usize) == Some(&Ty::Float);
    (load.op == op::LOAD && load.arg0 == b && float(b) && top.ty == Ty::Float).then_some((fused, b))
}

/// An int compare guard `guard` whose right operand is the constant the last micro-op
/// pushed: the guard comparing the top with that constant instead, and the constant.
fn constant_compare_guard(p: &Projector<'_>, guard: u32) -> Option<(u32, Value)> {
    let fused = match guard {
        op::LT_INT_GUARD_TRUE => op::LT_INT_CONST_GUARD_TRUE,
        op::LT_INT_GUARD_FALSE => op::LT_INT_CONST_GUARD_FALSE,
        op::LE_INT_GUARD_TRUE => op::LE_INT_CONST_GUARD_TRUE,
        op::LE_INT_GUARD_FALSE => op::LE_INT_CONST_GUARD_FALSE,
        op::GT_INT_GUARD_TRUE => op::GT_INT_CONST_GUARD_TRUE,
        op::GT_INT_GUARD_FALSE => op::GT_INT_CONST_GUARD_FALSE,
        op::GE_INT_GUARD_TRUE => op::GE_INT_CONST_GUARD_TRUE,
        op::GE_INT_GUARD_FALSE => op::GE_INT_CONST_GUARD_FALSE,
        op::EQ_INT_GUARD_TRUE => op::EQ_INT_CONST_GUARD_TRUE,
        op::EQ_INT_GUARD_FALSE => op::EQ_INT_CONST_GUARD_FALSE,
        op::NE_INT_GUARD_TRUE => op::NE_INT_CONST_GUARD_TRUE,
        op::NE_INT_GUARD_FALSE => op::NE_INT_CONST_GUARD_FALSE,
        _ => return None,
    };
    let [.., c] = p.uops.get(p.fusion_floor..)? else {
        return None;
    };
    let value = Value(c.arg0);
    (c.op == op::CONST && value.as_int().is_some()).then_some((fused, value))
}

/// The `EXIT_TRACE` operand for resume pc `pc` and exit index `exit`: `pc << 32 |
/// executor << 16 | exit`, where the executor's index is filled in when it is attached.
fn exit_operand(pc: u32, exit: usize) -> u64 {
    assert!(exit <= 0xffff, "more than 65536 exits in one trace");
    ((pc as u64) << 32) | exit as u64
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
    let mut p = Projector {
        func,
        uops: Vec::new(),
        exit_uses: Vec::new(),
        exit_types: Vec::new(),
        stack: Vec::new(),
        locals: match from.and_then(|(parent, exit)| parent.exit_locals.get(exit)) {
            Some(types) if types.len() == func.locals.len() => types.clone(),
            _ => vec![Ty::Unknown; func.locals.len()],
        },
        calls: Vec::new(),
        last_const: None,
        globals,
        stored_globals: records
            .iter()
            .filter(|r| code[r.pc as usize].op == op::STORE_GLOBAL)
            .map(|r| code[r.pc as usize].arg0)
            .collect(),
        deps: Vec::new(),
        inliner,
        inlined_at: None,
        statement_exits: false,
        callee_depth: 0,
        inline_exits: BTreeMap::new(),
        depth_checked: 0,
        depth_needed: 0,
        fusion_floor: 0,
        inlined_calls: 0,
    };
    let next_pc = |i: usize| -> Option<u32> {
        match records.get(i + 1) {
            Some(r) => Some(r.pc as u32),
            None => match end {
                End::Exit(pc) => Some(pc),
                End::JumpTop => Some(records[0].pc as u32),
                End::Return => None,
            },
        }
    };
    // One pass over the recorded path, from the projector's current types.
    let mut pass = |p: &mut Projector<'_>| -> Result<(), String> {
        let mut i = 0;
        // Inside `s = s + e` (see `accumulation`): s, the statement's pc, the add's pc.
        let mut accumulating: Option<(u64, u32, u32)> = None;
        // Inside `xs[i] = e` (see `item_store`): xs, i, the statement's pc, the setitem's pc.
        let mut storing: Option<(u64, u64, u32, u32)> = None;
        while i < records.len() {
            let rec = records[i];
            let pc = rec.pc as u32;
            let inst = code[pc as usize];
            let types = rec.types;
            if let Some((local, start, add_at)) = accumulating.filter(|a| a.2 == pc) {
                // e's value is on the stack; s was never pushed. The add leaves where the
                // statement starts, with e's value dropped again.
                // (A guard on a local's value proves the local too, so a peeled body
                // needs none.)
                p.guard(start, &[(0, Ty::Int)]);
                p.emit_exiting(op::ADD_TO_LOCAL_INT, local, 0, start);
                p.pop();
                p.store_local(local, Ty::Int);
                p.inlined_at = None;
                p.statement_exits = false;
                accumulating = None;
                debug_assert_eq!(code[add_at as usize + 1].op, op::STORE);
                i += 2;
                continue;
            }
            if let Some((list, index, start, _)) = storing.filter(|s| s.3 == pc) {
                // e's value is on the stack; xs and i were never pushed. A failed check
                // leaves where the statement starts, with e's value dropped again.
                let known =
                    p.locals[list as usize] == Ty::List && p.locals[index as usize] == Ty::Int;
                p.emit_exiting(
                    if known {
                        op::SETITEM_LOCALS_KNOWN
                    } else {
                        op::SETITEM_LOCALS
                    },
                    list,
                    index,
                    start,
                );
                p.pop();
                p.locals[list as usize] = Ty::List;
                p.locals[index as usize] = Ty::Int;
                p.inlined_at = None;
                p.statement_exits = false;
                storing = None;
                i += 1;
                continue;
            }
            match inst.op {
                op::NOP | op::JUMP => {}
                op::JUMP_BACKWARD | op::ENTER_EXECUTOR => {
                    if i + 1 != records.len() {
                        return Err(format!("back-edge at pc {pc} in the middle of a recording"));
                    }
                }
                op::CONST => {
                    p.last_const = Some((p.uops.len(), pc));
                    p.emit(op::CONST, inst.arg0, 0);
                    p.push(ty_of(Value(inst.arg0)));
                }
                op::LOAD => {
                    // `i = i + c` with an int constant: one micro-op updating the local in place.
                    let pattern = records.get(i + 1..i + 4).is_some_and(|rs| {
                        let c = code[pc as usize + 1];
                        rs.iter()
                            .enumerate()
                            .all(|(k, r)| r.pc as u32 == pc + 1 + k as u32)
                            && c.op == op::CONST
                            && Value(c.arg0).as_int().is_some()
                            && code[pc as usize + 2].op == op::ADD
                            && code[pc as usize + 3].op == op::STORE
                            && code[pc as usize + 3].arg0 == inst.arg0
                            && rs[1].types[1] == TYPE_INT
                    });
                    if pattern {
                        // The tag check is left out where the trace has proved the local an
                        // int; the constant is passed scaled (`OperandKind::ScaledInt`).
                        let known = p.locals[inst.arg0 as usize] == Ty::Int;
                        let c = Value(code[pc as usize + 1].arg0).as_int().unwrap_or(0);
                        p.emit_exiting(
                            if known {
                                op::INCREMENT_LOCAL_INT_KNOWN
                            } else {
                                op::INCREMENT_LOCAL_INT
                            },
                            inst.arg0,
                            (c << 16) as u64,
                            pc,
                        );
                        p.store_local(inst.arg0, Ty::Int);
                        i += 4;
                        continue;
                    }
                    // `s = s + e` for a pure expression e (see `accumulation`): e is
                    // projected as usual but every exit in it resumes here, then one micro-op
                    // adds its value into s in place.
                    let inlinable = |f: u64| p.inlinable(f).is_some();
                    if let Some(add_at) = accumulation(code, records, i, &p.locals, inlinable) {
                        let depth = p.func.depths.get(pc as usize).copied().unwrap_or(0);
                        p.inline_exits.insert(pc, depth);
                        p.inlined_at = Some(pc);
                        p.statement_exits = true;
                        accumulating = Some((inst.arg0, pc, add_at));
                        i += 1;
                        continue;
                    }
                    // `xs[i] = e` for a pure expression e (see `item_store`): likewise, then
                    // one micro-op stores e's value into the item.
                    if let Some(store_at) = item_store(code, records, i, inlinable) {
                        let depth = p.func.depths.get(pc as usize).copied().unwrap_or(0);
                        p.inline_exits.insert(pc, depth);
                        p.inlined_at = Some(pc);
                        p.statement_exits = true;
                        let index = code[pc as usize + 1].arg0;
                        storing = Some((inst.arg0, index, pc, store_at));
                        i += 2;
                        continue;
                    }
                    // `s = t + s` on locals proved ints: push t, then the same in-place add,
                    // which leaves at this `load` if the sum overflows.
                    let accumulate = records.get(i + 1..i + 4).and_then(|rs| {
                        let consecutive = rs
                            .iter()
                            .enumerate()
                            .all(|(k, r)| r.pc as u32 == pc + 1 + k as u32);
                        let (second, add, store) = (
                            code[pc as usize + 1],
                            code[pc as usize + 2],
                            code[pc as usize + 3],
                        );
                        let a = inst.arg0;
                        let b = second.arg0;
                        let int = |l: u64| p.locals[l as usize] == Ty::Int;
                        let shape = consecutive
                            && second.op == op::LOAD
                            && add.op == op::ADD
                            && store.op == op::STORE
                            && int(a)
                            && int(b);
                        (shape && store.arg0 == b && a != b).then_some((b, a))
                    });
                    if let Some((target, addend)) = accumulate {
                        // The addend is pushed for the add alone: the exit resumes before it,
                        // so the model's stack does not hold it.
                        p.emit(op::LOAD_INT, addend, 0);
                        p.emit_exiting(op::ADD_TO_LOCAL_INT, target, 0, pc);
                        p.store_local(target, Ty::Int);
                        i += 4;
                        continue;
                    }
                    // `load list; load index; getitem` on a list and an int: one micro-op.
                    let item = records.get(i + 1..i + 3).is_some_and(|rs| {
                        rs[0].pc as u32 == pc + 1
                            && rs[1].pc as u32 == pc + 2
                            && code[pc as usize + 1].op == op::LOAD
                            && code[pc as usize + 2].op == op::GETITEM
                            && rs[1].types[1] == TYPE_LIST
                            && rs[1].types[0] == TYPE_INT
                    });
                    if item {
                        let index = code[pc as usize + 1].arg0;
                        // The type checks are left out where the trace has proved both.
                        let known = p.locals[inst.arg0 as usize] == Ty::List
                            && p.locals[index as usize] == Ty::Int;
                        p.emit_exiting(
                            if known {
                                op::GETITEM_LOCALS_KNOWN
                            } else {
                                op::GETITEM_LOCALS
                            },
                            inst.arg0,
                            index,
                            pc,
                        );
                        p.locals[inst.arg0 as usize] = Ty::List;
                        p.locals[index as usize] = Ty::Int;
                        p.push(Ty::Unknown);
                        i += 3;
                        continue;
                    }
                    // A local the trace has proved an int: LOAD_INT, which a run of scaled ints
                    // can push without a tag check (vm/src/jit.rs).
                    let ty = p.locals[inst.arg0 as usize];
                    p.emit(
                        if ty == Ty::Int {
                            op::LOAD_INT
                        } else {
                            op::LOAD
                        },
                        inst.arg0,
                        0,
                    );
                    p.stack.push(Slot {
                        ty,
                        local: Some(inst.arg0),
                    });
                }
                op::STORE => {
                    p.emit(op::STORE, inst.arg0, 0);
                    let s = p.pop();
                    p.store_local(inst.arg0, s.ty);
                }
                op::LOAD_GLOBAL => p.load_global(inst.arg0, pc),
                op::STORE_GLOBAL => {
                    p.emit_exiting(op::STORE_GLOBAL, inst.arg0, 0, pc);
                    p.pop();
                }
                op::POP | op::DUP | op::SWAP => p.shuffle(inst.op),
                op::JUMP_IF_FALSE | op::JUMP_IF_TRUE => {
                    let taken = next_pc(i) == Some(inst.target);
                    let truthy = taken == (inst.op == op::JUMP_IF_TRUE);
                    let other = if taken { pc + 1 } else { inst.target };
                    let guard = if truthy {
                        op::GUARD_TRUE
                    } else {
                        op::GUARD_FALSE
                    };
                    p.emit_exiting(guard, 0, 0, other);
                    p.pop();
                }
                op::CALL if p.inlinable(inst.arg0).is_some() => {
                    p.inline_call(inst, pc, Some(types))?;
                }
                op::CALL => {
                    // Enters the callee's compiled code directly when it has some; leaves after
                    // the call if the callee invalidated executors.
                    let call = p.calls.len() as u64;
                    p.calls.push(TraceCall {
                        func: inst.arg0 as u32,
                        pc,
                        argc: inst.arg1 as u32,
                    });
                    p.emit_exiting(op::CALL_JIT, call, inst.arg1, pc + 1);
                    for _ in 0..inst.arg1 {
                        p.pop();
                    }
                    p.push(Ty::Unknown);
                }
                op::RETURN => {
                    p.emit(op::RETURN, 0, 0);
                    if i + 1 != records.len() {
                        return Err(format!("RETURN at pc {pc} in the middle of a recording"));
                    }
                }
                op::GETITEM if types[1] == TYPE_LIST && types[0] == TYPE_INT => {
                    p.guard(pc, &[(1, Ty::List), (0, Ty::Int)]);
                    p.emit_exiting(op::GETITEM_LIST_INT, 0, 0, pc);
                    p.pop();
                    p.pop();
                    p.push(Ty::Unknown);
                }
                op::SQRT if types[0] == TYPE_FLOAT => {
                    // On a float: no helper call (so no failure a loop must keep its
                    // registers for); a negative argument leaves and the interpreter raises.
                    p.guard(pc, &[(0, Ty::Float)]);
                    p.emit_exiting(op::SQRT_FLOAT, 0, 0, pc);
                    p.pop();
                    p.push(Ty::Float);
                }
                op::SETITEM if types[2] == TYPE_LIST && types[1] == TYPE_INT => {
                    p.guard(pc, &[(2, Ty::List), (1, Ty::Int)]);
                    p.emit_exiting(op::SETITEM_LIST_INT, 0, 0, pc);
                    for _ in 0..3 {
                        p.pop();
                    }
                }
                bytecode => {
                    let info = ops::info(bytecode);
                    if !info.bytecode {
                        return Err(format!(
                            "micro-op {} recorded as a bytecode at pc {pc}",
                            info.name
                        ));
                    }
                    let specialised =
                        specialisations(bytecode).and_then(|(int_op, float_op, cmp)| {
                            match (recorded(types[1]), recorded(types[0])) {
                                (Ty::Int, Ty::Int) => int_op.map(|o| (o, Ty::Int, cmp)),
                                (Ty::Float, Ty::Float) => float_op.map(|o| (o, Ty::Float, cmp)),
                                _ => None,
                            }
                        });
                    if let Some((uop, ty, cmp)) = specialised {
                        // `const d; floordiv` (`mod`) on a dividend known to be an int: a shift, a
                        // mask or a multiplication in place of the constant and the division.
                        if let Some(c) = constant_division(p, uop) {
                            p.uops.pop();
                            p.last_const = None;
                            p.pop();
                            if let Some(const_pc) = c.guard_at {
                                p.guard(const_pc, &[(0, Ty::Int)]);
                            }
                            p.pop();
                            p.emit(c.op, c.arg0, c.arg1);
                            p.push(Ty::Int);
                            i += 1;
                            continue;
                        }
                        let top = *p.slot(0);
                        let before_guards = p.uops.len();
                        p.guard(pc, &[(1, ty), (0, ty)]);
                        p.pop();
                        p.pop();
                        // `load b; add` on floats: one micro-op reading b. A guard of the
                        // other operand moves before the load and leaves there, where the
                        // interpreter has not pushed b yet.
                        let guarded = &p.uops[before_guards..];
                        let other_guarded = match guarded {
                            [] => false,
                            [g] if g.op == op::GUARD_FLOAT_NOS => true,
                            _ => false,
                        };
                        let load_pc = pc.checked_sub(1).filter(|&l| {
                            i > 0
                                && records[i - 1].pc as u32 == l
                                && code[l as usize].op == op::LOAD
                        });
                        let fusion = float_local_op(p, uop, top, other_guarded);
                        if let (Some((fused, b)), Some(load_pc)) = (fusion, load_pc) {
                            if other_guarded {
                                p.uops.pop();
                                p.exit_uses.pop();
                                p.exit_types.pop();
                            }
                            p.uops.pop();
                            if other_guarded {
                                p.emit_exiting(op::GUARD_FLOAT_TOS, 0, 0, load_pc);
                            }
                            p.emit(fused, b, 0);
                            p.push(Ty::Float);
                            i += 1;
                            continue;
                        }
                        // Fuse a comparison with the conditional jump after it.
                        let branch = records.get(i + 1).map(|r| code[r.pc as usize]);
                        let fused = fused_compare_branch(uop).filter(|_| {
                            cmp && records[i + 1].pc as u32 == pc + 1
                                && matches!(
                                    branch.map(|b| b.op),
                                    Some(op::JUMP_IF_FALSE | op::JUMP_IF_TRUE)
                                )
                        });
                        if let (Some((on_true, on_false)), Some(b)) = (fused, branch) {
                            let taken = next_pc(i + 1) == Some(b.target);
                            let truthy = taken == (b.op == op::JUMP_IF_TRUE);
                            let other = if taken { pc + 2 } else { b.target };
                            if let Some((guard, d)) = pow2_multiple_guard(p, uop, truthy) {
                                p.uops.truncate(p.uops.len() - 2);
                                p.last_const = None;
                                p.emit_exiting(guard, d, (d - 1) << 16, other);
                            } else if let Some((guard, c)) =
                                constant_compare_guard(p, if truthy { on_true } else { on_false })
                            {
                                p.uops.pop();
                                p.last_const = None;
                                p.emit_exiting(
                                    guard,
                                    c.0,
                                    (c.as_int().unwrap_or(0) << 16) as u64,
                                    other,
                                );
                            } else {
                                p.emit_exiting(
                                    if truthy { on_true } else { on_false },
                                    0,
                                    0,
                                    other,
                                );
                            }
                            i += 2;
                            continue;
                        }
                        p.emit_exiting(uop, 0, 0, pc);
                        p.push(if cmp { Ty::Bool } else { ty });
                    } else {
                        p.generic(inst, pc);
                    }
                }
            }
            i += 1;
        }
        Ok(())
    };
    pass(&mut p)?;
    let loop_body = match end {
        End::JumpTop => peel(&mut p, &mut pass)?,
        _ => None,
    };
    let loop_start = loop_body.as_ref().map_or(0, |b| b.at);
    let mut end_exit = None;
    match end {
        End::JumpTop => {
            p.emit(op::JUMP_TOP, 0, 0);
            p.uops.last_mut().expect("just emitted").target = loop_start as u32;
        }
        End::Exit(pc) => {
            end_exit = Some(p.uops.len());
            p.emit(op::EXIT_TRACE, pc as u64, 0);
        }
        End::Return => {
            if code[records.last().unwrap().pc as usize].op != op::RETURN {
                return Err("recording ended without RETURN".into());
            }
        }
    }
    // Exit stubs, one per distinct resume pc (and part of a peeled loop), after the body.
    let body_len = p.uops.len();
    // A peeled loop's preamble and body leave through exits of their own, even to the same
    // pc: the body's have proved more (a side trace grown from one starts from what it
    // proved, and may re-enter the loop past its preamble: `loop_body_entry`).
    let key = |at: usize, pc: u32| (pc, loop_start > 0 && at >= loop_start);
    let mut exits: BTreeMap<(u32, bool), usize> = BTreeMap::new();
    let mut exit_pcs = Vec::new();
    for &(at, pc) in &p.exit_uses {
        exits.entry(key(at, pc)).or_insert_with(|| {
            exit_pcs.push(pc);
            exit_pcs.len() - 1
        });
    }
    // A stub resuming at an inlined call first cuts the value stack back to the call's
    // depth (its arguments on top): one micro-op more.
    let mut stub_at = Vec::with_capacity(exit_pcs.len());
    let mut at = body_len;
    for pc in &exit_pcs {
        stub_at.push(at);
        at += 1 + usize::from(p.inline_exits.contains_key(pc));
    }
    for &(at, pc) in &p.exit_uses {
        p.uops[at].target = stub_at[exits[&key(at, pc)]] as u32;
    }
    // What every use of an exit has proved.
    let mut exit_locals: Vec<Option<Vec<Ty>>> = vec![None; exit_pcs.len()];
    for (&(at, pc), types) in p.exit_uses.iter().zip(&p.exit_types) {
        let known = &mut exit_locals[exits[&key(at, pc)]];
        match known {
            None => *known = Some(types.clone()),
            Some(k) => {
                for (a, &b) in k.iter_mut().zip(types) {
                    if *a != b {
                        *a = Ty::Unknown;
                    }
                }
            }
        }
    }
    let mut exit_locals: Vec<Vec<Ty>> = exit_locals
        .into_iter()
        .map(|k| k.unwrap_or_default())
        .collect();
    for (e, &pc) in exit_pcs.iter().enumerate() {
        if let Some(&depth) = p.inline_exits.get(&pc) {
            p.emit(op::RESET_STACK, u64::from(depth), 0);
        }
        debug_assert_eq!(p.uops.len() + 1, stub_at.get(e + 1).copied().unwrap_or(at));
        p.uops.push(Inst {
            op: op::EXIT_TRACE,
            target: 0,
            arg0: exit_operand(pc, e),
            arg1: 0,
        });
    }
    // The end of the path is an exit of its own (not shared with guards): it may be linked
    // to a trace that starts where it goes.
    let end_exit = end_exit.map(|at| {
        let pc = p.uops[at].arg0 as u32;
        exit_pcs.push(pc);
        exit_locals.push(p.locals.clone());
        p.uops[at].arg0 = exit_operand(pc, exit_pcs.len() - 1);
        exit_pcs.len() - 1
    });
    // Int constants as CONST_INT, passed boxed and scaled (after the fusions above, which
    // look for CONST).
    for u in &mut p.uops {
        if let (op::CONST, Some(c)) = (u.op, Value(u.arg0).as_int()) {
            u.op = op::CONST_INT;
            u.arg1 = (c << 16) as u64;
        }
    }
    let _ = p.func;
    Ok(Trace {
        uops: p.uops,
        body_len,
        exit_pcs,
        end_exit,
        deps: p.deps,
        calls: p.calls,
        exit_locals,
        inlined_calls: p.inlined_calls,
        inherited_pins: None,
        loop_body,
        depth_checked: p.depth_checked,
        depth_needed: p.depth_needed,
    })
}

/// Whether the recording at `i` (a `load s`) is the statement `s = s + e` on ints with `e` a
/// pure expression ([`pure_expression`]) followed by `add; store s`, where s is proved an int and
/// both of the add's operands were ints when recorded. Running e again from the statement's
/// start is then indistinguishable from resuming it in the middle, so every exit in it (and
/// the add's overflow) resumes at the `load`, with the stack cut back to where it was. The
/// pc of the `add`.
fn accumulation(
    code: &[Inst],
    records: &[Record],
    i: usize,
    locals: &[Ty],
    inlinable: impl Fn(u64) -> bool,
) -> Option<u32> {
    let start = records[i].pc as usize;
    let local = code[start].arg0;
    if locals.get(local as usize) != Some(&Ty::Int) {
        return None;
    }
    pure_expression(code, records, i, i + 1, inlinable, |k, rec, inst| {
        let add_store = inst.op == op::ADD
            && code
                .get(rec.pc as usize + 1)
                .is_some_and(|s| s.op == op::STORE && s.arg0 == local)
            && records.get(k + 1).is_some_and(|r| r.pc == rec.pc + 1);
        add_store.then(|| {
            let ints = rec.types[0] == TYPE_INT && rec.types[1] == TYPE_INT;
            (ints && k > i + 1).then_some(rec.pc as u32)
        })
    })
}

/// The pc of the `setitem` if the recording at `i` (a `load xs`) is the statement
/// `xs[i] = e`: `load xs; load i`, then a pure expression e as [`accumulation`] takes them,
/// then `setitem`, recorded on a list and an int. Its value is stored by one micro-op
/// reading xs and i from the frame (or i from a pinned register), and every exit in e, or
/// the store's own, resumes at the `load xs` (e runs again; it only reads).
fn item_store(
    code: &[Inst],
    records: &[Record],
    i: usize,
    inlinable: impl Fn(u64) -> bool,
) -> Option<u32> {
    let start = records[i].pc as usize;
    let index_load = records.get(i + 1)?;
    if index_load.pc as usize != start + 1 || code.get(start + 1)?.op != op::LOAD {
        return None;
    }
    pure_expression(code, records, i, i + 2, inlinable, |k, rec, inst| {
        (inst.op == op::SETITEM).then(|| {
            let typed = rec.types[2] == TYPE_LIST && rec.types[1] == TYPE_INT;
            (typed && k > i + 2).then_some(rec.pc as u32)
        })
    })
}

/// The walk [`accumulation`] and [`item_store`] share: from `records[first]` on, at pcs
/// consecutive with `records[i]`'s, a pure expression (at most 12 bytecodes, each reading
/// only locals, globals, list items and constants or calling a function the trace inlines:
/// pure by [`crate::inline`]'s rules; no other call, store, jump or output), then the
/// statement's end. At each bytecode reached with exactly one value above the stack the
/// expression started on, `end` says whether the statement ends there (`Some`, with what to
/// return) or the expression goes on (`None`).
fn pure_expression<T>(
    code: &[Inst],
    records: &[Record],
    i: usize,
    first: usize,
    inlinable: impl Fn(u64) -> bool,
    end: impl Fn(usize, &Record, Inst) -> Option<Option<T>>,
) -> Option<T> {
    /// The longest expression taken: long ones repeat more work when they leave.
    const LONGEST: usize = 12;
    let start = records[i].pc as usize;
    let mut depth = 0i64;
    for (k, rec) in records.iter().enumerate().skip(first).take(LONGEST + 1) {
        let pc = rec.pc as usize;
        if pc != start + (k - i) {
            return None;
        }
        let inst = code[pc];
        if depth == 1 {
            if let Some(result) = end(k, rec, inst) {
                return result;
            }
        }
        let pure =
            crate::inline::reads_only(inst.op) || (inst.op == op::CALL && inlinable(inst.arg0));
        if !pure {
            return None;
        }
        let info = ops::info(inst.op);
        depth -= info.pop.count([inst.arg0, inst.arg1]) as i64;
        if depth < 0 {
            return None;
        }
        depth += info.push.count([inst.arg0, inst.arg1]) as i64;
    }
    None
}

impl Trace {
    /// Where a trace that ends at this loop trace's head may continue instead of at its
    /// first micro-op: the first micro-op of the loop's body (past the preamble), when
    /// `from` has proved at its end every local type the body assumes and checked the frame
    /// stack's room for the body's inlined calls (the preamble, which checks both, is then
    /// not run again). `None`: enter at the start.
    pub fn loop_body_entry(&self, from: &Trace) -> Option<usize> {
        let body = self.loop_body.as_ref()?;
        let proved = from.exit_locals.get(from.end_exit?)?;
        let types_hold = proved.len() == body.assumed.len()
            && body
                .assumed
                .iter()
                .zip(proved)
                .all(|(&a, &p)| a == Ty::Unknown || a == p);
        (types_hold && from.depth_checked >= self.depth_needed).then_some(body.at)
    }

    /// Whether a peeled loop's body assumes local `local` an int where it starts (its
    /// preamble proved it, and every link into the body must have).
    pub fn loop_body_proves_int(&self, local: u64) -> bool {
        self.loop_body
            .as_ref()
            .and_then(|b| b.assumed.get(local as usize))
            .is_some_and(|&t| t == Ty::Int)
    }

    /// The first micro-op of a peeled loop's body (the target of its `JUMP_TOP`).
    pub fn loop_body_start(&self) -> Option<usize> {
        self.loop_body.as_ref().map(|b| b.at)
    }

    /// A listing of the micro-ops, one per line, with operands, targets and exits.
    pub fn dump(&self, func: &Function) -> String {
        let mut s = String::new();
        let mut calls = self.calls.iter();
        for (i, u) in self.uops.iter().enumerate() {
            let info = ops::info(u.op);
            if i == self.body_len {
                s.push_str("  -- exits --\n");
            }
            write!(s, "  {i:4}  {:<24}", info.name).unwrap();
            for (k, kind) in info.operands.iter().enumerate() {
                let a = if k == 0 { u.arg0 } else { u.arg1 };
                match kind {
                    ops::OperandKind::Local => write!(
                        s,
                        " {}",
                        func.locals.get(a as usize).map_or("?", |l| l.as_str())
                    )
                    .unwrap(),
                    ops::OperandKind::Const => {
                        let mut v = String::new();
                        crate::value::format_value(&mut v, Value(a));
                        write!(s, " {v}").unwrap();
                    }
                    ops::OperandKind::ScaledInt => write!(s, " {}", a as i64 >> 16).unwrap(),
                    ops::OperandKind::Pc => write!(s, " pc={a}").unwrap(),
                    ops::OperandKind::Exit => {
                        write!(s, " pc={} exit={}", a >> 32, a & 0xffff).unwrap()
                    }
                    ops::OperandKind::Link => {}
                    ops::OperandKind::Site => match calls.next() {
                        Some(c) => write!(s, " func={} pc={}", c.func, c.pc).unwrap(),
                        None => write!(s, " site={a:#x}").unwrap(),
                    },
                    _ => write!(s, " {a}").unwrap(),
                }
            }
            if info.jumps {
                write!(s, " -> {}", u.target).unwrap();
            } else if info.exits && i < self.body_len {
                write!(s, " exit-> {}", u.target).unwrap();
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::reciprocal;

    /// `vm_floordiv_by` of vm/templates/vm_values.h, step by step.
    fn floordiv_by(x: i64, d: u64, magic: u64) -> i64 {
        let t = x >> 63;
        let n = (x ^ t) as u64 + (d & t as u64);
        let q = ((u128::from(n) * (u128::from(magic) + 1)) >> 64) as u64 as i64;
        (q ^ t) - t
    }

    /// Against Rust's floor division, on every dividend kind the VM's 48-bit ints have: the
    /// ends of the range, around multiples of d, and a spread in between.
    #[test]
    fn the_reciprocal_divides_every_int_exactly() {
        const MAX: i64 = (1 << 47) - 1;
        let mut divisors: Vec<u64> = (3..2000).filter(|d: &u64| !d.is_power_of_two()).collect();
        divisors.extend([10_007, 32_769, 46_341, 65_521, 65_533, 65_535]);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for &d in &divisors {
            let magic = reciprocal(d);
            let di = d as i64;
            let mut xs = vec![
                0,
                1,
                -1,
                MAX,
                -MAX - 1,
                MAX - 1,
                -MAX,
                di,
                -di,
                di - 1,
                1 - di,
            ];
            xs.extend([
                di + 1,
                -di - 1,
                MAX / di * di,
                -(MAX / di) * di,
                -(MAX / di) * di - 1,
            ]);
            for _ in 0..200 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                xs.push((seed as i64) >> 16);
            }
            for x in xs {
                assert_eq!(floordiv_by(x, d, magic), x.div_euclid(di), "{x} // {d}");
            }
        }
    }

    #[test]
    fn divisors_without_a_reciprocal_are_refused() {
        for d in [0, 1, 2, 4, 1024, 1 << 16, (1 << 16) + 1, 1 << 47] {
            assert!(std::panic::catch_unwind(|| reciprocal(d)).is_err(), "{d}");
        }
    }
}
