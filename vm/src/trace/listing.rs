//! What a projected trace tells the VM after projection: where a link may enter a peeled
//! loop's body, what the body assumes, and the trace's listing (`--dump-trace`).

use super::{Trace, Ty};
use crate::ops;
use crate::parser::Function;
use crate::value::Value;
use std::fmt::Write as _;

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

    /// Whether a peeled loop's body assumes local `local` a float where it starts.
    pub fn loop_body_proves_float(&self, local: u64) -> bool {
        self.loop_body
            .as_ref()
            .and_then(|b| b.assumed.get(local as usize))
            .is_some_and(|&t| t == Ty::Float)
    }

    /// The locals `exit` of this trace leaves with the types a side trace starts from: those
    /// the trace proved there, but a sum its loop body adds into (`ADD_TO_LOCAL_INT`) is
    /// unknown, since the body may hold it wide (vm/src/pinning.rs) and write it back a big
    /// int, and so is a local this trace adds into or increments unproved while it holds it
    /// wide as its parent did ([`Trace::inherited_pins`]; an increment proved in range,
    /// `INCREMENT_LOCAL_INT_BOUNDED`, keeps it an int: `bounded.rs`).
    pub(super) fn exit_types(&self, exit: usize) -> Option<Vec<Ty>> {
        let mut types = self.exit_locals.get(exit)?.clone();
        let body = self
            .loop_body_start()
            .and_then(|at| self.uops.get(at..self.body_len));
        for u in body.into_iter().flatten() {
            if u.op == ops::op::ADD_TO_LOCAL_INT {
                if let Some(t) = types.get_mut(u.arg0 as usize) {
                    *t = Ty::Unknown;
                }
            }
        }
        if let Some(pins) = &self.inherited_pins {
            let adds = [
                ops::op::ADD_TO_LOCAL_INT,
                ops::op::INCREMENT_LOCAL_INT,
                ops::op::INCREMENT_LOCAL_INT_KNOWN,
            ];
            for u in &self.uops[..self.body_len] {
                if adds.contains(&u.op) && pins.holds_wide(u.arg0) {
                    if let Some(t) = types.get_mut(u.arg0 as usize) {
                        *t = Ty::Unknown;
                    }
                }
            }
        }
        Some(types)
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
