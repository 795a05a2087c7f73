//! Programs loaded together: many programs compiled into one of the kit's `TraceBatch`es,
//! whose code is published at once (on Linux without protection keys one `pwrite` for the
//! batch instead of one per program, the floor of a short program's compile) and flushed
//! once. Each program still becomes its own [`Compiled`], with its own trace, dropped
//! independently of the others. rbpf has no such API; the per-program one is unchanged.
//!
//! A batch is all or nothing: the first program the verifier or the kit refuses fails the
//! whole batch with [`Error::InBatch`], which names the program's index in the batch (and,
//! through its source, the instruction's), and no program of it is compiled.

use crate::helper::HelperMap;
use crate::jit::{Compiled, Compiler};
use crate::scan::Plan;
use crate::{verifier, EbpfVm, Error, Helper};
use std::borrow::Cow;
use std::collections::HashMap;

impl Compiler {
    /// Verifies (as rbpf 0.4's verifier does) and compiles `programs`, each bytecode with
    /// its helpers, together: one [`Compiled`] per program, in order, each exactly what
    /// [`Compiler::compile`] gives for it alone, but published with one write and one
    /// instruction-cache flush for all. The first program refused fails the batch with
    /// [`Error::InBatch`] naming its index (and compiles none).
    ///
    /// ```no_run
    /// # fn demo(filters: &[Vec<u8>]) -> Result<(), ebpf_jit::Error> {
    /// use std::collections::HashMap;
    /// let compiler = ebpf_jit::Compiler::new()?;
    /// let helpers = HashMap::new();
    /// let batch: Vec<_> = filters.iter().map(|f| (&f[..], &helpers)).collect();
    /// let compiled = compiler.compile_batch(&batch)?;
    /// let verdict = compiled[0].run(&mut [0u8; 64], &mut [])?;
    /// # let _ = verdict; Ok(()) }
    /// ```
    pub fn compile_batch(
        &self,
        programs: &[(&[u8], &HashMap<u32, Helper>)],
    ) -> Result<Vec<Compiled>, Error> {
        self.batch(
            programs
                .iter()
                .map(|&(prog, helpers)| Ok((prog, helpers, Cow::Owned(verifier::check(prog)?)))),
            programs.len(),
        )
    }

    /// Compiles `programs` (each a verified bytecode, its helpers and its plan, or why it was
    /// refused) into one batch.
    fn batch<'p, H: HelperMap + 'p>(
        &self,
        programs: impl Iterator<Item = Result<(&'p [u8], &'p H, Cow<'p, Plan>), Error>>,
        len: usize,
    ) -> Result<Vec<Compiled>, Error> {
        let mut batch = self.jit.batch();
        // Each program's pinned registers and helpers' state, until its trace is made.
        let mut parts = Vec::with_capacity(len);
        for (k, program) in programs.enumerate() {
            let in_batch = |source| Error::InBatch {
                program: k,
                source: Box::new(source),
            };
            let (prog, helpers, scan) = program.map_err(in_batch)?;
            let pins = &scan.pins[..usize::from(scan.pin_count)];
            self.lower(
                prog,
                helpers,
                pins,
                &scan,
                || batch.trace(),
                |_, pinned, kept| {
                    parts.push((pinned, kept));
                    Ok(())
                },
            )
            .map_err(in_batch)?;
        }
        let traces = batch.finish().map_err(|e| match e {
            cpjit_runtime::Error::InBatch { trace, source } => Error::InBatch {
                program: trace,
                source: Box::new(Error::Jit(*source)),
            },
            e => Error::Jit(e),
        })?;
        Ok(traces
            .into_iter()
            .zip(parts)
            .map(|(trace, (pinned, kept))| Compiled {
                trace,
                pinned,
                _helpers: kept,
            })
            .collect())
    }
}

impl EbpfVm<'_> {
    /// Compiles the programs of `vms` together (see [`Compiler::compile_batch`]), with this
    /// thread's compiler (as [`EbpfVm::jit_compile`]): afterwards each runs with
    /// [`EbpfVm::execute_jit`] as if compiled alone. They were verified when made, so only
    /// the kit can refuse one here ([`Error::InBatch`] naming its index); then none of them
    /// is changed.
    pub fn jit_compile_batch(vms: &mut [EbpfVm<'_>]) -> Result<(), Error> {
        crate::with_thread_compiler(|c| EbpfVm::jit_compile_batch_with(c, vms))
    }

    /// [`EbpfVm::jit_compile_batch`] with `compiler`.
    pub fn jit_compile_batch_with(
        compiler: &Compiler,
        vms: &mut [EbpfVm<'_>],
    ) -> Result<(), Error> {
        let programs = vms
            .iter()
            .map(|vm| Ok((vm.prog, &vm.helpers, Cow::Borrowed(&vm.scan))));
        let compiled = compiler.batch(programs, vms.len())?;
        for (vm, c) in vms.iter_mut().zip(compiled) {
            vm.compiled = Some(c);
        }
        Ok(())
    }
}
