//! A hot branch merged into its loop: a side trace grown from an exit of a peeled loop's body
//! that ends back at the loop's head becomes a block of the loop trace itself, after the
//! body's back edge and ending in a back edge of its own, and every exit into the stub it
//! grew from jumps to the block instead. Linked, the same path went guard → exit stub (read
//! the pinned link slot, test it, jump through it) → the side trace → its own exit stub
//! (the same again) → the loop body: on `examples/collatz.vm`'s odd step (`3 * x + 1`) 12
//! of its ≈ 26 instructions and two indirect jumps. Merged, the block keeps the loop's
//! pinned registers ([`crate::pinning`]) and reaches the loop body with one direct jump.

use super::Trace;
use crate::abi::Inst;
use crate::ops::{self, op, OperandKind};

/// How many side traces one loop trace takes in: each merge compiles the loop again.
pub const MAX_MERGED_BRANCHES: usize = 3;

/// The most micro-ops a loop trace grows to by merging.
const MAX_MERGED_UOPS: usize = 1024;

impl Trace {
    /// This loop trace with `side` (a side trace grown from exit `exit`, projected from what
    /// the exit proved, not attached) merged in as a block of the body, when it can be: this
    /// is a peeled loop trace (not attached: [`Trace::detached`]'s form) that has merged
    /// fewer than [`MAX_MERGED_BRANCHES`] branches; `exit` is left only from the body,
    /// through a stub that is its `EXIT_TRACE` alone (no stack to cut back first); `side`
    /// does not jump, and ends at the loop's head (`head`, the pc the body starts at) having
    /// proved what the body assumes there ([`Trace::loop_body_entry`]). The exits keep their
    /// indices; `side`'s exits but its end come after them, its calls after this trace's.
    /// `exit`'s stub, which nothing enters any more, is dropped, but not its index: the
    /// replaced executor, which a frame may still run, leaves by the old indices, and the
    /// VM finds each exit's state by its index.
    pub fn merge_branch(&self, exit: usize, side: &Trace, head: u32) -> Option<Trace> {
        let start = self.loop_body_start()?;
        let stub = self.lone_body_stub(exit, start)?;
        let side_end = side.end_exit?;
        let side_last = side.body_len.checked_sub(1)?;
        let ends_at_head = side_end + 1 == side.exit_pcs.len()
            && side.exit_pcs[side_end] == head
            && side.uops[side_last].op == op::EXIT_TRACE
            && self.loop_body_entry(side) == Some(start);
        let jumps = side.uops[..side_last].iter().any(|u| ops::info(u.op).jumps);
        let grown = self.uops.len() + side.uops.len();
        if !ends_at_head || jumps || self.merged_branches() >= MAX_MERGED_BRANCHES {
            return None;
        }
        if grown > MAX_MERGED_UOPS || self.end_exit.is_some() {
            return None;
        }
        // The block (side's body but its final EXIT_TRACE) and its back edge go between the
        // body and the stubs: every stub moves by `shift`, less one past the dropped stub of
        // `exit`; side's stubs go last.
        let block_at = self.body_len;
        let shift = side_last + 1;
        // (Kept where the stub before it falls through into it: RESET_STACK, EXIT_TRACE.)
        let dropped =
            usize::from(stub == self.body_len || self.uops[stub - 1].op == op::EXIT_TRACE);
        let moved = |t: usize| t + shift - dropped * usize::from(t > stub);
        let side_stubs_at = self.uops.len() + shift - dropped;
        let exits = self.exit_pcs.len() as u64;
        let calls = self.calls.len() as u64;
        let mut uops = Vec::with_capacity(grown);
        for u in &self.uops[..self.body_len] {
            let mut u = *u;
            if has_target(&u) {
                u.target = match u.target as usize {
                    t if t == stub => block_at as u32,
                    t if t >= self.body_len => moved(t) as u32,
                    t => t as u32,
                };
            }
            uops.push(u);
        }
        for u in &side.uops[..side_last] {
            let mut u = renumber_calls(*u, calls);
            if has_target(&u) {
                u.target = (side_stubs_at + u.target as usize - side.body_len) as u32;
            }
            uops.push(u);
        }
        uops.push(Inst {
            op: op::JUMP_TOP,
            target: start as u32,
            arg0: 0,
            arg1: 0,
        });
        uops.extend_from_slice(&self.uops[self.body_len..stub]);
        uops.extend_from_slice(&self.uops[stub + dropped..]);
        for u in &side.uops[side.body_len..] {
            let mut u = renumber_calls(*u, calls);
            if u.op == op::EXIT_TRACE {
                u.arg0 += exits;
            }
            uops.push(u);
        }
        let mut deps = self.deps.clone();
        deps.extend(side.deps.iter().filter(|d| !self.deps.contains(d)));
        let side_exits = ..side_end;
        Some(Trace {
            uops,
            body_len: self.body_len + shift,
            exit_pcs: [&self.exit_pcs[..], &side.exit_pcs[side_exits]].concat(),
            end_exit: None,
            deps,
            calls: [&self.calls[..], &side.calls[..]].concat(),
            exit_locals: [&self.exit_locals[..], &side.exit_locals[side_exits]].concat(),
            inlined_calls: self.inlined_calls + side.inlined_calls,
            inherited_pins: None,
            loop_body: self.loop_body.clone(),
            // (The block checks the frame stack's room for its own inlined calls.)
            depth_checked: self.depth_checked,
            depth_needed: self.depth_needed,
        })
    }

    /// How many side traces have been merged into this loop trace: its back edges but one.
    pub fn merged_branches(&self) -> usize {
        let Some(start) = self.loop_body_start() else {
            return 0;
        };
        let back_edges = self.uops[start..self.body_len]
            .iter()
            .filter(|u| u.op == op::JUMP_TOP)
            .count();
        back_edges.saturating_sub(1)
    }

    /// The stub of exit `exit` when it is an `EXIT_TRACE` alone that only micro-ops of the
    /// body (from `start`) enter, at least one.
    fn lone_body_stub(&self, exit: usize, start: usize) -> Option<usize> {
        let stub = (self.body_len..self.uops.len()).find(|&i| {
            let u = &self.uops[i];
            u.op == op::EXIT_TRACE && (u.arg0 & 0xffff) as usize == exit
        })?;
        let mut entered = false;
        for (i, u) in self.uops[..self.body_len].iter().enumerate() {
            if has_target(u) && u.target as usize == stub {
                if i < start {
                    return None;
                }
                entered = true;
            }
        }
        entered.then_some(stub)
    }

    /// This trace as the projector made it, from the form the VM attached
    /// (`Vm::attach_operands`): each `EXIT_TRACE`'s executor index and link slot cleared,
    /// each call site operand back to its call's index, given the site array it points into
    /// (`sites`, of `site_bytes` per site).
    pub fn detached(&self, sites: u64, site_bytes: u64) -> Trace {
        let mut t = self.clone();
        for u in &mut t.uops {
            if u.op == op::EXIT_TRACE {
                u.arg0 &= !(0xffff << 16);
                u.arg1 = 0;
            }
            if ops::info(u.op).operands.first() == Some(&OperandKind::Site) {
                u.arg0 = (u.arg0 - sites) / site_bytes;
            }
        }
        t
    }
}

/// Whether micro-op `u` jumps or exits to `u.target`.
fn has_target(u: &Inst) -> bool {
    let info = ops::info(u.op);
    info.jumps || info.exits
}

/// `u` with its call site operand (a call's index before attaching) moved past `calls`
/// calls of the trace it joins.
fn renumber_calls(mut u: Inst, calls: u64) -> Inst {
    if ops::info(u.op).operands.first() == Some(&OperandKind::Site) {
        u.arg0 += calls;
    }
    u
}

#[cfg(test)]
mod tests {
    use super::super::testing::{function, op_names, records};
    use super::super::{project, End, Ty};
    use crate::abi::{TYPE_INT, TYPE_NONE};
    use crate::ops::op;

    const INTS: [u8; 3] = [TYPE_INT, TYPE_INT, TYPE_NONE];

    /// Collatz's inner loop: `x` halved while even, `3 * x + 1` when odd (pc 14 on).
    const LOOP: &str = "head:\n  load x; const 1; ne; jump_if_false done\n  \
                        load x; const 2; mod; const 0; eq; jump_if_false odd\n  \
                        load x; const 2; floordiv; store x\n  jump head\n\
                        odd:\n  load x; const 3; mul; const 1; add; store x\n  jump head\ndone:";

    /// The even path as a loop trace and the odd one as a side trace of its exit to `odd`:
    /// (loop, side, the exit).
    fn collatz() -> (super::Trace, super::Trace, usize) {
        let prog = function("x", LOOP);
        let f = &prog.functions[prog.main];
        let even = [(2, INTS), (6, INTS), (8, INTS), (12, INTS)];
        let rs = records(0..15, &even);
        let looped = project(f, &f.code, &rs, End::JumpTop, &[], None, None).unwrap();
        let odd_pc = 15;
        let exit = looped
            .exit_pcs
            .iter()
            .rposition(|&pc| pc == odd_pc)
            .expect("an exit to the odd step");
        let odd = records(15..22, &[(17, INTS), (19, INTS)]);
        let side = project(
            f,
            &f.code,
            &odd,
            End::Exit(0),
            &[],
            Some((&looped, exit)),
            None,
        )
        .unwrap();
        (looped, side, exit)
    }

    #[test]
    fn the_odd_step_becomes_a_block_of_the_loop_body() {
        let (looped, side, exit) = collatz();
        let merged = looped.merge_branch(exit, &side, 0).expect("merges");
        let start = looped.loop_body_start().unwrap();
        let block = looped.body_len;
        // The body as it was, but its targets: the stub of `exit` is now the block, the
        // other stubs moved past the block.
        let stub = looped.lone_body_stub(exit, start).unwrap();
        let shift = merged.body_len - looped.body_len;
        for (old, new) in looped.uops[..block].iter().zip(&merged.uops) {
            assert_eq!((old.op, old.arg0, old.arg1), (new.op, new.arg0, new.arg1));
            let moved = match old.target as usize {
                t if !super::has_target(old) => t,
                t if t == stub => block,
                t if t > stub => t + shift - 1,
                t if t >= looped.body_len => t + shift,
                t => t,
            };
            assert_eq!(new.target as usize, moved);
        }
        // The stub of `exit` is gone, its index kept: the loop's other stubs follow, then
        // side's but its end.
        let stubs = |t: &super::Trace| t.uops[t.body_len..].to_vec();
        let mut kept = stubs(&looped);
        kept.remove(stub - looped.body_len);
        let n_side_stubs = side.uops.len() - side.body_len;
        assert_eq!(stubs(&merged).len(), kept.len() + n_side_stubs);
        assert_eq!(stubs(&merged)[..kept.len()], kept[..]);
        let merged_stubs = stubs(&merged);
        let exits = |stubs: &[crate::abi::Inst]| -> Vec<usize> {
            let leaving = stubs.iter().filter(|u| u.op == op::EXIT_TRACE);
            leaving.map(|u| (u.arg0 & 0xffff) as usize).collect()
        };
        assert!(
            !exits(&merged_stubs).contains(&exit),
            "no stub leaves by {exit}"
        );
        let side_exits = exits(&side.uops[side.body_len..]).len();
        let wanted = exits(&stubs(&looped)).len() - 1 + side_exits;
        assert_eq!(exits(&merged_stubs).len(), wanted);
        let tail = &op_names(&merged.uops)[block..merged.body_len];
        assert_eq!(
            tail,
            [
                "LOAD_INT",
                "MUL_INT_CONST",
                "CONST_INT",
                "ADD_INT",
                "STORE",
                "JUMP_TOP"
            ]
        );
        assert_eq!(merged.uops[merged.body_len - 1].target as usize, start);
        // The guard that left for the odd step goes to the block; nothing enters the old stub.
        let into_block: Vec<usize> = (0..merged.body_len)
            .filter(|&i| {
                super::has_target(&merged.uops[i]) && merged.uops[i].target as usize == block
            })
            .collect();
        assert_eq!(into_block.len(), 1);
        assert!(into_block[0] >= start);
        // The side trace's exits come after the loop's, with what they proved.
        let n = looped.exit_pcs.len();
        assert_eq!(merged.exit_pcs.len(), n + side.exit_pcs.len() - 1);
        assert_eq!(
            &merged.exit_pcs[n..],
            &side.exit_pcs[..side.exit_pcs.len() - 1]
        );
        assert_eq!(merged.exit_locals[n], side.exit_locals[0]);
        for (i, u) in merged.uops.iter().enumerate() {
            if super::has_target(u) {
                let t = &merged.uops[u.target as usize];
                assert!(i < merged.body_len, "only the body jumps or exits");
                if u.target as usize >= merged.body_len {
                    assert!(matches!(t.op, op::EXIT_TRACE | op::RESET_STACK));
                }
            }
            if u.op == op::EXIT_TRACE {
                let e = (u.arg0 & 0xffff) as usize;
                assert_eq!(merged.exit_pcs[e] as u64, u.arg0 >> 32, "micro-op {i}");
            }
        }
        assert_eq!(merged.merged_branches(), 1);
        assert_eq!(merged.loop_body_entry(&side), Some(start));
    }

    #[test]
    fn a_side_trace_that_does_not_end_at_the_head_or_a_preamble_exit_is_not_merged() {
        let (looped, side, exit) = collatz();
        assert!(looped.merge_branch(exit, &side, 3).is_none(), "another pc");
        // The preamble's exit to the odd step (the first one to pc 15).
        let preamble_exit = looped.exit_pcs.iter().position(|&pc| pc == 15).unwrap();
        assert_ne!(preamble_exit, exit);
        assert!(looped.merge_branch(preamble_exit, &side, 0).is_none());
        // A side trace that proved less than the body assumes.
        let mut unproved = side.clone();
        let end = unproved.end_exit.unwrap();
        unproved.exit_locals[end] = vec![Ty::Unknown; unproved.exit_locals[end].len()];
        assert!(looped.merge_branch(exit, &unproved, 0).is_none());
    }

    #[test]
    fn merges_stop_at_the_limit() {
        let (looped, side, exit) = collatz();
        let mut t = looped;
        for k in 0..super::MAX_MERGED_BRANCHES {
            // Each merge takes the same exit's side trace again through a fresh exit: the
            // first merged block's exits are new exits of the loop.
            let stub_exit = if k == 0 { exit } else { t.exit_pcs.len() - 1 };
            match t.merge_branch(stub_exit, &side, 0) {
                Some(m) => t = m,
                None => break,
            }
        }
        assert!(t.merged_branches() <= super::MAX_MERGED_BRANCHES);
        assert!(t.merge_branch(exit, &side, 0).is_none());
    }

    #[test]
    fn detached_undoes_what_attaching_wrote() {
        let (looped, _, _) = collatz();
        let mut attached = looped.clone();
        for u in attached.uops.iter_mut().filter(|u| u.op == op::EXIT_TRACE) {
            u.arg0 |= 7 << 16;
            u.arg1 = 0x1000;
        }
        assert_eq!(attached.detached(0, 24).uops, looped.uops);
    }
}
