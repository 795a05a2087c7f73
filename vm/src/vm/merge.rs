//! A hot branch merged into its loop ([`crate::trace::Trace::merge_branch`]): the loop's
//! executor is replaced, under the same index, by one running the loop trace with the side
//! trace as a block of its body, and every link into or out of it made again.

use super::*;

impl Vm {
    /// Merges side trace `side` (projected from exit `exit` of executor `parent` of function
    /// `f`, not attached) into its parent when the parent is a loop trace it can join
    /// ([`Trace::merge_branch`]), and returns whether it did (or tried, and the compile
    /// failed: the function then tiers up no more, as for any trace). The new executor takes
    /// the parent's index, so the back-edge, the loop-head map and every exit's
    /// `(executor, index)` still name it, and the exits keep their indices, counters and side
    /// traces; the exits of other traces linked into the loop, and the loop's own exits to
    /// their side traces, are linked again. The old executor is kept (a frame may run its
    /// code) with its links cleared, so that its exits all return to the VM.
    pub(super) fn merge_into_loop(
        &self,
        f: usize,
        parent: usize,
        exit: usize,
        side: &Trace,
    ) -> bool {
        if !self.config.merge_branches {
            return false;
        }
        let st = &self.funcs[f];
        let old = st.executors.borrow()[parent].clone();
        let ExecutorKind::Loop { head, .. } = old.kind else {
            return false;
        };
        if !old.valid.get() {
            return false;
        }
        let sites = old.call_sites.as_ptr() as u64;
        let detached = old.trace.detached(sites, size_of::<CallSite>() as u64);
        let Some(mut merged) = detached.merge_branch(exit, side, head) else {
            return false;
        };
        let links = LinkBlocks::new(merged.exit_pcs.len(), |_| ExitLink::default());
        let call_sites = self.attach_operands(&mut merged, parent, &links);
        st.compiles.set(st.compiles.get() + 1);
        let Some(compiled) = self.compile_or_stop_tiering(f, &merged) else {
            return true;
        };
        let exits: Vec<ExitState> = (0..merged.exit_pcs.len())
            .map(|k| {
                let state = ExitState::default();
                if let Some(was) = old.exits.get(k) {
                    state.taken.set(was.taken.get());
                    state.side.set(was.side.get());
                    state.abandoned.set(was.abandoned.get());
                }
                state
            })
            .collect();
        // Nothing leaves through the merged exit again but the old code.
        exits[exit].abandoned.set(true);
        self.list_merged(f, parent, exit, &merged, compiled.as_ref());
        let new_deps: Vec<u64> = side
            .deps
            .iter()
            .copied()
            .filter(|g| !old.trace.deps.contains(g))
            .collect();
        st.executors.borrow_mut()[parent] = Rc::new(Executor {
            kind: old.kind,
            depth: old.depth,
            links,
            linked_from: RefCell::new(Vec::new()),
            stop_pc: old.stop_pc,
            trace: merged,
            exits,
            compiled,
            valid: Cell::new(true),
            call_sites,
        });
        for g in new_deps {
            self.global_deps
                .borrow_mut()
                .entry(g)
                .or_default()
                .push((f, parent));
        }
        // (Its exits' pcs stay: the old code may still be running, and leaves through them.)
        for link in old.links.iter() {
            link.link.set(0);
            link.pinned.set(0);
        }
        old.valid.set(false);
        self.relink(f, parent, &old);
        st.retired.borrow_mut().push(old);
        true
    }

    /// Links again what was linked to or from `old`, which executor `index` of function `f`
    /// has replaced: the exits of other traces into it, and its exits to their side traces.
    fn relink(&self, f: usize, index: usize, old: &Executor) {
        let executors = &self.funcs[f].executors;
        for &(from, k) in old.linked_from.borrow().iter() {
            if from == index {
                continue;
            }
            {
                let src = &executors.borrow()[from];
                src.links[k].link.set(0);
                src.links[k].pinned.set(0);
            }
            self.link(f, from, k, index);
        }
        for (k, state) in old.exits.iter().enumerate() {
            if let Some(side) = state.side.get() {
                self.link(f, index, k, side);
            }
        }
    }

    /// Counts a merged loop trace and lists it (`dump_traces`).
    fn list_merged(
        &self,
        f: usize,
        index: usize,
        exit: usize,
        merged: &Trace,
        compiled: Option<&crate::jit::CompiledTrace>,
    ) {
        {
            let mut s = self.stats.borrow_mut();
            s.merged_branches += 1;
            s.uops += merged.uops.len() as u64;
            s.code_bytes += compiled.map_or(0, |c| c.code_bytes() as u64);
        }
        if self.config.dump_traces {
            let what = format!("again, exit {exit}'s side trace merged in");
            self.dump_trace(f, &format!("trace {index}"), &what, merged, compiled);
        }
    }
}
