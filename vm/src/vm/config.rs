//! How the VM runs ([`Mode`], [`Config`]) and what it counts while it does ([`Stats`]).

use crate::jit::TraceCompiler;
use std::rc::Rc;
use std::time::Duration;

/// How hot code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The bytecode interpreter only.
    Interp,
    /// Traces are built and run by the micro-op interpreter.
    Uops,
    /// Traces are compiled by copy-and-patch.
    Jit,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "interp" => Some(Mode::Interp),
            "uops" => Some(Mode::Uops),
            "jit" => Some(Mode::Jit),
            _ => None,
        }
    }
}

/// Tier-up settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    /// Executions of a back-edge before its loop is traced.
    pub backedge_threshold: i64,
    /// Calls of a function before its entry is traced.
    pub call_threshold: u64,
    /// Times an exit is taken before it gets its own trace.
    pub side_exit_threshold: u64,
    /// Longest recording, in bytecodes.
    pub max_trace_len: usize,
    /// Deepest call nesting before a RecursionError.
    pub max_depth: u32,
    /// Most words of the frame stack (frames of compiled calls live there; a call that does
    /// not fit gets a frame of its own, through Rust). Allocated up to what `max_depth`
    /// frames of the largest function need; the memory is touched only as deep as calls go.
    pub frame_stack_words: usize,
    /// Write printed lines to stdout as they come (else they are only kept).
    pub print_live: bool,
    /// Keep a listing of every compiled trace (see [`super::Vm::trace_dump`]).
    pub dump_traces: bool,
    /// Copy-and-patch traces go to the perf map `/tmp/perf-<pid>.map` (`run --perf-map`).
    pub perf_map: bool,
    /// Copy-and-patch traces are registered with GDB's JIT interface (`run --gdb`).
    pub gdb: bool,
    /// Copy-and-patch traces get unwind information from the stencil set's frame layouts
    /// (`run --unwind`), so that GDB, `perf --call-graph dwarf`, backtraces and panics walk
    /// through them; an error for a set without layouts (Mach-O, COFF).
    pub unwind: bool,
    /// Copy-and-patch traces go to the jitdump file `jit-<pid>.dump` for `perf inject
    /// --jit` (`run --jitdump`).
    pub jitdump: bool,
    /// Testing: make every compile fail, as if the JIT rejected the trace.
    pub fail_compiles: bool,
    /// Traces inline calls of small pure functions ([`crate::inline`]) instead of calling
    /// them (on by default; off, every call in a trace is a `CALL_JIT`).
    pub inline_calls: bool,
    /// Copy-and-patch loop traces keep up to two locals of their body in registers
    /// ([`crate::pinning`]; on by default; `run --no-pin` turns it off).
    pub pin_locals: bool,
    /// A side trace that ends back at its loop's head is merged into the loop trace as a
    /// block of its body ([`crate::trace::Trace::merge_branch`]) instead of being linked to
    /// its exit (on by default; `run --no-merge` turns it off).
    pub merge_branches: bool,
    /// Copy-and-patch checks every lowering against the set's families and the pinning
    /// protocol before stitching it ([`crate::jit::Backend::check_cache_states`]): on by
    /// default in debug builds, off in release builds (the lowering's construction makes
    /// its choices; the checks cost as much as the lowering). The VM's tests turn it on
    /// in every build.
    pub check_lowerings: bool,
    /// In `jit` mode, the compiler of traces in place of copy-and-patch with the host's
    /// stencils (`None`, the default); ignored in the other modes and by
    /// [`super::Vm::with_stencils`]. Its code must keep the stitched code's contract (see
    /// [`crate::jit::CompiledTrace::from_external`]); exits, links and resumption then work
    /// as with copy-and-patch.
    pub compiler: Option<Rc<dyn TraceCompiler>>,
}

impl Config {
    /// The runtime options the copy-and-patch backend gets for `set`: listings for
    /// `dump_traces`, the perf map, GDB registration and unwind information (the set's
    /// generated `FRAMES`) on request.
    pub fn jit_options(&self, set: &cpjit_model::StencilSet<'_>) -> cpjit_runtime::JitOptions {
        cpjit_runtime::JitOptions {
            listing: self.dump_traces,
            perf_map: self.perf_map,
            gdb: self.gdb,
            jitdump: self.jitdump,
            unwind: if self.unwind {
                cpjit_vm_stencils::frames(set)
            } else {
                None
            },
            ..cpjit_runtime::JitOptions::default()
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Jit,
            backedge_threshold: 64,
            call_threshold: 64,
            side_exit_threshold: 32,
            max_trace_len: 400,
            max_depth: 256,
            frame_stack_words: 1 << 22,
            print_live: false,
            dump_traces: false,
            perf_map: false,
            gdb: false,
            unwind: false,
            jitdump: false,
            fail_compiles: false,
            inline_calls: true,
            pin_locals: true,
            merge_branches: true,
            check_lowerings: cfg!(debug_assertions),
            compiler: None,
        }
    }
}

/// Counters for `--stats`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Traces built (and, in `jit` mode, compiled).
    pub traces: u64,
    pub loop_traces: u64,
    pub entry_traces: u64,
    pub side_traces: u64,
    /// Compiles that failed (the function is then never traced again).
    pub compile_failures: u64,
    /// Recordings dropped because the path did not close or was empty.
    pub recordings_abandoned: u64,
    /// Micro-ops in all traces (stitched stencil instances in `jit` mode).
    pub uops: u64,
    pub side_exits: u64,
    pub executor_runs: u64,
    pub invalidations: u64,
    pub compile_time: Duration,
    pub code_bytes: u64,
    /// Calls compiled code made straight into a callee's compiled entry (`CALL_JIT`).
    pub direct_calls: u64,
    /// Those of them whose callee's code left other than by returning (a side exit, an
    /// error), so Rust finished the callee (`Vm::finish_call`).
    pub finished_calls: u64,
    /// Calls inlined into traces ([`crate::inline`]), counted once per trace and call site.
    pub inlined_calls: u64,
    /// Links from the end of a trace into a loop trace's body, past its preamble
    /// ([`crate::trace::Trace::loop_body_entry`]).
    pub loop_body_links: u64,
    /// Loop traces whose body keeps locals in pinned registers ([`crate::pinning`]).
    pub pinned_loops: u64,
    /// Side traces compiled to keep their parent's pinned registers ([`crate::pinning`],
    /// "Inherited pinning").
    pub inherited_pins: u64,
    /// Exits linked with the pinned registers live (a pinned link slot filled).
    pub pinned_links: u64,
    /// Side traces merged into their loop trace instead of linked
    /// ([`crate::trace::Trace::merge_branch`]).
    pub merged_branches: u64,
}
