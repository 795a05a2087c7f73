//! A lowering as a compiler other than copy-and-patch takes it ([`Backend::lower_stencils`]):
//! the same instances, each with its stencil's name and the values of its holes, so that
//! e.g. the benchmark's LLVM JIT compiles the very members, pinning and glue the stitched
//! code runs; and the trace it compiles entered where the VM enters a stitched one
//! ([`CompiledTrace::from_external_lowering`]: loop body, pinned entry, pinned links).

use super::exit_bits::ExitBits;
use super::{
    Backend, CompiledTrace, EntryFn, Jump, LoweredId, LoweredInstance, Lowering, PinnedEntry,
    MAX_OPERANDS, PINNED_LINK_OFFSET,
};
use crate::abi::Inst;
use crate::pinning::Pins;
use crate::trace::Trace;
use std::any::Any;

/// One lowered instance with its holes' values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoweredStencil {
    /// The stencil (a member's own name for a register-cached one).
    pub stencil: &'static str,
    /// Each operand's name and value.
    pub operands: Vec<(&'static str, u64)>,
    /// Each jump target's name and the instance it jumps to.
    pub targets: Vec<(&'static str, LoweredId)>,
}

/// A trace lowered as copy-and-patch stitches it, for another compiler.
#[derive(Clone, Debug)]
pub struct LoweredTrace {
    pub lowering: Lowering,
    /// By lowered instance (the entry shim, which comes first, is not listed).
    pub instances: Vec<LoweredStencil>,
    /// The instances the VM enters from outside the trace (its first, a loop body, the
    /// pinned entry): their code must stay addressable.
    pub entries: Vec<LoweredId>,
}

impl LoweredInstance {
    /// The micro-op whose operands the instance's holes take: its own, or for glue the
    /// local a `PIN`/`UNPIN` copies or the pinned link slot a `LINK` reads, as `arg0`
    /// (the word after the one `EXIT_TRACE` reads: [`PINNED_LINK_OFFSET`]).
    pub(super) fn operand_source<'a>(&self, trace: &'a Trace, glue: &'a mut Inst) -> &'a Inst {
        match self.uop {
            Some(i) => &trace.uops[i],
            None => {
                // (By reference: a copy of the micro-op per instance cost more than the
                // glue's own, made only for glue.)
                *glue = Inst {
                    arg0: match self.link {
                        Some(exit) => trace.uops[exit].arg1 + PINNED_LINK_OFFSET,
                        None => self.local.unwrap_or(0),
                    },
                    ..Inst::default()
                };
                glue
            }
        }
    }
}

impl Lowering {
    /// The instance jump target `jump` of micro-op `u` goes to.
    pub(super) fn jump_target(&self, jump: Jump, u: &Inst) -> LoweredId {
        match jump {
            Jump::Jump => self.instance_of_uop[u.target as usize],
            Jump::Exit => self.exit_instance(u.target as usize),
        }
    }

    /// Where the VM enters the compiled lowering, by the address `address` gives each
    /// instance: a peeled loop's body, the pinned entry, and by exit whether its stub
    /// starts with a `LINK`. (Measured and dropped, wave 36: set in place in the compiled
    /// trace rather than returned and moved, the compile took 0.18 to 0.44 % more
    /// instructions.)
    pub(super) fn entry_points(
        &self,
        trace: &Trace,
        address: impl Fn(LoweredId) -> u64,
    ) -> (Option<u64>, Option<PinnedEntry>, ExitBits) {
        let loop_body = self.loop_body(trace).map(&address);
        let pinned = self.pinned_entry.map(|k| PinnedEntry {
            pins: Pins::new(&self.pinned, &self.pinned_held).with_floats(self.pinned_floats),
            address: address(k),
            inherited: self.inherited,
        });
        // Only a trace with pinned locals has LINKs.
        let mut links_pinned = ExitBits::default();
        for &exit in &self.links {
            let index = (trace.uops[exit].arg0 & 0xffff) as usize;
            if index < trace.exit_pcs.len() {
                links_pinned.insert(index);
            }
        }
        (loop_body, pinned, links_pinned)
    }

    /// The instance where links into a peeled loop's body enter: its first `PIN`, else its
    /// first micro-op.
    fn loop_body(&self, trace: &Trace) -> Option<LoweredId> {
        let at = trace.loop_body_start()?;
        Some(self.body_entry.unwrap_or(self.instance_of_uop[at]))
    }
}

impl Backend {
    /// Lowers `trace` as [`Backend::compile`] does and lists every instance's stencil and
    /// hole values, for a compiler other than copy-and-patch.
    pub fn lower_stencils(&self, trace: &Trace) -> Result<LoweredTrace, String> {
        let lowering = self.lower(trace)?;
        if self.check {
            self.check_cache_states(trace, &lowering)
                .map_err(|e| format!("stencil set {}: {e}", self.set.target))?;
        }
        let instances = lowering
            .instances
            .iter()
            .map(|inst| {
                let plan = &self.plans[inst.stencil];
                let stencil = &self.set.stencils[inst.stencil];
                let mut glue = Inst::default();
                let u = inst.operand_source(trace, &mut glue);
                let mut values = [0; MAX_OPERANDS];
                let n_operands = plan.operands_of(u, lowering.exit_pins, &mut values)?;
                let operands = stencil
                    .operands
                    .iter()
                    .copied()
                    .zip(values[..n_operands].iter().copied())
                    .collect();
                // Glue has no micro-op, so no jump targets (as the stitched code).
                let n_targets = if inst.uop.is_some() {
                    plan.n_targets as usize
                } else {
                    0
                };
                let targets = stencil
                    .targets
                    .iter()
                    .zip(&plan.targets[..n_targets])
                    .map(|(&name, &jump)| (name, lowering.jump_target(jump, u)))
                    .collect();
                Ok(LoweredStencil {
                    stencil: plan.name,
                    operands,
                    targets,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut entries = vec![LoweredId(0)];
        entries.extend(lowering.loop_body(trace));
        entries.extend(lowering.pinned_entry);
        entries.sort();
        entries.dedup();
        Ok(LoweredTrace {
            lowering,
            instances,
            entries,
        })
    }
}

impl CompiledTrace {
    /// A trace compiled outside the VM from `lowered` ([`Backend::lower_stencils`]), entered
    /// as the stitched code of the same lowering is: `address` gives the code of each of
    /// `lowered.entries`.
    ///
    /// # Safety
    /// As [`CompiledTrace::from_external`], and `address(k)` for each `k` in
    /// `lowered.entries` must be instance `k`'s code, taking the ops' calling convention
    /// with the registers its stencil's entry state and the pinning say.
    pub unsafe fn from_external_lowering(
        compiler: &str,
        entry: EntryFn,
        trace: &Trace,
        lowered: &LoweredTrace,
        address: impl Fn(LoweredId) -> u64,
        code_bytes: usize,
        owner: Box<dyn Any>,
    ) -> CompiledTrace {
        let body = address(LoweredId(0));
        // SAFETY: the caller upholds this function's contract, which includes
        // `from_external`'s.
        let mut compiled =
            unsafe { CompiledTrace::from_external(compiler, entry, body, code_bytes, owner) };
        let lowering = &lowered.lowering;
        let (loop_body, pinned, links_pinned) = lowering.entry_points(trace, address);
        compiled.loop_body_address = loop_body;
        compiled.pinned_locals = lowering.pinned.len();
        compiled.pinned = pinned;
        compiled.links_pinned = links_pinned;
        compiled
    }
}
