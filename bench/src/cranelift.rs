//! The Cranelift peer: the bench's test-op traces ([`TraceSpec`]) compiled by Cranelift
//! (`cranelift-jit`), the backend a Rust JIT author would otherwise pick.
//!
//! Cranelift cannot read the templates' C, so each test op of `templates/testing/holes.c`
//! has a hand lowering here ([`Op`]); the bench checks every Cranelift run against
//! copy-and-patch's (exit status and helper checksum) and the tests below compare single-op
//! traces, so the two descriptions cannot drift apart unnoticed. A trace becomes one
//! Cranelift function, in one of two translations:
//! - [`Translation::Mem`]: the value stack stays in memory and `sp` is a variable, as in the
//!   stencils (every op loads and stores its operands);
//! - [`Translation::Ssa`]: each stack slot is a frontend `Variable`, so stack values become
//!   SSA values (block parameters where control flow merges) — what a Cranelift user writes.
//!
//! Both at `opt_level` `none` and `speed`, with the IR verifier off (a production setting),
//! on `cranelift-jit`'s `ArenaMemoryProvider` ([`module`]): what a latency-minded user picks,
//! since the default provider maps and protects fresh pages for every finalize (6–16 %
//! slower on short traces, issue 36), while the arena reserves once and only changes
//! protections inside it.
//! Blocks start only where control flow needs them (jump targets and after branches).
//! Compile time is everything from the trace description to a callable entry: translation,
//! code generation, and `cranelift-jit` loading and relocating the code.

use crate::workload::TraceSpec;
use cranelift_codegen::ir::{
    types::I64, AbiParam, Block, InstBuilder, MemFlagsData, Signature, Value,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

/// Where the value stack lives in the generated code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Translation {
    /// In memory, through a stack pointer, like the stencils.
    Mem,
    /// In SSA values (one frontend variable per stack slot).
    Ssa,
}

/// Cranelift's `opt_level` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    None,
    Speed,
}

/// One Cranelift configuration the bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub translation: Translation,
    pub opt: Opt,
}

impl Variant {
    /// Every translation at every opt level.
    pub const ALL: [Variant; 4] = [
        Variant::new(Translation::Mem, Opt::None),
        Variant::new(Translation::Mem, Opt::Speed),
        Variant::new(Translation::Ssa, Opt::None),
        Variant::new(Translation::Ssa, Opt::Speed),
    ];

    pub const fn new(translation: Translation, opt: Opt) -> Variant {
        Variant { translation, opt }
    }

    /// The `backend` of its result rows.
    pub fn backend(self) -> &'static str {
        match self.translation {
            Translation::Mem => "cranelift-mem",
            Translation::Ssa => "cranelift-ssa",
        }
    }

    /// The value of Cranelift's `opt_level` setting.
    pub fn opt_level(self) -> &'static str {
        match self.opt {
            Opt::None => "none",
            Opt::Speed => "speed",
        }
    }
}

/// The test ops' read-only table (`table` in `templates/testing/holes.c`, whose values the
/// conformance suite owns), at a fixed address the generated code reads.
static TABLE: [u64; 8] = cpjit_conformance::program::TABLE;

/// The test ops Cranelift can lower, with their operands and per-instance data.
#[derive(Clone, Copy, Debug)]
enum Op {
    Entry,
    Push(u64),
    Push2(u64, u64),
    Add,
    Helper,
    Table,
    /// Offset (in words) of this instance's `counter` in the trace's data.
    Counter(usize),
    /// Offset (in words) of this instance's `slots[4]` in the trace's data.
    AddrAddend(usize),
    /// The jump target's instance index.
    DecJumpNz(usize),
    Pop,
    Exit,
}

impl Op {
    /// Net change of the stack depth (in slots) when the op continues.
    fn stack_effect(self) -> isize {
        match self {
            Op::Push(_) | Op::AddrAddend(_) => 1,
            Op::Push2(..) => 2,
            Op::Add | Op::Pop => -1,
            Op::Helper => -2,
            Op::Entry | Op::Table | Op::Counter(_) | Op::DecJumpNz(_) | Op::Exit => 0,
        }
    }

    /// Slots the op reads below the top of the stack.
    fn reads(self) -> usize {
        match self {
            Op::Entry | Op::Push(_) | Op::Push2(..) => 0,
            Op::Table | Op::Counter(_) | Op::AddrAddend(_) | Op::DecJumpNz(_) => 1,
            Op::Pop | Op::Exit => 1,
            Op::Add => 2,
            Op::Helper => 3,
        }
    }
}

/// A trace checked and laid out for translation: ops, static stack depths on entry to each
/// instance, where blocks start (and how many edges enter each, so that blocks are sealed
/// as early as a careful Cranelift user seals them), and the size of the per-trace writable
/// data.
struct Plan<'l> {
    ops: &'l [Op],
    /// `None`: unreachable, not translated.
    depth: Vec<Option<usize>>,
    block_start: Vec<bool>,
    /// Predecessor edges of each block start.
    preds: Vec<usize>,
    max_depth: usize,
    data_words: usize,
}

/// A trace's instances as Cranelift ops: the stencil names and operand and target names of
/// a [`TraceSpec`] resolved once per trace, outside the compile clock, as copy-and-patch's
/// op list is (a JIT's opcode table; BENCHMARKS.md, "What each compile clock contains").
pub struct OpList<'s> {
    spec: &'s TraceSpec,
    ops: Vec<Op>,
    data_words: usize,
}

/// Resolves `spec`'s instances into Cranelift ops (see [`OpList`]); refuses a stencil with
/// no lowering here, a missing operand or target, a trace that does not start with its shim
/// or continues past its end.
pub fn op_list(spec: &TraceSpec) -> Result<OpList<'_>, String> {
    let n = spec.instances.len();
    let mut data_words = 0;
    let mut ops = Vec::with_capacity(n);
    for (i, x) in spec.instances.iter().enumerate() {
        let at = || format!("{}: instance {i} ({})", spec.name, x.stencil);
        let operand = |name: &str| x.operand(name, at);
        let op = match x.stencil {
            "cpjit_entry" if i == 0 => Op::Entry,
            _ if i == 0 => return Err(format!("{}: a trace starts with its shim", at())),
            "op_test_push" => Op::Push(operand("OPERAND0")?),
            "op_test_push2" => Op::Push2(operand("OPERAND0")?, operand("OPERAND1")?),
            "op_test_add" => Op::Add,
            "op_test_helper" => Op::Helper,
            "op_test_table" => Op::Table,
            "op_test_counter" => {
                data_words += 1;
                Op::Counter(data_words - 1)
            }
            "op_test_addr_addend" => {
                data_words += 4;
                Op::AddrAddend(data_words - 4)
            }
            "op_test_dec_jump_nz" => {
                let t = x.target("JUMP_TARGET", at)?;
                if t == 0 || t >= n {
                    return Err(format!(
                        "{}: jump target {t} is not an instance after the shim",
                        at()
                    ));
                }
                Op::DecJumpNz(t)
            }
            "op_test_pop" => Op::Pop,
            "op_test_exit" => Op::Exit,
            other => {
                return Err(format!(
                    "{}: no Cranelift lowering for stencil {other}",
                    at()
                ))
            }
        };
        ops.push(op);
    }
    if !matches!(ops.last(), Some(Op::Exit)) {
        return Err(format!(
            "{}: continues past the end of the trace",
            spec.name
        ));
    }
    Ok(OpList {
        spec,
        ops,
        data_words,
    })
}

/// The front end's analysis of an op list, on the compile clock: stack depths (and the
/// trace's declared slots checked against them) and blocks.
fn plan<'l>(list: &'l OpList<'_>) -> Result<Plan<'l>, String> {
    let (spec, ops, data_words) = (list.spec, &list.ops[..], list.data_words);
    let (depth, max_depth) = stack_depths(spec, ops)?;
    if max_depth > spec.stack_slots {
        return Err(format!(
            "{}: needs {max_depth} stack slots, the trace declares {}",
            spec.name, spec.stack_slots
        ));
    }
    let (block_start, preds) = blocks(ops, &depth);
    Ok(Plan {
        ops,
        depth,
        block_start,
        preds,
        max_depth,
        data_words,
    })
}

/// The instances control can reach from `from` (a continuing op falls through).
fn successors(ops: &[Op], from: usize) -> impl Iterator<Item = usize> {
    let jump = match ops[from] {
        Op::DecJumpNz(t) => Some(t),
        _ => None,
    };
    let next = (!matches!(ops[from], Op::Exit)).then_some(from + 1);
    jump.into_iter().chain(next)
}

/// The static stack depth on entry to each reachable instance (every path into an instance
/// must agree; `None`: unreachable) and the deepest the stack gets.
fn stack_depths(spec: &TraceSpec, ops: &[Op]) -> Result<(Vec<Option<usize>>, usize), String> {
    let mut depth: Vec<Option<usize>> = vec![None; ops.len()];
    depth[0] = Some(0);
    let mut max_depth = 0;
    let mut work = vec![0];
    while let Some(i) = work.pop() {
        let d = depth[i].expect("queued instances have a depth");
        let op = ops[i];
        if d < op.reads() {
            return Err(format!(
                "{}: instance {i} ({}) reads {} stack value(s) but {d} are on the stack",
                spec.name,
                spec.instances[i].stencil,
                op.reads()
            ));
        }
        let after = (d as isize + op.stack_effect()) as usize;
        max_depth = max_depth.max(after).max(d);
        for to in successors(ops, i) {
            match depth[to] {
                Some(have) if have != after => {
                    return Err(format!(
                    "{}: instance {to} is entered with {have} and {after} stack values (from {i})",
                    spec.name
                ))
                }
                Some(_) => {}
                None => {
                    depth[to] = Some(after);
                    work.push(to);
                }
            }
        }
    }
    Ok((depth, max_depth))
}

/// Which reachable instances start a block (jump targets and the instances after branches),
/// and each one's number of predecessor edges (so it is sealed as soon as all are emitted).
fn blocks(ops: &[Op], depth: &[Option<usize>]) -> (Vec<bool>, Vec<usize>) {
    let n = ops.len();
    let mut start = vec![false; n];
    for (i, &op) in ops.iter().enumerate() {
        if let (Op::DecJumpNz(t), Some(_)) = (op, depth[i]) {
            start[t] = true;
            start[i + 1] = true;
        }
    }
    let mut preds = vec![0; n];
    for i in (0..n).filter(|&i| depth[i].is_some()) {
        for to in successors(ops, i).filter(|&to| start[to]) {
            preds[to] += 1;
        }
    }
    (start, preds)
}

/// The value stack while translating one instance: loads and stores relative to its top,
/// and moving the top, in either translation.
struct Stack {
    translation: Translation,
    /// The stack pointer (`Mem`).
    sp: Variable,
    /// One variable per slot (`Ssa`).
    slots: Vec<Variable>,
    /// The static depth on entry to the current instance (`Ssa`).
    depth: usize,
    /// Aligned, non-trapping accesses.
    trusted: MemFlagsData,
}

impl Stack {
    fn slot(&self, offset: isize) -> Variable {
        self.slots[(self.depth as isize + offset) as usize]
    }

    /// `sp[offset]`
    fn load(&self, b: &mut FunctionBuilder, offset: isize) -> Value {
        match self.translation {
            Translation::Mem => {
                let sp = b.use_var(self.sp);
                b.ins().load(I64, self.trusted, sp, (offset * 8) as i32)
            }
            Translation::Ssa => b.use_var(self.slot(offset)),
        }
    }

    /// `sp[offset] = value`
    fn store(&self, b: &mut FunctionBuilder, offset: isize, value: Value) {
        match self.translation {
            Translation::Mem => {
                let sp = b.use_var(self.sp);
                b.ins().store(self.trusted, value, sp, (offset * 8) as i32);
            }
            Translation::Ssa => b.def_var(self.slot(offset), value),
        }
    }

    /// `sp += slots`
    fn bump(&mut self, b: &mut FunctionBuilder, slots: isize) {
        match self.translation {
            Translation::Mem => {
                let sp = b.use_var(self.sp);
                let moved = b.ins().iadd_imm_s(sp, (slots * 8) as i64);
                b.def_var(self.sp, moved);
            }
            Translation::Ssa => self.depth = (self.depth as isize + slots) as usize,
        }
    }
}

/// Addresses the generated code embeds.
struct Addresses {
    /// `cpjit_test_mul_add`
    helper: u64,
    /// The trace's writable data (counters and slots).
    data: u64,
}

/// Translates a planned trace into the function of `b`.
fn translate(b: &mut FunctionBuilder, plan: &Plan<'_>, translation: Translation, at: &Addresses) {
    let ptr = I64;
    let blocks: Vec<Option<Block>> = plan
        .block_start
        .iter()
        .map(|&start| start.then(|| b.create_block()))
        .collect();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    // Edges still to be emitted into each block; sealed when none are left.
    let mut preds_left = plan.preds.clone();
    let mut edge = |b: &mut FunctionBuilder, to: usize| {
        preds_left[to] -= 1;
        if preds_left[to] == 0 {
            b.seal_block(blocks[to].expect("edges enter block starts"));
        }
    };
    let trusted = MemFlagsData::trusted();
    let readonly = trusted.with_readonly();
    let mut stack = Stack {
        trusted,
        translation,
        sp: b.declare_var(ptr),
        slots: match translation {
            Translation::Mem => Vec::new(),
            Translation::Ssa => (0..plan.max_depth).map(|_| b.declare_var(I64)).collect(),
        },
        depth: 0,
    };
    let sp = b.block_params(entry)[1];
    b.def_var(stack.sp, sp);
    let mut helper_sig = Signature::new(CallConv::SystemV);
    helper_sig.params.extend([AbiParam::new(I64); 3]);
    helper_sig.returns.push(AbiParam::new(I64));
    let helper_sig = b.import_signature(helper_sig);
    let mut open = true; // the current block has no terminator yet
    for (i, &op) in plan.ops.iter().enumerate() {
        let Some(depth) = plan.depth[i] else {
            continue; // unreachable
        };
        if let Some(block) = blocks[i] {
            if open {
                b.ins().jump(block, &[]);
                edge(b, i);
            }
            b.switch_to_block(block);
            open = true;
        }
        stack.depth = depth;
        let word = |b: &mut FunctionBuilder, v: u64| b.ins().iconst(I64, v as i64);
        match op {
            Op::Entry => {}
            Op::Push(v) => {
                let v = word(b, v);
                stack.store(b, 0, v);
                stack.bump(b, 1);
            }
            Op::Push2(v, w) => {
                let v = word(b, v);
                stack.store(b, 0, v);
                let w = word(b, w);
                stack.store(b, 1, w);
                stack.bump(b, 2);
            }
            Op::Add => {
                let y = stack.load(b, -1);
                let x = stack.load(b, -2);
                let sum = b.ins().iadd(x, y);
                stack.store(b, -2, sum);
                stack.bump(b, -1);
            }
            Op::Helper => {
                let c = stack.load(b, -1);
                let bb = stack.load(b, -2);
                let a = stack.load(b, -3);
                let callee = word(b, at.helper);
                let call = b.ins().call_indirect(helper_sig, callee, &[a, bb, c]);
                let r = b.inst_results(call)[0];
                stack.store(b, -3, r);
                stack.bump(b, -2);
            }
            Op::Table => {
                let x = stack.load(b, -1);
                let index = b.ins().band_imm_u(x, 7);
                let scaled = b.ins().ishl_imm_u(index, 3);
                let table = word(b, TABLE.as_ptr() as u64);
                let addr = b.ins().iadd(table, scaled);
                let v = b.ins().load(I64, readonly, addr, 0);
                stack.store(b, -1, v);
            }
            Op::Counter(offset) => {
                let addr = word(b, at.data + 8 * offset as u64);
                let counter = b.ins().load(I64, trusted, addr, 0);
                let top = stack.load(b, -1);
                let sum = b.ins().iadd(counter, top);
                b.ins().store(trusted, sum, addr, 0);
                stack.store(b, -1, sum);
            }
            Op::AddrAddend(offset) => {
                // slots[2] = top; push slots[2] + (&slots[3] - &slots[1]); the reload is
                // volatile in C, so it stays a load here.
                let base = word(b, at.data + 8 * offset as u64);
                let top = stack.load(b, -1);
                b.ins().store(trusted, top, base, 16);
                let reloaded = b.ins().load(I64, trusted, base, 16);
                let v = b.ins().iadd_imm_s(reloaded, 16);
                stack.store(b, 0, v);
                stack.bump(b, 1);
            }
            Op::DecJumpNz(target) => {
                let top = stack.load(b, -1);
                let v = b.ins().iadd_imm_s(top, -1);
                stack.store(b, -1, v);
                let taken = blocks[target].expect("jump targets start blocks");
                let next = blocks[i + 1].expect("the instance after a branch starts a block");
                b.ins().brif(v, taken, &[], next, &[]);
                edge(b, target);
                edge(b, i + 1);
                open = false;
            }
            Op::Pop => stack.bump(b, -1),
            Op::Exit => {
                let top = stack.load(b, -1);
                b.ins().return_(&[top]);
                open = false;
            }
        }
    }
}

/// A trace compiled by a [`Compiler`]: its entry and its writable data. The code stays valid
/// until the compiler is dropped or [`Compiler::recycle`]d.
pub struct Compiled {
    entry: cpjit_runtime::EntryFn,
    _data: Box<[i64]>,
}

impl Compiled {
    /// Runs the trace from its entry; returns the exit status.
    ///
    /// # Safety
    /// The compiler that made this trace must not have been recycled since.
    pub unsafe fn run(&self, spec: &TraceSpec) -> i64 {
        let mut stack = vec![0u64; spec.stack_slots];
        // SAFETY: the entry is a SystemV function (frame, sp) -> i64 that uses at most
        // `stack_slots` slots (checked by `plan`) and ignores the frame; its code is alive
        // (the caller's contract).
        unsafe { (self.entry)(std::ptr::null_mut(), stack.as_mut_ptr()) }
    }
}

/// One Cranelift configuration with its reusable state: the ISA (built once, like a
/// copy-and-patch `Jit`), the codegen and frontend contexts, and a JIT module that holds the
/// code of every trace compiled since the last [`Compiler::recycle`].
pub struct Compiler {
    variant: Variant,
    isa: OwnedTargetIsa,
    module: Option<JITModule>,
    ctx: Context,
    frontend: FunctionBuilderContext,
    functions: usize,
    helper: u64,
}

impl Compiler {
    /// A compiler for `variant`; `resolve` gives the helpers' addresses.
    pub fn new(variant: Variant, resolve: fn(&str) -> Option<u64>) -> Result<Compiler, String> {
        let helper = resolve("cpjit_test_mul_add")
            .ok_or("the symbol table lacks cpjit_test_mul_add, which the test ops call")?;
        let mut flags = settings::builder();
        let set = |flags: &mut settings::Builder, name: &str, value: &str| {
            flags
                .set(name, value)
                .map_err(|e| format!("cranelift setting {name}={value}: {e}"))
        };
        set(&mut flags, "opt_level", variant.opt_level())?;
        set(&mut flags, "enable_verifier", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("cranelift: no native ISA: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cranelift: {e}"))?;
        let module = module(&isa)?;
        Ok(Compiler {
            variant,
            isa,
            ctx: module.make_context(),
            module: Some(module),
            frontend: FunctionBuilderContext::new(),
            functions: 0,
            helper,
        })
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Compiles `list` to a callable function: analysis, translation, code generation,
    /// loading.
    pub fn compile(&mut self, list: &OpList<'_>) -> Result<Compiled, String> {
        let mut compiled = self.compile_batch(list, 1)?;
        compiled
            .pop()
            .ok_or_else(|| format!("{}: cranelift: no function", list.spec.name))
    }

    /// [`op_list`] then [`compile`](Compiler::compile), for checks (not timed).
    pub fn compile_spec(&mut self, spec: &TraceSpec) -> Result<Compiled, String> {
        self.compile(&op_list(spec)?)
    }

    /// Compiles `count` functions from `spec` into the module and finalizes them once (one
    /// `finalize_definitions`: one round of memory protection changes and relocations), as
    /// a Cranelift user compiling many functions at once would.
    pub fn compile_batch(
        &mut self,
        list: &OpList<'_>,
        count: usize,
    ) -> Result<Vec<Compiled>, String> {
        let spec = list.spec;
        let plan = plan(list)?;
        let mut defined = Vec::with_capacity(count);
        for _ in 0..count {
            let data = vec![0i64; plan.data_words].into_boxed_slice();
            let id = self.define(spec, &plan, &data)?;
            defined.push((id, data));
        }
        let module = self.module.as_mut().expect("a module between recycles");
        module
            .finalize_definitions()
            .map_err(|e| format!("{}: cranelift: {e}", spec.name))?;
        Ok(defined
            .into_iter()
            .map(|(id, data)| {
                let code = module.get_finalized_function(id);
                // SAFETY: `id` was defined with the signature (i64, i64) -> i64 in the
                // platform's default (C) calling convention, which is `EntryFn`'s.
                let entry =
                    unsafe { std::mem::transmute::<*const u8, cpjit_runtime::EntryFn>(code) };
                Compiled { entry, _data: data }
            })
            .collect())
    }

    /// Declares and defines one function from `plan` whose data is `data`.
    fn define(
        &mut self,
        spec: &TraceSpec,
        plan: &Plan<'_>,
        data: &[i64],
    ) -> Result<FuncId, String> {
        let module = self.module.as_mut().expect("a module between recycles");
        let mut sig = module.make_signature();
        sig.params.extend([AbiParam::new(I64); 2]);
        sig.returns.push(AbiParam::new(I64));
        let name = format!("trace{}", self.functions);
        self.functions += 1;
        let id = module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| format!("{}: cranelift: {e}", spec.name))?;
        self.ctx.func.signature = sig;
        let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.frontend);
        let at = Addresses {
            helper: self.helper,
            data: data.as_ptr() as u64,
        };
        translate(&mut b, plan, self.variant.translation, &at);
        b.seal_all_blocks();
        b.finalize(self.isa.frontend_config());
        module
            .define_function(id, &mut self.ctx)
            .map_err(|e| format!("{}: cranelift: {e:?}", spec.name))?;
        module.clear_context(&mut self.ctx);
        Ok(id)
    }

    /// Frees the code of every trace compiled so far and starts a new JIT module.
    ///
    /// # Safety
    /// No trace this compiler made may run afterwards.
    pub unsafe fn recycle(&mut self) -> Result<(), String> {
        // Freed first: the old arena's reservation goes before the new one is made.
        if let Some(old) = self.module.take() {
            // SAFETY: the caller's contract.
            unsafe { old.free_memory() };
        }
        self.module = Some(module(&self.isa)?);
        Ok(())
    }
}

/// Address space each `JITModule`'s arena reserves (inaccessible until used; only what a
/// round's functions fill is committed): a timed batch of the bench's longest trace needs a
/// few MiB.
const ARENA_BYTES: usize = 256 << 20;

/// A JIT module for `isa` on an `ArenaMemoryProvider` of [`ARENA_BYTES`].
fn module(isa: &OwnedTargetIsa) -> Result<JITModule, String> {
    let arena = ArenaMemoryProvider::new_with_size(ARENA_BYTES)
        .map_err(|e| format!("cranelift: reserving a {ARENA_BYTES}-byte arena: {e}"))?;
    let mut builder = JITBuilder::with_isa(isa.clone(), default_libcall_names());
    builder.memory_provider(Box::new(arena));
    Ok(JITModule::new(builder))
}

impl Drop for Compiler {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: `Compiled` traces must not outlive their compiler (documented on
            // `Compiled`); the bench drops them first.
            unsafe { m.free_memory() };
        }
    }
}

#[cfg(test)]
mod tests;
