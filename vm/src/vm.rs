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
//!
//! Calls: every frame lives on one frame stack ([`FrameStack`], shared with compiled code),
//! after a link naming its function and the frame below, so [`Vm::frames`] can list a running
//! call chain whatever runs it. A call in a trace (`CALL_JIT`) whose callee has a compiled
//! entry trace pushes the callee's frame and calls its code without entering Rust; when that
//! code leaves other than by returning, [`Vm::finish_call`] goes on with the callee's frame
//! as [`Vm::call_function`] would have. Executors are never freed before the VM, so code a
//! frame runs stays mapped after an invalidation (which only clears the entry and the links).

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
use std::time::Instant;

mod config;
mod error;
mod merge;
mod tierup;

pub use config::{Config, Mode, Stats};
pub use error::RuntimeError;

/// Side traces of side traces nest at most this deep.
const MAX_SIDE_DEPTH: u32 = 6;

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
    /// One link block per exit ([`ExitLink`]): the link slot compiled `EXIT_TRACE`s read, 0
    /// or the address of the compiled trace the exit continues in; the pinned one the exit's
    /// `LINK` reads (exit stubs of pinned bodies), 0 or the address of code entered with the
    /// same locals pinned ([`crate::pinning`], "Inherited pinning"); and the exit's pc and
    /// number, which its stub reads when it leaves to the interpreter.
    pub links: LinkBlocks,
    /// Exits of other executors (executor, exit) linked to this one.
    pub linked_from: RefCell<Vec<(usize, usize)>>,
    /// Where side traces grown from this executor stop: the root loop's head, or -1.
    pub stop_pc: i64,
    pub trace: Trace,
    pub exits: Vec<ExitState>,
    pub compiled: Option<crate::jit::CompiledTrace>,
    pub valid: Cell<bool>,
    /// The call sites of the trace's `CALL_JIT`s (their `arg0` points here; never moved;
    /// [`CallSites`]).
    pub call_sites: CallSites,
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
    /// Executors replaced by a merged loop trace ([`Vm::merge_into_loop`]): a frame may
    /// still run their code, which lives as long as the function state.
    retired: RefCell<Vec<Rc<Executor>>>,
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

/// One frame of a running call chain, as the interpreter would have it (see [`Vm::frames`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    pub function: String,
    /// The bytecode the frame is at: the call it waits for, or where it raised.
    pub pc: u32,
    pub line: u32,
    pub col: u32,
    pub locals: Vec<Value>,
    /// The value stack, bottom first.
    pub stack: Vec<Value>,
}

impl std::fmt::Display for FrameInfo {
    /// `line L:C in F`, then the locals and the stack as printed values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |values: &[Value]| {
            let mut s = String::new();
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                crate::value::format_value(&mut s, *v);
            }
            s
        };
        write!(
            f,
            "line {}:{} in {} (locals [{}], stack [{}])",
            self.line,
            self.col,
            self.function,
            show(&self.locals),
            show(&self.stack)
        )
    }
}

/// The reference VM running one program.
pub struct Vm {
    program: Program,
    /// Which calls traces inline, and each function's value-stack room for them.
    inlining: crate::inline::Inlining,
    config: Config,
    funcs: Vec<FunctionState>,
    globals: Box<[UnsafeCell<u64>]>,
    output: RefCell<String>,
    /// Boxed: C code holds pointers to the headers while the vector grows.
    #[allow(clippy::vec_box)]
    lists: RefCell<Vec<Box<ListObject>>>,
    pending_error: RefCell<Option<RuntimeError>>,
    stats: RefCell<Stats>,
    /// The frame stack (depth, invalidation epoch), shared with compiled calls.
    frame_stack: Box<UnsafeCell<FrameStack>>,
    /// The frame stack's words (`frame_stack` points into them; never resized).
    _frame_memory: Vec<u64>,
    /// One per function, read by compiled call sites: its compiled entry, frame size.
    callees: Box<[Callee]>,
    /// Global index -> executors (function, executor) that folded its value.
    global_deps: RefCell<HashMap<u64, Vec<(usize, usize)>>>,
    trace_dump: RefCell<String>,
    /// Memory of returned frames that did not fit the frame stack, reused by later calls.
    frame_pool: RefCell<Vec<Vec<u64>>>,
    /// The compiler of traces in `jit` mode.
    jit: Option<Rc<dyn TraceCompiler>>,
    /// The big ints (ints beyond the tagged range).
    bigints: RefCell<crate::bigint::BigHeap>,
}

impl Vm {
    /// A VM for `program`; in `jit` mode with `config.compiler`, else the host's stencils.
    pub fn new(program: Program, config: Config) -> Result<Vm, String> {
        let jit: Option<Rc<dyn TraceCompiler>> = match (config.mode, &config.compiler) {
            (Mode::Jit, Some(compiler)) => Some(compiler.clone()),
            (Mode::Jit, None) => {
                let set = crate::jit::selected_set()?;
                Some(Rc::new(
                    crate::jit::Backend::with_options(set, config.jit_options(set))?
                        .with_pinned_locals(config.pin_locals)
                        .with_checks(config.check_lowerings),
                ))
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
        let backend = crate::jit::Backend::with_options(set, config.jit_options(set))?
            .with_pinned_locals(config.pin_locals)
            .with_checks(config.check_lowerings);
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
                retired: RefCell::new(Vec::new()),
            })
            .collect();
        let globals = program
            .globals
            .iter()
            .map(|(_, v)| UnsafeCell::new(v.0))
            .collect();
        let inlining = crate::inline::Inlining::of(&program);
        let frame_words: Vec<usize> = program
            .functions
            .iter()
            .zip(&inlining.stack_words)
            .map(|(f, &stack)| FRAME_LINK_WORDS + FRAME_HEADER_WORDS + f.locals.len() + stack + 1)
            .collect();
        // Room for the deepest chain of the largest frames, within a bound; the memory is
        // zero-filled on demand by the allocator, so only the depth reached costs.
        let words = (frame_words.iter().copied().max().unwrap_or(0))
            .saturating_mul(config.max_depth as usize + 1)
            .min(config.frame_stack_words);
        let mut frame_memory = vec![0u64; words];
        let base = frame_memory.as_mut_ptr();
        let frame_stack = Box::new(UnsafeCell::new(FrameStack {
            top: base,
            // SAFETY: one past the end of the allocation.
            limit: unsafe { base.add(words) },
            last: std::ptr::null_mut(),
            depth: 0,
            max_depth: config.max_depth as i64,
            epoch: 0,
            direct_calls: 0,
        }));
        let callees = frame_words
            .iter()
            .enumerate()
            .map(|(f, &words)| Callee {
                code: Cell::new(0),
                stack: frame_stack.get(),
                func: f as i64,
                nlocals: program.functions[f].locals.len() as i64,
                frame_words: words as i64,
            })
            .collect();
        Vm {
            program,
            inlining,
            config,
            funcs,
            globals,
            output: RefCell::new(String::new()),
            lists: RefCell::new(Vec::new()),
            pending_error: RefCell::new(None),
            stats: RefCell::new(Stats::default()),
            frame_stack,
            _frame_memory: frame_memory,
            callees,
            global_deps: RefCell::new(HashMap::new()),
            trace_dump: RefCell::new(String::new()),
            frame_pool: RefCell::new(Vec::new()),
            jit,
            bigints: RefCell::new(crate::bigint::BigHeap::default()),
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

    /// The compiler of traces in `jit` mode (`None` in the other modes).
    pub fn compiler(&self) -> Option<&dyn TraceCompiler> {
        self.jit.as_deref()
    }

    /// The traces the functions' executors hold now, function by function: what
    /// `cpjit-vm compile-time` and the bench's warm compile compile again.
    pub fn traces(&self) -> Vec<Trace> {
        let executors = self.funcs.iter().flat_map(|f| f.executors.borrow().clone());
        executors.map(|e| e.trace.clone()).collect()
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.borrow().clone();
        s.direct_calls = self.stack().direct_calls;
        s
    }

    /// The frame stack. Compiled code changes it only inside a `CALL_JIT`, which is never
    /// running while Rust holds this reference (Rust runs between ops, single-threaded, and
    /// does not keep it across a call into C).
    #[allow(clippy::mut_from_ref)]
    fn stack(&self) -> &mut FrameStack {
        // SAFETY: as above; no two references are alive at once (each use is a short
        // expression or a block without calls into C).
        unsafe { &mut *self.frame_stack.get() }
    }

    /// The frames of the running call chain, outermost first: the function, pc, locals and
    /// value stack of each frame as the interpreter would have them, whether an interpreter,
    /// a trace or compiled code called by compiled code runs it. A frame waiting for a call
    /// is at its `CALL` with the arguments popped; the innermost frame is exact where it
    /// left its code (an error being raised, a helper call).
    pub fn frames(&self) -> Vec<FrameInfo> {
        let mut frames = Vec::new();
        let mut link = self.stack().last;
        while !link.is_null() {
            // SAFETY: every link on the chain precedes a live frame of its function (frames
            // are unlinked before their memory is released).
            unsafe {
                let f = (*link).func as usize;
                let func = &self.program.functions[f];
                let frame = link.add(1) as *mut Frame;
                let locals = (frame as *mut u64).add(FRAME_HEADER_WORDS);
                let nlocals = (*frame).nlocals as usize;
                let base = locals.add(nlocals);
                let depth = ((*frame).sp.offset_from(base).max(0) as usize)
                    .min(self.inlining.stack_words[f] + 1);
                let pc = ((*frame).pc.max(0) as usize).min(func.code.len() - 1);
                let (line, col) = func.lines[pc];
                frames.push(FrameInfo {
                    function: func.name.clone(),
                    pc: pc as u32,
                    line,
                    col,
                    // Big ints as copies that outlive the VM, as a traceback may.
                    locals: (0..nlocals)
                        .map(|i| crate::bigint::immortal(Value(*locals.add(i))))
                        .collect(),
                    stack: (0..depth)
                        .map(|i| crate::bigint::immortal(Value(*base.add(i))))
                        .collect(),
                });
                link = (*link).prev;
            }
        }
        frames.reverse();
        frames
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
        self.stack().epoch
    }

    /// Where compiled callers find function `f`'s compiled entry.
    pub(crate) fn callee(&self, f: usize) -> &Callee {
        &self.callees[f]
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

    /// The value of int `x` (a big int when it does not fit the tagged range), collecting
    /// unreachable big ints first when it is time ([`crate::bigint`], "Memory"). Called only
    /// by the generic ops' slow path, while every value of every frame is in frame memory.
    pub(crate) fn box_big(&self, x: num_bigint::BigInt) -> Value {
        if self.bigints.borrow().wants_collection() {
            self.collect_bigints();
        }
        self.bigints.borrow_mut().int(x)
    }

    /// [`Vm::box_big`] of an i128.
    pub(crate) fn box_wide(&self, x: i128) -> Value {
        if self.bigints.borrow().wants_collection() {
            self.collect_bigints();
        }
        self.bigints.borrow_mut().wide(x)
    }

    /// [`Vm::box_wide`] without a collection, whatever the heap's size (an exit boxing
    /// registers that hold values no frame does yet: [`crate::bigint::vm_box_wide_exit`]).
    pub(crate) fn box_wide_uncollected(&self, x: i128) -> Value {
        self.bigints.borrow_mut().wide(x)
    }

    /// Big ints live now, and collections run so far.
    pub fn bigint_stats(&self) -> (usize, u64) {
        let heap = self.bigints.borrow();
        (heap.live(), heap.collections())
    }

    /// Frees the big ints no frame, global or list names.
    fn collect_bigints(&self) {
        let mut frames: Vec<&[u64]> = Vec::new();
        let mut link = self.stack().last;
        while !link.is_null() {
            // SAFETY: every link on the chain starts its frame's `frame_words` words (link,
            // header, locals, value stack; `call_function` and CALL_JIT push them so), live
            // until the frame is unlinked, which no code does during this collection.
            unsafe {
                let words = self.callees[(*link).func as usize].frame_words as usize;
                frames.push(std::slice::from_raw_parts(link as *const u64, words));
                link = (*link).prev;
            }
        }
        // SAFETY: single-threaded; no C code writes a global while Rust runs.
        let globals = unsafe { std::slice::from_raw_parts(self.globals_ptr(), self.globals.len()) };
        let lists = self.lists.borrow();
        let items = lists.iter().map(|l| &l.items[..]);
        self.bigints
            .borrow_mut()
            .collect(frames.into_iter().chain([globals]).chain(items));
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
        if self.stack().depth >= self.stack().max_depth {
            let traceback = self.traceback();
            *self.pending_error.borrow_mut() = Some(RuntimeError {
                message: "RecursionError: maximum recursion depth exceeded".into(),
                function: func.name.clone(),
                line: func.lines[0].0,
                col: func.lines[0].1,
                traceback,
            });
            return Err(());
        }
        let st = &self.funcs[f];
        st.calls.set(st.calls.get() + 1);
        let nlocals = func.locals.len();
        let words = self.callees[f].frame_words as usize;
        // The frame goes on the frame stack, or, when that is full, in memory of its own
        // (recycled: calls in hot loops should not allocate).
        let fs = self.stack();
        // SAFETY: `top..limit` is the frame stack's free memory.
        let fits = unsafe { fs.limit.offset_from(fs.top) } as usize >= words;
        let mut own = None;
        let link = if fits {
            let link = fs.top as *mut FrameLink;
            // SAFETY: within the free memory (checked above).
            fs.top = unsafe { fs.top.add(words) };
            link
        } else {
            let mut mem = self.frame_pool.borrow_mut().pop().unwrap_or_default();
            mem.clear();
            mem.resize(words, 0);
            own.insert(mem).as_mut_ptr() as *mut FrameLink
        };
        // SAFETY: `link` starts `words` words we own: link, header, locals, value stack.
        let frame = unsafe {
            link.write(FrameLink {
                prev: fs.last,
                func: f as i64,
            });
            let frame = link.add(1) as *mut Frame;
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
            for i in args.len()..nlocals {
                *locals.add(i) = Value::NONE.0;
            }
            frame
        };
        fs.last = link;
        fs.depth += 1;
        let r = self.run_frame(f, frame);
        let fs = self.stack();
        fs.depth -= 1;
        // SAFETY: `link` is this call's link; the callee's callees have all been popped.
        fs.last = unsafe { (*link).prev };
        match own {
            Some(mem) => self.frame_pool.borrow_mut().push(mem),
            None => fs.top = link as *mut u64,
        }
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
        self.run_steps(f, frame, step)
    }

    /// Runs frame `frame` of function `f` to its end, starting with `step`.
    fn run_steps(&self, f: usize, frame: *mut Frame, mut step: Step) -> Result<u64, ()> {
        let st = &self.funcs[f];
        loop {
            step = match step {
                Step::Interp => {
                    // SAFETY: `frame` is a live frame of function `f`; the code pointer stays
                    // valid for the function state's lifetime.
                    let status = unsafe { vm_interp(frame, (*frame).sp, st.code_ptr()) };
                    match status {
                        // SAFETY: the frame is live (above).
                        EXIT_RETURN => return Ok(unsafe { (*frame).ret }),
                        EXIT_ERROR => return self.raise(f, frame),
                        EXIT_HOT_LOOP => match self.on_hot_loop(f, frame)? {
                            Some(v) => return Ok(v),
                            None => self.step_at(f, frame),
                        },
                        // SAFETY: the frame is live (above).
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

    /// A compiled caller entered `callee`'s compiled entry directly (`CALL_JIT`), and the
    /// code left with `status` other than a return: runs the callee's frame to its end as
    /// [`Vm::call_function`] would from there (the frame is on the frame stack already; the
    /// caller pops it).
    ///
    /// # Safety
    /// `callee` must be the newest frame, pushed by `CALL_JIT` after its link.
    pub(crate) unsafe fn finish_call(&self, callee: *mut Frame, status: i64) -> Result<u64, ()> {
        // SAFETY: the caller upholds this function's # Safety contract.
        unsafe {
            let link = (callee as *mut FrameLink).sub(1);
            let f = (*link).func as usize;
            self.stats.borrow_mut().finished_calls += 1;
            match self.after_trace(f, callee, status)? {
                Ok(v) => Ok(v),
                Err(step) => self.run_steps(f, callee, step),
            }
        }
    }

    /// Where to continue at the frame's pc: in a loop executor if one starts there, or if
    /// the pc is the back-edge of a loop that has one (its `ENTER_EXECUTOR`, which the
    /// interpreter would run next: a path recorded before its loop had an executor ends
    /// there, and links straight to it instead of through a side trace of one jump).
    fn step_at(&self, f: usize, frame: *mut Frame) -> Step {
        // SAFETY: live frame.
        let pc = unsafe { (*frame).pc } as u32;
        let st = &self.funcs[f];
        if let Some(&e) = st.loop_heads.borrow().get(&pc) {
            return Step::Executor(e);
        }
        match st.code.get(pc as usize).map(|_| st.get(pc as usize)) {
            Some(inst) if inst.op == op::ENTER_EXECUTOR => Step::Executor(inst.arg0 as usize),
            _ => Step::Interp,
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
            match self.after_trace(f, frame, status)? {
                Ok(v) => return Ok(Ok(v)),
                Err(Step::Executor(next)) => e = next,
                Err(Step::Interp) => return Ok(Err(Step::Interp)),
            }
        }
    }

    /// A trace of function `f` (or one linked from it) left with `status`: the function
    /// returned (`Ok(Ok(v))`), raised, or goes on with a step (`Ok(Err(step))`): the side
    /// trace of the exit it left by, a trace that starts where it left, or the interpreter.
    /// Counts the exit and grows a side trace from it once it is hot.
    fn after_trace(
        &self,
        f: usize,
        frame: *mut Frame,
        status: i64,
    ) -> Result<Result<u64, Step>, ()> {
        let st = &self.funcs[f];
        match status {
            // SAFETY: `frame` is the live frame the trace just left.
            EXIT_RETURN => return Ok(Ok(unsafe { (*frame).ret })),
            EXIT_ERROR => return self.raise(f, frame),
            EXIT_SIDE => {}
            other => panic!("trace returned unknown status {other}"),
        }
        self.stats.borrow_mut().side_exits += 1;
        // SAFETY: live frame. Linked compiled traces may have run since the first trace was
        // entered: the exit names its executor.
        let aux = unsafe { (*frame).aux } as u64;
        let (e, exit) = (((aux >> 16) & 0xffff) as usize, (aux & 0xffff) as usize);
        let exec = st.executors.borrow()[e].clone();
        let state = &exec.exits[exit];
        if let Some(side) = state.side.get() {
            self.link(f, e, exit, side);
            return Ok(Err(Step::Executor(side)));
        }
        if exec.trace.end_exit == Some(exit) {
            // The path is complete: go on in the trace that starts here, if any.
            if let Step::Executor(next) = self.step_at(f, frame) {
                self.link(f, e, exit, next);
                return Ok(Err(Step::Executor(next)));
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
        Ok(Err(self.step_at(f, frame)))
    }
}
