//! The VM driver: frames, calls, errors, and tier-up.
//!
//! Every function starts in the bytecode interpreter (`vm_interp`). A `JUMP_BACKWARD` counts
//! its executions; at `backedge_threshold` the interpreter returns `HOT_LOOP`, the VM records
//! one iteration of the loop (`vm_record`), projects it into a trace ([`crate::trace`]) and,
//! in `jit` mode, compiles it with the copy-and-patch runtime ([`crate::jit`]) or the
//! compiler given in [`Config::compiler`]. The executor hangs off the function; the
//! back-edge becomes `ENTER_EXECUTOR`, which hands control to the trace. A function called
//! `call_threshold` times gets an executor for its entry too. A trace that leaves through an
//! exit resumes the interpreter at that exit's bytecode; an exit taken `side_exit_threshold`
//! times gets its own trace. A compile that fails marks the function so that it is never
//! retried. Storing a global invalidates executors that folded its value.
//!
//! Traces are linked: when an exit has a side trace, or the end of a path reaches a loop head
//! that has an executor, the exit's link slot gets that trace's address and compiled code
//! jumps there without returning to Rust (in `uops` mode Rust follows the same links). Every
//! exit names its executor and index (`frame.aux`), so Rust knows where a chain of linked
//! traces finally left.

use crate::abi::*;
use crate::helpers::{make_list, ListObject};
use crate::jit::TraceCompiler;
use crate::ops::op;
use crate::parser::Program;
use crate::trace::{self, End, Trace};
use crate::value::Value;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

mod error;
mod tierup;

pub use error::RuntimeError;

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

/// Side traces of side traces nest at most this deep.
const MAX_SIDE_DEPTH: u32 = 6;

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
    /// Write printed lines to stdout as they come (else they are only kept).
    pub print_live: bool,
    /// Keep a listing of every compiled trace (see [`Vm::trace_dump`]).
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
    /// In `jit` mode, the compiler of traces in place of copy-and-patch with the host's
    /// stencils (`None`, the default); ignored in the other modes and by
    /// [`Vm::with_stencils`]. Its code must keep the stitched code's contract (see
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
                cpjit_stencils::frames(set)
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
            print_live: false,
            dump_traces: false,
            perf_map: false,
            gdb: false,
            unwind: false,
            jitdump: false,
            fail_compiles: false,
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
}

/// What started an executor.
#[derive(Clone, Copy, Debug)]
pub enum ExecutorKind {
    /// A loop: entered at `head` from the back-edge at `backedge` (which held `original`).
    Loop {
        head: u32,
        backedge: u32,
        original: Inst,
    },
    /// A function's entry.
    Entry,
    /// A hot exit of another executor.
    Side { parent: usize, exit: usize },
}

/// One exit of a trace.
#[derive(Debug, Default)]
pub struct ExitState {
    pub taken: Cell<u64>,
    pub side: Cell<Option<usize>>,
    /// A side trace for this exit could not be built; do not try again.
    pub abandoned: Cell<bool>,
}

/// A trace attached to a function.
pub struct Executor {
    pub kind: ExecutorKind,
    /// 0 for loop and entry traces, parent's + 1 for side traces.
    pub depth: u32,
    /// One link slot per exit, read by compiled `EXIT_TRACE`s: 0, or the address of the
    /// compiled trace the exit continues in.
    pub links: Box<[Cell<u64>]>,
    /// Exits of other executors (executor, exit) linked to this one.
    pub linked_from: RefCell<Vec<(usize, usize)>>,
    /// Where side traces grown from this executor stop: the root loop's head, or -1.
    pub stop_pc: i64,
    pub trace: Trace,
    pub exits: Vec<ExitState>,
    pub compiled: Option<crate::jit::CompiledTrace>,
    pub valid: Cell<bool>,
}

/// Per-function tier-up state.
pub struct FunctionState {
    /// The bytecode; C increments back-edge counters in it and Rust patches ENTER_EXECUTOR.
    code: Box<[UnsafeCell<Inst>]>,
    pub calls: Cell<u64>,
    /// A compile failed: never trace this function again.
    pub jit_failed: Cell<bool>,
    /// Compile attempts (successful or not).
    pub compiles: Cell<u64>,
    pub entry: Cell<Option<usize>>,
    pub executors: RefCell<Vec<Rc<Executor>>>,
    /// Loop head pc -> executor entered there.
    pub loop_heads: RefCell<HashMap<u32, usize>>,
    /// Back-edge pc -> recordings of its loop dropped so far.
    backoff: RefCell<HashMap<u32, u32>>,
}

impl FunctionState {
    fn code_ptr(&self) -> *mut Inst {
        self.code.as_ptr() as *mut Inst
    }

    /// The bytecode as it is now.
    pub fn code(&self) -> Vec<Inst> {
        // SAFETY: no C code writes the bytecode while Rust copies it (single thread, and the
        // interpreter is not running this instruction stream right now, or is suspended in
        // a helper call, never mid-write).
        self.code.iter().map(|c| unsafe { *c.get() }).collect()
    }

    fn set(&self, pc: usize, inst: Inst) {
        // SAFETY: as in `code`.
        unsafe { *self.code[pc].get() = inst }
    }

    fn get(&self, pc: usize) -> Inst {
        // SAFETY: as in `code`.
        unsafe { *self.code[pc].get() }
    }
}

/// The outcome of running part of a frame.
enum Step {
    Interp,
    Executor(usize),
}

/// A frame's memory: header, locals, value stack.
struct FrameBox {
    words: Vec<u64>,
}

impl FrameBox {
    fn frame(&mut self) -> *mut Frame {
        self.words.as_mut_ptr() as *mut Frame
    }
}

/// The reference VM running one program.
pub struct Vm {
    program: Program,
    config: Config,
    funcs: Vec<FunctionState>,
    globals: Box<[UnsafeCell<u64>]>,
    output: RefCell<String>,
    /// Boxed: C code holds pointers to the headers while the vector grows.
    #[allow(clippy::vec_box)]
    lists: RefCell<Vec<Box<ListObject>>>,
    pending_error: RefCell<Option<RuntimeError>>,
    stats: RefCell<Stats>,
    depth: Cell<u32>,
    epoch: Cell<u64>,
    /// Global index -> executors (function, executor) that folded its value.
    global_deps: RefCell<HashMap<u64, Vec<(usize, usize)>>>,
    trace_dump: RefCell<String>,
    /// Memory of returned frames, reused by later calls.
    frame_pool: RefCell<Vec<Vec<u64>>>,
    /// The compiler of traces in `jit` mode.
    jit: Option<Rc<dyn TraceCompiler>>,
}

impl Vm {
    /// A VM for `program`; in `jit` mode with `config.compiler`, else the host's stencils.
    pub fn new(program: Program, config: Config) -> Result<Vm, String> {
        let jit: Option<Rc<dyn TraceCompiler>> = match (config.mode, &config.compiler) {
            (Mode::Jit, Some(compiler)) => Some(compiler.clone()),
            (Mode::Jit, None) => {
                let set = crate::jit::selected_set()?;
                Some(Rc::new(crate::jit::Backend::with_options(
                    set,
                    config.jit_options(set),
                )?))
            }
            _ => None,
        };
        Ok(Vm::with_backend(program, config, jit))
    }

    /// A VM in `jit` mode with an explicit stencil set (any set for this process's ABI).
    pub fn with_stencils(
        program: Program,
        mut config: Config,
        set: &'static cpjit_model::StencilSet<'static>,
    ) -> Result<Vm, String> {
        config.mode = Mode::Jit;
        let backend = crate::jit::Backend::with_options(set, config.jit_options(set))?;
        Ok(Vm::with_backend(program, config, Some(Rc::new(backend))))
    }

    fn with_backend(program: Program, config: Config, jit: Option<Rc<dyn TraceCompiler>>) -> Vm {
        let funcs = program
            .functions
            .iter()
            .map(|f| FunctionState {
                code: f.code.iter().map(|i| UnsafeCell::new(*i)).collect(),
                calls: Cell::new(0),
                jit_failed: Cell::new(false),
                compiles: Cell::new(0),
                entry: Cell::new(None),
                executors: RefCell::new(Vec::new()),
                loop_heads: RefCell::new(HashMap::new()),
                backoff: RefCell::new(HashMap::new()),
            })
            .collect();
        let globals = program
            .globals
            .iter()
            .map(|(_, v)| UnsafeCell::new(v.0))
            .collect();
        Vm {
            program,
            config,
            funcs,
            globals,
            output: RefCell::new(String::new()),
            lists: RefCell::new(Vec::new()),
            pending_error: RefCell::new(None),
            stats: RefCell::new(Stats::default()),
            depth: Cell::new(0),
            epoch: Cell::new(0),
            global_deps: RefCell::new(HashMap::new()),
            trace_dump: RefCell::new(String::new()),
            frame_pool: RefCell::new(Vec::new()),
            jit,
        }
    }

    /// Runs `main`.
    pub fn run(&self) -> Result<(), RuntimeError> {
        match self.call_function(self.program.main, &[]) {
            Ok(_) => Ok(()),
            Err(()) => Err(self
                .pending_error
                .borrow_mut()
                .take()
                .expect("error without details")),
        }
    }

    /// Everything printed so far.
    pub fn output(&self) -> String {
        self.output.borrow().clone()
    }

    pub fn stats(&self) -> Stats {
        self.stats.borrow().clone()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Tier-up state of function `f`.
    pub fn function_state(&self, f: usize) -> &FunctionState {
        &self.funcs[f]
    }

    /// Listings of the traces built so far (with `dump_traces`).
    pub fn trace_dump(&self) -> String {
        self.trace_dump.borrow().clone()
    }

    pub(crate) fn invalidation_epoch(&self) -> u64 {
        self.epoch.get()
    }

    pub(crate) fn write_output(&self, s: &str) {
        if self.config.print_live {
            use std::io::Write;
            let _ = std::io::stdout().lock().write_all(s.as_bytes());
        }
        self.output.borrow_mut().push_str(s);
    }

    pub(crate) fn new_list(&self, items: Vec<u64>) -> u64 {
        make_list(&mut self.lists.borrow_mut(), items)
    }

    fn globals_ptr(&self) -> *mut u64 {
        self.globals.as_ptr() as *mut u64
    }

    fn global_values(&self) -> Vec<u64> {
        // SAFETY: single-threaded; no C code is writing a global during this copy.
        self.globals.iter().map(|g| unsafe { *g.get() }).collect()
    }

    /// Calls function `f`. On error the details are in `pending_error`.
    pub(crate) fn call_function(&self, f: usize, args: &[u64]) -> Result<u64, ()> {
        let func = &self.program.functions[f];
        if self.depth.get() >= self.config.max_depth {
            *self.pending_error.borrow_mut() = Some(RuntimeError {
                message: "RecursionError: maximum recursion depth exceeded".into(),
                function: func.name.clone(),
                line: func.lines[0].0,
                col: func.lines[0].1,
            });
            return Err(());
        }
        let st = &self.funcs[f];
        st.calls.set(st.calls.get() + 1);
        let nlocals = func.locals.len();
        // Frame memory is recycled: calls in hot loops should not allocate.
        let mut words = self.frame_pool.borrow_mut().pop().unwrap_or_default();
        words.clear();
        words.resize(
            FRAME_HEADER_WORDS + nlocals + func.max_stack + 1,
            Value::NONE.0,
        );
        let mut fb = FrameBox { words };
        let frame = fb.frame();
        // SAFETY: `frame` points to FRAME_HEADER_WORDS + nlocals + stack words we own.
        unsafe {
            frame.write(Frame {
                vm: self as *const Vm as *const core::ffi::c_void,
                pc: 0,
                sp: (frame as *mut u64).add(FRAME_HEADER_WORDS + nlocals),
                aux: 0,
                error_code: 0,
                error_a: 0,
                error_b: 0,
                ret: Value::NONE.0,
                backedge_threshold: if self.config.mode == Mode::Interp {
                    i64::MAX
                } else {
                    self.config.backedge_threshold
                },
                nlocals: nlocals as i64,
                globals: self.globals_ptr(),
            });
            let locals = (frame as *mut u64).add(FRAME_HEADER_WORDS);
            std::ptr::copy_nonoverlapping(args.as_ptr(), locals, args.len());
        }
        self.depth.set(self.depth.get() + 1);
        let r = self.run_frame(f, frame);
        self.depth.set(self.depth.get() - 1);
        self.frame_pool.borrow_mut().push(fb.words);
        r
    }

    fn run_frame(&self, f: usize, frame: *mut Frame) -> Result<u64, ()> {
        let st = &self.funcs[f];
        let mut step = match st.entry.get() {
            Some(e) => Step::Executor(e),
            None => Step::Interp,
        };
        if st.entry.get().is_none()
            && self.config.mode != Mode::Interp
            && !st.jit_failed.get()
            && st.calls.get() == self.config.call_threshold
        {
            // The per-code run count reached the threshold: trace the function's entry.
            match self.record_and_install(f, frame, -1, ExecutorKind::Entry)? {
                Some(v) => return Ok(v),
                None => step = self.step_at(f, frame),
            }
        }
        loop {
            step = match step {
                Step::Interp => {
                    // SAFETY: `frame` is a live frame of function `f`; the code pointer stays
                    // valid for the function state's lifetime.
                    let status = unsafe { vm_interp(frame, (*frame).sp, st.code_ptr()) };
                    match status {
                        EXIT_RETURN => return Ok(unsafe { (*frame).ret }),
                        EXIT_ERROR => return self.raise(f, frame),
                        EXIT_HOT_LOOP => match self.on_hot_loop(f, frame)? {
                            Some(v) => return Ok(v),
                            None => self.step_at(f, frame),
                        },
                        EXIT_ENTER_EXECUTOR => Step::Executor(unsafe { (*frame).aux } as usize),
                        other => panic!("vm_interp returned unknown status {other}"),
                    }
                }
                Step::Executor(e) => match self.run_executor(f, e, frame)? {
                    Ok(v) => return Ok(v),
                    Err(next) => next,
                },
            }
        }
    }

    /// Where to continue at the frame's pc: in a loop executor if one starts there.
    fn step_at(&self, f: usize, frame: *mut Frame) -> Step {
        // SAFETY: live frame.
        let pc = unsafe { (*frame).pc } as u32;
        match self.funcs[f].loop_heads.borrow().get(&pc) {
            Some(&e) => Step::Executor(e),
            None => Step::Interp,
        }
    }

    /// Runs executor `e` (and the side traces it links to). `Ok(Ok(v))`: the function
    /// returned `v`; `Ok(Err(step))`: go on with `step`.
    fn run_executor(
        &self,
        f: usize,
        mut e: usize,
        frame: *mut Frame,
    ) -> Result<Result<u64, Step>, ()> {
        let st = &self.funcs[f];
        loop {
            let exec = st.executors.borrow()[e].clone();
            if !exec.valid.get() {
                return Ok(Err(Step::Interp));
            }
            self.stats.borrow_mut().executor_runs += 1;
            // SAFETY: live frame; the trace's micro-ops and code outlive this call (`exec`).
            let status = unsafe {
                (*frame).pc = 0;
                let sp = (*frame).sp;
                match &exec.compiled {
                    Some(c) => c.run(frame, sp),
                    None => vm_uop_interp(frame, sp, exec.trace.uops.as_ptr() as *mut Inst),
                }
            };
            match status {
                EXIT_RETURN => return Ok(Ok(unsafe { (*frame).ret })),
                EXIT_ERROR => return self.raise(f, frame),
                EXIT_SIDE => {}
                other => panic!("trace returned unknown status {other}"),
            }
            self.stats.borrow_mut().side_exits += 1;
            // SAFETY: live frame. Linked compiled traces may have run since `e` was entered:
            // the exit names its executor.
            let aux = unsafe { (*frame).aux } as u64;
            let (e2, exit) = (((aux >> 16) & 0xffff) as usize, (aux & 0xffff) as usize);
            let exec = if e2 == e {
                exec
            } else {
                e = e2;
                st.executors.borrow()[e].clone()
            };
            let state = &exec.exits[exit];
            if let Some(side) = state.side.get() {
                self.link(f, e, exit, side);
                e = side;
                continue;
            }
            if exec.trace.end_exit == Some(exit) {
                // The path is complete: go on in the trace that starts here, if any.
                if let Step::Executor(next) = self.step_at(f, frame) {
                    self.link(f, e, exit, next);
                    e = next;
                    continue;
                }
            }
            state.taken.set(state.taken.get() + 1);
            if exec.valid.get()
                && exec.depth < MAX_SIDE_DEPTH
                && state.taken.get() >= self.config.side_exit_threshold
                && !state.abandoned.get()
                && !st.jit_failed.get()
            {
                let kind = ExecutorKind::Side { parent: e, exit };
                let before = st.executors.borrow().len();
                if let Some(v) = self.record_and_install(f, frame, exec.stop_pc, kind)? {
                    return Ok(Ok(v));
                }
                if st.executors.borrow().len() == before {
                    state.abandoned.set(true);
                }
            }
            match self.step_at(f, frame) {
                Step::Executor(next) => e = next,
                Step::Interp => return Ok(Err(Step::Interp)),
            }
        }
    }
}
