//! The projector's state machine: the micro-ops emitted so far, the abstract types of the
//! value stack and the locals, and the exits taken. Every recogniser ([`super::pass`],
//! [`super::idioms`], [`super::fusion`]) builds on these few operations, so that type state
//! and exit bookkeeping stay in one place.

use super::{ty_of, Inliner, Projector, Slot, Ty};
use crate::abi::Inst;
use crate::inline::Inlinable;
use crate::ops::{self, op};
use crate::parser::Function;
use crate::value::Value;
use std::collections::BTreeMap;

impl Slot {
    /// A value of unknown type not known to be a copy of a local.
    pub(super) const UNKNOWN: Slot = Slot {
        ty: Ty::Unknown,
        local: None,
    };

    /// A value of type `ty` loaded from `local`, while the local still holds it.
    pub(super) fn of_local(ty: Ty, local: u64) -> Slot {
        Slot {
            ty,
            local: Some(local),
        }
    }
}

impl<'a> Projector<'a> {
    /// A projector for `func` starting from the locals' types `locals`; `globals` are the
    /// globals' current values, `stored_globals` those the recording stores.
    pub(super) fn new(
        func: &'a Function,
        locals: Vec<Ty>,
        globals: &'a [u64],
        stored_globals: Vec<u64>,
        inliner: Option<Inliner<'a>>,
    ) -> Projector<'a> {
        Projector {
            func,
            uops: Vec::new(),
            exit_uses: Vec::new(),
            exit_types: Vec::new(),
            stack: Vec::new(),
            locals,
            calls: Vec::new(),
            last_const: None,
            globals,
            stored_globals,
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
        }
    }

    pub(super) fn emit(&mut self, id: u32, arg0: u64, arg1: u64) {
        self.uops.push(Inst {
            op: id,
            target: 0,
            arg0,
            arg1,
        });
    }

    /// Emits a micro-op that leaves the trace at bytecode `pc` when it cannot go on.
    pub(super) fn emit_exiting(&mut self, id: u32, arg0: u64, arg1: u64, pc: u32) {
        let pc = self.inlined_at.unwrap_or(pc);
        self.exit_uses.push((self.uops.len(), pc));
        self.exit_types.push(self.locals.clone());
        self.emit(id, arg0, arg1);
    }
    pub(super) fn pop(&mut self) -> Slot {
        self.stack.pop().unwrap_or(Slot::UNKNOWN)
    }

    pub(super) fn push(&mut self, ty: Ty) {
        self.stack.push(Slot { ty, local: None });
    }

    /// The slot `depth` below the top (0 = top), growing the known stack downwards if the
    /// trace started with values already on it.
    pub(super) fn slot(&mut self, depth: usize) -> &mut Slot {
        while self.stack.len() <= depth {
            self.stack.insert(0, Slot::UNKNOWN);
        }
        let n = self.stack.len();
        &mut self.stack[n - 1 - depth]
    }

    pub(super) fn refine(&mut self, depth: usize, ty: Ty) {
        let slot = self.slot(depth);
        slot.ty = ty;
        if let Some(l) = slot.local {
            self.locals[l as usize] = ty;
        }
    }

    /// Guards that the slots have the given types (depth 0 = top), unless already known.
    pub(super) fn guard(&mut self, pc: u32, wanted: &[(usize, Ty)]) {
        // An item just read is checked by its read instead (before the filter below).
        for &(d, ty) in wanted {
            super::list::typed_item_read(self, d, ty);
        }
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

    pub(super) fn store_local(&mut self, l: u64, ty: Ty) {
        self.locals[l as usize] = ty;
        for s in &mut self.stack {
            if s.local == Some(l) {
                s.local = None;
            }
        }
    }

    /// `POP`, `DUP` or `SWAP`: the same micro-op, and the known slots moved alike.
    pub(super) fn shuffle(&mut self, id: u32) {
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
    pub(super) fn load_global(&mut self, g: u64, pc: u32) {
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
    pub(super) fn generic(&mut self, inst: Inst, pc: u32) {
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
            // `int(x)` of a large float is a big int, which no int guard admits.
            op::LEN => Ty::Int,
            op::NEWLIST | op::BUILD_LIST => Ty::List,
            _ => Ty::Unknown,
        };
        for _ in 0..info.push.count(args) {
            self.push(result);
        }
    }

    /// Whether (and at what cost) a call of function `f` is inlined.
    pub(super) fn inlinable(&self, f: u64) -> Option<Inlinable> {
        self.inliner?.inlining.callee(f as usize)
    }
}

/// Whether the projector has a guard for a value of type `ty` `depth` values below the top.
pub(super) fn guardable(depth: usize, ty: Ty) -> bool {
    matches!(
        (depth, ty),
        (0 | 1, Ty::Int) | (0 | 1, Ty::Float) | (1 | 2, Ty::List)
    )
}

/// The int and float micro-ops specialising a binary bytecode, and whether it compares.
pub(super) fn specialisations(bytecode: u32) -> Option<(Option<u32>, Option<u32>, bool)> {
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
