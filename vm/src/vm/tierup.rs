//! Tier-up: recording hot paths, attaching executors to functions, linking their exits,
//! and invalidating them when a folded global changes.

use super::*;
use crate::jit::CompiledTrace;

impl Vm {
    /// A back-edge became hot: trace its loop. Returns `Some(v)` if the function returned
    /// `v` while the loop was being recorded.
    pub(super) fn on_hot_loop(&self, f: usize, frame: *mut Frame) -> Result<Option<u64>, ()> {
        let st = &self.funcs[f];
        // SAFETY: live frame.
        let (head, backedge) = unsafe { ((*frame).pc as u32, (*frame).aux as u32) };
        let mut inst = st.get(backedge as usize);
        inst.arg1 = 0; // restart the counter (back-off if nothing gets installed)
        st.set(backedge as usize, inst);
        if st.jit_failed.get() {
            return Ok(None);
        }
        let kind = ExecutorKind::Loop {
            head,
            backedge,
            original: inst,
        };
        self.record_and_install(f, frame, head as i64, kind)
    }

    /// Records from the frame's pc until `stop_pc` (or a return, another loop, or the length
    /// limit), builds a trace and attaches it. Returns `Some(v)` if the function returned `v`
    /// while recording.
    pub(super) fn record_and_install(
        &self,
        f: usize,
        frame: *mut Frame,
        stop_pc: i64,
        kind: ExecutorKind,
    ) -> Result<Option<u64>, ()> {
        let st = &self.funcs[f];
        let mut records = vec![Record::default(); self.config.max_trace_len];
        let mut len = 0i64;
        let mut heads = vec![0u8; self.program.functions[f].code.len()];
        for &pc in st.loop_heads.borrow().keys() {
            heads[pc as usize] = 1;
        }
        // SAFETY: live frame; `records` has `max_trace_len` entries.
        let status = unsafe {
            vm_record(
                frame,
                (*frame).sp,
                st.code_ptr(),
                records.as_mut_ptr(),
                records.len() as i64,
                &mut len,
                stop_pc,
                heads.as_ptr(),
            )
        };
        records.truncate(len as usize);
        // SAFETY: `frame` is the live frame the recording interpreter just left.
        let end_pc = unsafe { (*frame).pc } as u32;
        let (end, returned) = match status {
            // SAFETY: as above.
            EXIT_RETURN => (End::Return, Some(unsafe { (*frame).ret })),
            EXIT_ERROR => return self.raise(f, frame),
            EXIT_RECORDED
                if matches!(kind, ExecutorKind::Loop { .. }) && end_pc as i64 == stop_pc =>
            {
                (End::JumpTop, None)
            }
            EXIT_RECORDED | EXIT_RECORD_FULL => (End::Exit(end_pc), None),
            other => panic!("vm_record returned unknown status {other}"),
        };
        // A loop trace must close, or end where another loop's executor starts (it links
        // there). Otherwise the recording is dropped and the back-edge backs off
        // exponentially before it is traced again.
        let closes = match (kind, end) {
            (ExecutorKind::Loop { .. }, End::Exit(pc)) => heads[pc as usize] != 0,
            (ExecutorKind::Loop { .. }, End::Return) => false,
            _ => true,
        };
        if !closes || records.is_empty() {
            self.stats.borrow_mut().recordings_abandoned += 1;
            if let ExecutorKind::Loop { backedge, .. } = kind {
                let mut backoff = st.backoff.borrow_mut();
                let n = backoff.entry(backedge).or_insert(0);
                *n = (*n + 1).min(16);
                let mut inst = st.get(backedge as usize);
                if inst.op == op::JUMP_BACKWARD {
                    // Counts up from a negative value (the counter is compared as i64).
                    inst.arg1 = (-(self.config.backedge_threshold << *n)) as u64;
                    st.set(backedge as usize, inst);
                }
            }
            return Ok(returned);
        }
        self.install(f, kind, stop_pc, &records, end);
        Ok(returned)
    }

    /// Projects a recording of function `f` into a trace, compiles it and installs it as
    /// executor `kind`: a loop's back-edge enters it, an entry trace is where calls go, a
    /// side trace is linked to its parent's exit. A recording that does not project is
    /// abandoned; a trace that does not compile stops the function tiering up.
    pub(super) fn install(
        &self,
        f: usize,
        kind: ExecutorKind,
        stop_pc: i64,
        records: &[Record],
        end: End,
    ) {
        let st = &self.funcs[f];
        let Some(mut trace) = self.project_recording(f, kind, records, end) else {
            self.stats.borrow_mut().recordings_abandoned += 1;
            return;
        };
        if let ExecutorKind::Side { parent, exit } = kind {
            if self.merge_into_loop(f, parent, exit, &trace) {
                return;
            }
        }
        // Link blocks live as long as the executor (never moved), one per exit: below 2 GiB
        // where the target allows, so that the exit stubs take their address as an `imm32`.
        let links = LinkBlocks::new(trace.exit_pcs.len(), |_| ExitLink::default());
        let index = st.executors.borrow().len();
        if index > 0xffff {
            // Exits name their executor in 16 bits.
            self.stats.borrow_mut().recordings_abandoned += 1;
            return;
        }
        let call_sites = self.attach_operands(&mut trace, index, &links);
        st.compiles.set(st.compiles.get() + 1);
        let Some(compiled) = self.compile_or_stop_tiering(f, &trace) else {
            return;
        };
        self.count_and_list(f, index, kind, &trace, compiled.as_ref());
        let stop_pc = match kind {
            ExecutorKind::Loop { head, .. } => head as i64,
            _ => stop_pc,
        };
        let exits = trace
            .exit_pcs
            .iter()
            .map(|_| ExitState::default())
            .collect();
        let depth = match kind {
            ExecutorKind::Side { parent, .. } => st.executors.borrow()[parent].depth + 1,
            _ => 0,
        };
        st.executors.borrow_mut().push(Rc::new(Executor {
            kind,
            depth,
            links,
            linked_from: RefCell::new(Vec::new()),
            stop_pc,
            trace,
            exits,
            compiled,
            valid: Cell::new(true),
            call_sites,
        }));
        self.enter_executor(f, index, kind);
    }

    /// The trace projected from a recording of function `f` for executor `kind` (a side
    /// trace from what its parent's exit proved); `None` when it does not project.
    fn project_recording(
        &self,
        f: usize,
        kind: ExecutorKind,
        records: &[Record],
        end: End,
    ) -> Option<Trace> {
        let st = &self.funcs[f];
        let parent = match kind {
            ExecutorKind::Side { parent, exit } => {
                Some((st.executors.borrow()[parent].clone(), exit))
            }
            _ => None,
        };
        let from = parent.as_ref().map(|(e, exit)| (&e.trace, *exit));
        // A side trace starting where its parent started: the parent left again at the same
        // statement, which an inlined call's typed op can do every time (a product beyond
        // the tagged range: no recording shows the callee's types). This one calls the
        // callee instead, whose own traces record what its ops make.
        let start = |e: &Executor| match e.kind {
            ExecutorKind::Side { parent, exit } => {
                Some(st.executors.borrow()[parent].trace.exit_pcs[exit])
            }
            _ => None,
        };
        let again = parent
            .as_ref()
            .is_some_and(|(e, exit)| start(e) == Some(e.trace.exit_pcs[*exit]));
        let inliner = (self.config.inline_calls && !again).then_some(trace::Inliner {
            program: &self.program,
            inlining: &self.inlining,
        });
        let func = &self.program.functions[f];
        let globals = self.global_values();
        let mut trace =
            trace::project(func, &st.code(), records, end, &globals, from, inliner).ok()?;
        // A side trace of an exit that can enter code with the parent's pinned registers live
        // may be compiled to be entered so.
        trace.inherited_pins = parent.as_ref().and_then(|(e, exit)| {
            let c = e.compiled.as_ref()?;
            c.links_pinned(*exit)
                .then(|| c.pinned_entry().map(|p| p.pins))
                .flatten()
        });
        Some(trace)
    }

    /// Points the exits of executor `index`'s trace at their link blocks `links` (which then
    /// hold each exit's `arg0`, read there by the stencils) and its calls at their call
    /// sites: the call sites, which live as long as the executor too.
    pub(super) fn attach_operands(
        &self,
        trace: &mut Trace,
        index: usize,
        links: &[ExitLink],
    ) -> CallSites {
        for u in trace.uops.iter_mut().filter(|u| u.op == op::EXIT_TRACE) {
            let link = &links[(u.arg0 & 0xffff) as usize];
            u.arg1 = link as *const ExitLink as u64;
            u.arg0 |= (index as u64) << 16;
            link.exit_at.set(u.arg0);
        }
        // CALL_JIT's operand points to its own call site (below 2 GiB where the target allows,
        // as the link blocks).
        let calls = &trace.calls;
        let call_sites = CallSites::new(calls.len(), |k| CallSite {
            callee: self.callee(calls[k].func as usize),
            pc: calls[k].pc as i64,
            argc: calls[k].argc as i64,
        });
        // (`GUARD_CALL_DEPTH` names the site of the call it checks for.)
        for u in trace
            .uops
            .iter_mut()
            .filter(|u| u.op == op::CALL_JIT || u.op == op::GUARD_CALL_DEPTH)
        {
            u.arg0 = &call_sites[u.arg0 as usize] as *const CallSite as u64;
        }
        call_sites
    }

    /// The trace compiled (`Some(None)` without a JIT); `None` when it does not compile,
    /// after which function `f` never tiers up again.
    pub(super) fn compile_or_stop_tiering(
        &self,
        f: usize,
        trace: &Trace,
    ) -> Option<Option<CompiledTrace>> {
        let st = &self.funcs[f];
        let compiled = if self.config.fail_compiles {
            Err("compile failure injected by the test configuration".to_string())
        } else {
            match &self.jit {
                Some(backend) => {
                    let t0 = Instant::now();
                    let r = backend.compile(trace);
                    self.stats.borrow_mut().compile_time += t0.elapsed();
                    r.map(Some)
                }
                None => Ok(None),
            }
        };
        if compiled.is_err() {
            // Seed 000's PY_JIT_FAILED: never try this function again.
            st.jit_failed.set(true);
            self.stats.borrow_mut().compile_failures += 1;
            for (pc, inst) in st.code().iter().enumerate() {
                if inst.op == op::JUMP_BACKWARD {
                    st.set(
                        pc,
                        Inst {
                            op: op::JUMP,
                            ..*inst
                        },
                    );
                }
            }
        }
        compiled.ok()
    }

    /// Counts executor `index` of function `f` in the statistics, lists it (with
    /// `dump_traces`) and records the globals it folded.
    fn count_and_list(
        &self,
        f: usize,
        index: usize,
        kind: ExecutorKind,
        trace: &Trace,
        compiled: Option<&CompiledTrace>,
    ) {
        {
            let mut s = self.stats.borrow_mut();
            s.traces += 1;
            s.uops += trace.uops.len() as u64;
            s.inlined_calls += trace.inlined_calls;
            s.pinned_loops += compiled.is_some_and(|c| c.pinned_locals() > 0) as u64;
            s.inherited_pins += compiled
                .and_then(|c| c.pinned_entry())
                .is_some_and(|p| p.inherited) as u64;
            s.code_bytes += compiled.map_or(0, |c| c.code_bytes() as u64);
            match kind {
                ExecutorKind::Loop { .. } => s.loop_traces += 1,
                ExecutorKind::Entry => s.entry_traces += 1,
                ExecutorKind::Side { .. } => s.side_traces += 1,
            }
        }
        if self.config.dump_traces {
            self.dump_trace(
                f,
                &format!("trace {index}"),
                &format!("({kind:?})"),
                trace,
                compiled,
            );
        }
        for &g in &trace.deps {
            self.global_deps
                .borrow_mut()
                .entry(g)
                .or_default()
                .push((f, index));
        }
    }

    /// Lists `trace` of function `f` and its code (`dump_traces`): `name` and `what` on the
    /// heading, around the function's name.
    pub(super) fn dump_trace(
        &self,
        f: usize,
        name: &str,
        what: &str,
        trace: &Trace,
        compiled: Option<&CompiledTrace>,
    ) {
        let func = &self.program.functions[f];
        let mut d = self.trace_dump.borrow_mut();
        d.push_str(&format!("{name} of function {} {what}:\n", func.name));
        d.push_str(&trace.dump(func));
        if let Some(c) = compiled {
            d.push_str(&c.listing());
        }
    }

    /// Makes the code reach executor `index` of function `f`, just installed: a loop's
    /// back-edge enters it, calls of the function enter an entry trace, a side trace is
    /// linked to its parent's exit.
    fn enter_executor(&self, f: usize, index: usize, kind: ExecutorKind) {
        let st = &self.funcs[f];
        match kind {
            ExecutorKind::Loop { head, backedge, .. } => {
                st.loop_heads.borrow_mut().insert(head, index);
                st.set(
                    backedge as usize,
                    Inst {
                        op: op::ENTER_EXECUTOR,
                        target: head,
                        arg0: index as u64,
                        arg1: head as u64,
                    },
                );
            }
            ExecutorKind::Entry => {
                st.entry.set(Some(index));
                // Compiled callers now enter the function's compiled code directly.
                if let Some(c) = &st.executors.borrow()[index].compiled {
                    self.callee(f).code.set(c.body_address());
                }
            }
            ExecutorKind::Side { parent, exit } => {
                st.executors.borrow()[parent].exits[exit]
                    .side
                    .set(Some(index));
                self.link(f, parent, exit, index);
            }
        }
    }

    /// Makes exit `exit` of executor `from` continue in executor `to`: compiled code jumps
    /// there directly from now on.
    pub(super) fn link(&self, f: usize, from: usize, exit: usize, to: usize) {
        let executors = self.funcs[f].executors.borrow();
        let (src, dst) = (&executors[from], &executors[to]);
        if src.links[exit].link.get() != 0 || !dst.valid.get() {
            return;
        }
        if let (Some(source), Some(target)) = (&src.compiled, &dst.compiled) {
            // A path that ends at a loop's head skips the loop's preamble where it has
            // proved what the preamble would.
            let body = (src.trace.end_exit == Some(exit))
                .then(|| dst.trace.loop_body_entry(&src.trace))
                .flatten()
                .and(target.loop_body_address());
            if body.is_some() {
                self.stats.borrow_mut().loop_body_links += 1;
            }
            src.links[exit]
                .link
                .set(body.unwrap_or_else(|| target.body_address()));
            // With the registers live: into the loop body past its PINs, or into a side
            // trace of this exit that inherited them, where both hold the same locals alike.
            let pinned = match (source.pinned_entry(), target.pinned_entry()) {
                (Some(s), Some(t)) if source.links_pinned(exit) && s.pins == t.pins => {
                    let side_of_this_exit = t.inherited
                        && matches!(dst.kind, ExecutorKind::Side { parent, exit: e }
                            if parent == from && e == exit);
                    let loop_body = !t.inherited && body.is_some();
                    (side_of_this_exit || loop_body).then_some(t.address)
                }
                _ => None,
            };
            if let Some(address) = pinned {
                src.links[exit].pinned.set(address);
                self.stats.borrow_mut().pinned_links += 1;
            }
            dst.linked_from.borrow_mut().push((from, exit));
        }
    }

    /// Stores a global; invalidates the executors that folded it. Returns whether any were.
    pub(crate) fn store_global(&self, index: usize, value: u64) -> bool {
        // SAFETY: as in `global_values`.
        unsafe { *self.globals[index].get() = value };
        let deps = self.global_deps.borrow_mut().remove(&(index as u64));
        let mut any = false;
        for (f, e) in deps.unwrap_or_default() {
            any |= self.invalidate(f, e);
        }
        any
    }

    /// Detaches executor `e` of function `f` so that it is never entered again (it may be
    /// running: it leaves at once, and its memory lives as long as the function state).
    pub fn invalidate(&self, f: usize, e: usize) -> bool {
        let st = &self.funcs[f];
        let exec = st.executors.borrow()[e].clone();
        if !exec.valid.replace(false) {
            return false;
        }
        match exec.kind {
            ExecutorKind::Loop {
                head,
                backedge,
                original,
            } => {
                st.loop_heads.borrow_mut().remove(&head);
                st.set(
                    backedge as usize,
                    Inst {
                        arg1: 0,
                        ..original
                    },
                );
            }
            ExecutorKind::Entry => {
                st.entry.set(None);
                // Frames running the code go on (the executor is never freed); new calls
                // go through Rust.
                self.callee(f).code.set(0);
            }
            ExecutorKind::Side { parent, exit } => {
                st.executors.borrow()[parent].exits[exit].side.set(None);
            }
        }
        let executors = st.executors.borrow();
        for &(from, exit) in exec.linked_from.borrow().iter() {
            executors[from].links[exit].link.set(0);
            executors[from].links[exit].pinned.set(0);
        }
        self.stack().epoch += 1;
        self.stats.borrow_mut().invalidations += 1;
        true
    }
}
