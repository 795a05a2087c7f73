//! Inlining a call into the trace: the callee's body is projected in place, its locals on
//! the value stack above the arguments ([`crate::inline`] decides which calls qualify).

use super::fusion::constant_division;
use super::{guardable, recorded, specialisations, ty_of, Projector, Slot, TraceCall, Ty};
use crate::abi::Inst;
use crate::ops::op;
use crate::parser::Function;
use crate::value::Value;

/// An inlined callee's frame on the value stack: where its locals are.
struct InlinedFrame<'f> {
    callee: &'f Function,
    /// The parameters forwarded from the caller's locals (by parameter: the local and its
    /// type); they are not on the stack.
    forwarded: Vec<(u64, Ty)>,
    /// Where the callee's first local on the stack is (`forwarded.len()` is the first such).
    base: usize,
    /// Where every exit of the body resumes.
    at: u32,
}

impl InlinedFrame<'_> {
    /// The local's slot in the stack.
    fn index(&self, l: u64) -> usize {
        self.base + l as usize - self.forwarded.len()
    }

    /// How deep below the top local `l` is. The inlining analysis keeps callees' frames small
    /// (`MAX_FRAME_WORDS`): a local is never deeper than that below the top.
    fn depth_of(&self, p: &Projector<'_>, l: u64) -> Result<usize, String> {
        let d = p.stack.len() - 1 - self.index(l);
        if d > crate::inline::MAX_FRAME_WORDS {
            return Err(format!(
                "inlined local {l} of {} is {d} values deep",
                self.callee.name
            ));
        }
        Ok(d)
    }
}

impl Projector<'_> {
    /// A `CALL` (at `pc`, of an inlinable function) replaced by the callee's body, its
    /// locals on the value stack above the arguments ([`crate::inline`]; arguments a
    /// statement's exits do not need are forwarded instead, [`Projector::forwardable_arguments`]).
    /// Every exit of the body resumes at the outermost inlined `CALL` (`inlined_at`, or the
    /// start of the statement it is in when that is where exits resume), where the stub cuts
    /// the stack back to the arguments and the interpreter makes the call. `arg_types`: the
    /// types recorded at the call (the outermost one only), guarded on the arguments so that
    /// the body is specialised.
    pub(super) fn inline_call(
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
        if self.callee_depth == 0 {
            let types = arg_types.filter(|_| forwarded.is_empty());
            self.enter_outermost_call(call, pc, info.nesting, types);
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
        let base = self.stack.len() - (callee.locals.len() - forwarded.len());
        let frame = InlinedFrame {
            callee,
            forwarded,
            base,
            at,
        };
        let Some((last, body)) = callee.code.split_last() else {
            return Err(format!("inlined function {} has no code", callee.name));
        };
        for &inst in body {
            self.inline_inst(&frame, inst)?;
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

    /// What only the outermost inlined call does: its exit stub cuts the stack back to the
    /// call, the frame stack's room for the nesting is checked once, and the arguments'
    /// recorded types `arg_types` (when not forwarded) are guarded.
    fn enter_outermost_call(
        &mut self,
        call: Inst,
        pc: u32,
        nesting: u32,
        arg_types: Option<[u8; 3]>,
    ) {
        let argc = call.arg1 as usize;
        self.depth_needed = self.depth_needed.max(nesting);
        if self.inlined_at.is_none() {
            self.inline_exits
                .insert(pc, self.func.depths.get(pc as usize).copied().unwrap_or(0));
        }
        if self.depth_checked < nesting {
            let site = self.calls.len() as u64;
            self.calls.push(TraceCall::of(call, pc));
            self.emit_exiting(op::GUARD_CALL_DEPTH, site, u64::from(nesting), pc);
            self.depth_checked = nesting;
        }
        if let Some(types) = arg_types {
            let wanted: Vec<(usize, Ty)> = (0..argc.min(types.len()))
                .map(|d| (d, recorded(types[d])))
                .filter(|&(d, ty)| guardable(d, ty))
                .collect();
            self.guard(pc, &wanted);
        }
    }

    /// One bytecode of an inlined body (not its final `RETURN`): locals become stack
    /// accesses, every exit resumes at `frame.at`.
    fn inline_inst(&mut self, frame: &InlinedFrame<'_>, inst: Inst) -> Result<(), String> {
        let at = frame.at;
        let skip = frame.forwarded.len();
        match inst.op {
            op::NOP => {}
            op::CONST => {
                self.last_const = Some((self.uops.len(), at));
                self.emit(op::CONST, inst.arg0, 0);
                self.push(ty_of(Value(inst.arg0)));
            }
            op::LOAD if (inst.arg0 as usize) < skip => {
                let (local, ty) = frame.forwarded[inst.arg0 as usize];
                let id = if ty == Ty::Int {
                    op::LOAD_INT
                } else {
                    op::LOAD
                };
                self.emit(id, local, 0);
                self.stack.push(Slot::of_local(ty, local));
            }
            op::LOAD => {
                let local = self.stack[frame.index(inst.arg0)];
                match frame.depth_of(self, inst.arg0)? {
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
                    frame.callee.name, inst.arg0
                ));
            }
            op::STORE => {
                let d = frame.depth_of(self, inst.arg0)?;
                self.emit(op::PUT, d as u64, 0);
                let v = self.pop();
                self.stack[frame.index(inst.arg0)] = Slot {
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
            op::SQRT if self.slot(0).ty == Ty::Float => {
                // As in a trace's own code (trace/pass.rs): no helper call; a negative
                // operand leaves, and the interpreter raises at the call it makes again.
                self.emit_exiting(op::SQRT_FLOAT, 0, 0, at);
                self.pop();
                self.push(Ty::Float);
            }
            bytecode => self.inline_binary(inst, bytecode, at),
        }
        Ok(())
    }

    /// A binary bytecode of an inlined body: specialised on the operands' known types (the
    /// arguments were guarded at the call), or generic.
    fn inline_binary(&mut self, inst: Inst, bytecode: u32, at: u32) {
        let typed = specialisations(bytecode).and_then(|(int_op, float_op, cmp)| {
            match (self.slot(1).ty, self.slot(0).ty) {
                (Ty::Int, Ty::Int) => int_op.map(|o| (o, Ty::Int, cmp)),
                (Ty::Float, Ty::Float) => float_op.map(|o| (o, Ty::Float, cmp)),
                _ => None,
            }
        });
        let Some((uop, ty, cmp)) = typed else {
            self.generic(inst, at);
            return;
        };
        if let Some(c) = constant_division(self, uop) {
            // The dividend is a known int: no guard (`guard_at` is none).
            self.uops.pop();
            self.last_const = None;
            self.pop();
            self.pop();
            self.emit(c.op, c.arg0, c.arg1);
            self.push(Ty::Int);
            return;
        }
        if super::reuse::inlined_float_op_on_local(self, uop) {
            return;
        }
        // (Its exit resumes at the caller's call, as the typed op's.)
        if super::multiply::multiply_by_constant(self, uop) {
            return;
        }
        self.pop();
        self.pop();
        self.emit_exiting(uop, 0, 0, at);
        self.push(if cmp { Ty::Bool } else { ty });
    }

    /// The arguments of a call with `argc` of them that can be forwarded: inside a statement
    /// whose exits all resume at its start, when the last `argc` micro-ops are the loads that
    /// pushed them (`LOAD`/`LOAD_INT` of the local each slot copies) and the trace has proved
    /// each local's type. By parameter: the local and its type; empty when not all can be.
    pub(super) fn forwardable_arguments(&self, argc: usize) -> Vec<(u64, Ty)> {
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
