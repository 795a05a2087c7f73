//! JIT mode: compiles a projected trace with the copy-and-patch runtime. The entry shim
//! comes first; then one stencil instance per micro-op, in trace order, so that micro-op `i`
//! is instance `i + 1` and jump/exit targets map directly onto instances.
//!
//! The stencil set is the host's by default; `CPJIT_STENCILS=<triple>` (or
//! [`crate::Vm::with_stencils`]) selects any set compiled for this process's ABI, e.g.
//! the Apple AArch64 stencils in a Linux aarch64 process.
//!
//! Another compiler can take copy-and-patch's place ([`TraceCompiler`], installed with
//! [`crate::Config::compiler`]), e.g. the benchmark's LLVM JIT of the same stencil IR. Its
//! code must keep the stitched code's contract: entered through the C-ABI shim
//! `int64_t (*)(struct cpjit_frame *, uint64_t *)`, leaving with the same exit statuses and
//! frame fields, and reachable from other traces' link slots at a body address that takes
//! the ops' own calling convention ([`CompiledTrace::from_external`]).

use crate::abi::Frame;
use crate::ops;
use crate::trace::Trace;
use cpjit_model::StencilSet;
pub use cpjit_runtime::EntryFn;
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target};
use std::any::Any;
use std::fmt::Write as _;

/// A compiler of traces: copy-and-patch ([`Backend`]) or one provided from outside the VM
/// (set [`crate::Config::compiler`]).
pub trait TraceCompiler {
    /// What the compiler is, for listings and errors (e.g. `"copy-and-patch"`).
    fn name(&self) -> &str;

    /// Compiles `trace` (its `EXIT_TRACE` operands already name the executor's link slots).
    /// An error makes the VM stop tracing the function, as a failed copy-and-patch would.
    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String>;
}

impl std::fmt::Debug for dyn TraceCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceCompiler({})", self.name())
    }
}

/// The stencil sets linked into this binary (those whose ABI this process has).
pub fn available_sets() -> Vec<&'static StencilSet<'static>> {
    crate::stencil_sets::linked()
}

/// The set [`Backend::host`] stitches: the one `CPJIT_STENCILS` names (the test matrix sets
/// it per row), else the host's own.
pub fn selected_set() -> Result<&'static StencilSet<'static>, String> {
    match std::env::var("CPJIT_STENCILS") {
        Ok(triple) => set_for(&triple).ok_or_else(|| {
            format!(
                "CPJIT_STENCILS={triple}: no such stencil set in this binary (linked: {})",
                linked_names()
            )
        }),
        Err(_) => crate::stencil_sets::host().ok_or_else(|| {
            format!(
                "no stencil set for this host (linked: {}); run `cargo xtask build-stencils`",
                linked_names()
            )
        }),
    }
}

/// The set for `triple`, if linked.
pub fn set_for(triple: &str) -> Option<&'static StencilSet<'static>> {
    available_sets().into_iter().find(|s| s.target == triple)
}

/// A copy-and-patch compiler of traces for one stencil set.
pub struct Backend {
    jit: Jit<'static>,
    set: &'static StencilSet<'static>,
    /// Stencil index of each op (by op id), if the set has it.
    stencils: Vec<Option<usize>>,
}

impl Backend {
    /// The set named by `CPJIT_STENCILS`, else the host's.
    pub fn host() -> Result<Backend, String> {
        Backend::host_with(JitOptions::default())
    }

    /// [`Backend::host`] with explicit runtime options (perf map, GDB, listings).
    pub fn host_with(options: JitOptions) -> Result<Backend, String> {
        Backend::with_options(selected_set()?, options)
    }

    pub fn new(set: &'static StencilSet<'static>) -> Result<Backend, String> {
        Backend::with_options(set, JitOptions::default())
    }

    /// A backend for `set` whose runtime has `options`.
    pub fn with_options(
        set: &'static StencilSet<'static>,
        options: JitOptions,
    ) -> Result<Backend, String> {
        // Unwind information needs every stencil's layout: refuse up front rather than
        // have every trace fail to compile (and silently stay interpreted).
        let unknown = options
            .unwind
            .into_iter()
            .flatten()
            .find_map(|f| match f.layout {
                cpjit_model::FrameLayout::Unknown(why) => Some((f.stencil, why)),
                cpjit_model::FrameLayout::Functions(_) => None,
            });
        if let Some((stencil, why)) = unknown {
            return Err(format!(
                "stencil set {}: unwind information needs frame layouts, and `{stencil}` has none: {why}",
                set.target
            ));
        }
        let jit = Jit::with_options(set, resolve, options)
            .map_err(|e| format!("stencil set {}: {e}", set.target))?;
        let stencils = ops::OPS.iter().map(|o| set.index_of(o.stencil)).collect();
        Ok(Backend { jit, set, stencils })
    }

    pub fn set(&self) -> &'static StencilSet<'static> {
        self.set
    }

    /// Stitches `trace` into executable code.
    pub fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        let mut b = self.jit.trace();
        let shim = b.push_shim().map_err(|e| e.to_string())?;
        let instance =
            |uop_index: u32| Target::Instance(InstanceId::from_index(uop_index as usize + 1));
        let mut names = Vec::with_capacity(trace.uops.len());
        for (i, u) in trace.uops.iter().enumerate() {
            let info = ops::info(u.op);
            let index = self.stencils[u.op as usize].ok_or_else(|| {
                format!(
                    "stencil set {} has no stencil {} (micro-op {i})",
                    self.set.target, info.stencil
                )
            })?;
            let stencil = &self.set.stencils[index];
            let operands = stencil
                .operands
                .iter()
                .map(|name| match *name {
                    "ARG0" => Ok(u.arg0),
                    "ARG1" => Ok(u.arg1),
                    other => Err(format!(
                        "stencil {} has an unknown operand {other}",
                        stencil.name
                    )),
                })
                .collect::<Result<Vec<u64>, String>>()?;
            let targets = stencil
                .targets
                .iter()
                .map(|name| match *name {
                    "JUMP_TARGET" | "EXIT_TARGET" => Ok(instance(u.target)),
                    other => Err(format!(
                        "stencil {} has an unknown jump target {other}",
                        stencil.name
                    )),
                })
                .collect::<Result<Vec<Target>, String>>()?;
            b.push(index, &operands, &targets)
                .map_err(|e| format!("micro-op {i} ({}): {e}", info.name))?;
            names.push(info.name);
        }
        let compiled = b.finish().map_err(|e| e.to_string())?;
        let entry = compiled.entry_fn(shim);
        Ok(CompiledTrace {
            entry,
            names,
            code: Code::Stitched(compiled),
        })
    }
}

impl TraceCompiler for Backend {
    fn name(&self) -> &str {
        "copy-and-patch"
    }

    fn compile(&self, trace: &Trace) -> Result<CompiledTrace, String> {
        Backend::compile(self, trace)
    }
}

fn linked_names() -> String {
    let names: Vec<&str> = available_sets().iter().map(|s| s.target).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Helper addresses for the stencils' external symbols.
fn resolve(name: &str) -> Option<u64> {
    crate::helpers::symbols()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a as u64)
}

/// A trace in executable memory.
pub struct CompiledTrace {
    entry: EntryFn,
    /// Micro-op names, for listings (stitched traces only).
    names: Vec<&'static str>,
    code: Code,
}

/// Where a compiled trace's code lives.
enum Code {
    /// Stitched by copy-and-patch; the arena block is freed with it.
    Stitched(cpjit_runtime::Trace),
    /// Compiled by another [`TraceCompiler`]; `owner` keeps the code mapped.
    External {
        body_address: u64,
        code_bytes: usize,
        compiler: String,
        _owner: Box<dyn Any>,
    },
}

impl CompiledTrace {
    /// A trace compiled outside the VM, from its entry points and whatever keeps its code
    /// alive (`owner` is dropped with the trace, after the VM stopped using it).
    ///
    /// `compiler` names it in listings; `code_bytes` is its size as far as known (0 if not).
    ///
    /// # Safety
    /// - `entry` must be the trace's C-ABI shim: called with a live frame and its value-stack
    ///   pointer, it runs the trace's micro-ops from the first one and returns an exit status
    ///   (`EXIT_SIDE`, `EXIT_RETURN`, `EXIT_ERROR`) with the frame fields set exactly as the
    ///   ops of `templates/vm/ops.def` set them.
    /// - `body_address` must be the first micro-op's code, callable with the ops' calling
    ///   convention (`CPJIT_CC`, arguments `frame`, `sp`): other traces' `EXIT_TRACE` tail-call
    ///   it through their link slots.
    /// - The code must stay executable, unchanged, for as long as `owner` lives.
    pub unsafe fn from_external(
        compiler: &str,
        entry: EntryFn,
        body_address: u64,
        code_bytes: usize,
        owner: Box<dyn Any>,
    ) -> CompiledTrace {
        CompiledTrace {
            entry,
            names: Vec::new(),
            code: Code::External {
                body_address,
                code_bytes,
                compiler: compiler.to_string(),
                _owner: owner,
            },
        }
    }

    /// Runs the trace on `frame` from its first micro-op.
    ///
    /// # Safety
    /// `frame` must be a live frame of the function the trace was built for, with `sp` its
    /// value-stack pointer.
    pub unsafe fn run(&self, frame: *mut Frame, sp: *mut u64) -> i64 {
        (self.entry)(frame as *mut core::ffi::c_void, sp)
    }

    /// The C-ABI entry shim (what [`CompiledTrace::run`] calls).
    pub fn entry(&self) -> EntryFn {
        self.entry
    }

    /// The address of the first micro-op (after the entry shim), where links jump to.
    pub fn body_address(&self) -> u64 {
        match &self.code {
            Code::Stitched(trace) => trace.entry(InstanceId::from_index(1)) as u64,
            Code::External { body_address, .. } => *body_address,
        }
    }

    pub fn code_bytes(&self) -> usize {
        match &self.code {
            Code::Stitched(trace) => trace.code_bytes().len(),
            Code::External { code_bytes, .. } => *code_bytes,
        }
    }

    /// The runtime's listing of the stitched code ([`cpjit_runtime::Trace::listing`]:
    /// instance boundaries, stencil names, every hole's value) when the backend keeps
    /// listings; else the machine code of each instance, in hex, with its micro-op's name
    /// (for an external compiler's trace: its name, size and addresses).
    pub fn listing(&self) -> String {
        let trace = match &self.code {
            Code::Stitched(trace) => trace,
            Code::External {
                body_address,
                code_bytes,
                compiler,
                ..
            } => {
                return format!(
                    "  machine code: {code_bytes} bytes by {compiler}, entry {:#x}, body {body_address:#x}\n",
                    self.entry as usize
                )
            }
        };
        if let Some(listing) = trace.listing() {
            let mut s = String::with_capacity(listing.len() + 64 * self.names.len());
            write!(
                s,
                "  machine code: {} bytes; micro-ops by instance:",
                trace.code_bytes().len()
            )
            .unwrap();
            for (i, name) in self.names.iter().enumerate() {
                write!(s, " [{}] {name}", i + 1).unwrap();
            }
            s.push('\n');
            s.push_str(listing);
            return s;
        }
        let code = trace.code_bytes();
        let offsets = trace.instance_offsets();
        let mut s = format!("  machine code: {} bytes\n", code.len());
        for (i, &start) in offsets.iter().enumerate() {
            let end = offsets.get(i + 1).map_or(code.len(), |&e| e as usize);
            let name = if i == 0 {
                "cpjit_entry"
            } else {
                self.names[i - 1]
            };
            write!(s, "  {start:6x}  {name:<24}").unwrap();
            for b in &code[start as usize..end.max(start as usize)] {
                write!(s, " {b:02x}").unwrap();
            }
            s.push('\n');
        }
        s
    }
}
