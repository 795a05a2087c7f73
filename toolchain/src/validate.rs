//! Validation of the LLVM IR of each stencil before code generation:
//!
//! - a call to a hole symbol (`_JIT_CONTINUE`, `_JIT_<NAME>_TARGET`), declared as a function
//!   or as data called through its address, must be a `musttail`
//!   call, so it compiles to a jump (the entry shim is exempt: it calls its continuation);
//!   any other path ends in `ret` (back through the shim) or `unreachable`;
//! - no exception-handling control flow (`invoke`, `callbr`, `resume`, ...);
//! - no thread-local globals, no stack-protector attributes;
//! - no inline assembly (call-site `asm(...)` or module-level `asm`): its bytes never pass
//!   through the checks below, so a stray `ret` or clobbered register would go unnoticed
//!   (except `cpjit.h`'s narrow-operand reads, recognised exactly by `narrow.rs`, and its
//!   opaque-value barrier `CPJIT_OPAQUE`, an empty template, by `validate/opaque.rs`);
//! - the stencil's calling convention and signature are the set's ABI: `preserve_none`
//!   `i64 (ptr, ptr)` for ops (cpjit.h's `cpjit_op`; any register-sized return, a pointer
//!   too), the C convention for the entry shim;
//!   an op declared with `CPJIT_CACHED_OP(NAME, IN, OUT)` (annotation `cpjit.cached IN OUT
//!   N P F Q`) takes N `i64` cached values after the pointers, with P pinned ones before the
//!   last (`CPJIT_PIN_REGS`, the JIT's registers: any op may read or set them, unchecked;
//!   cpjit.h says why they go there, [`CacheState::parameter`](cache_state::CacheState::parameter)),
//!   then F `double` float cache registers and Q pinned float ones (`CPJIT_FLOAT_CACHE`: IN
//!   and OUT then name each slot's class, and the checks below go per class; a target whose
//!   flags pass no `double` in FP registers is refused), and its IR must match its declared
//!   cache state: no register past IN is read (it may only be passed on in its own position),
//!   every continuation or jump gives registers below OUT a value and none past OUT, except
//!   a jump to a target declared spilled (`CPJIT_DECLARE_SPILLED_TARGET`, annotation
//!   `cpjit.spilled_target` on the hole), which must pass no cached value at all;
//! - no writable global data unless the template asks for per-instance data explicitly
//!   (`CPJIT_INSTANCE_DATA`): every instance gets a private copy of the data it references,
//!   so a plain writable `static` would silently be neither shared nor per op;
//! - every referenced symbol is a hole, defined in the same module, or allowed by the
//!   manifest's `allowed_symbols`;
//! - the size budget: at most `[limits] ir_instructions` IR instructions per stencil
//!   (helpers included), checked before code generation, whose time grows superlinearly.
//!
//! Errors name the target, template, stencil and offending instruction or symbol. The walk
//! uses llvm-sys directly because inkwell does not expose constant-expression operands.

use crate::advice;
use crate::error::Error;
use crate::llvm;
use crate::manifest::Manifest;
use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::target::{LLVMGetModuleDataLayout, LLVMPointerSize};
use inkwell::llvm_sys::{LLVMOpcode, LLVMTailCallKind, LLVMTypeKind};
use inkwell::module::Module;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::CStr;

/// What validation learned about the stencils of one module.
#[derive(Debug, Default, Clone)]
pub struct IrFacts {
    /// Stencils that tail-call `<prefix>CONTINUE` somewhere.
    pub continues: BTreeSet<String>,
    /// Names of the stencil functions defined in the module.
    pub stencils: BTreeSet<String>,
    /// The declared cache state (entry, exit, whether it has float cache slots) of every
    /// stencil declared with `CPJIT_CACHED_OP`, by name; a family checks it against its
    /// `cached` parameters.
    pub cache_states: BTreeMap<String, (usize, usize, bool)>,
    /// What the IR of every cached op shows of its memory stack, by name; a family checks
    /// its declared stack effects against it (`stack_use.rs`).
    pub stack_uses: BTreeMap<String, crate::stack_use::StackUse>,
}

/// The annotation `CPJIT_INSTANCE_DATA` (cpjit.h) puts on a global: deliberate
/// per-instance writable data.
pub const INSTANCE_DATA_ANNOTATION: &str = "cpjit.instance_data";

/// The annotation prefix `CPJIT_CACHED_OP` (cpjit.h) puts on a cached op, followed by its
/// entry state, exit state, number of cache registers and of pinned registers:
/// `cpjit.cached 1,2,3,0` (a fourth number absent means no pinned register).
pub const CACHED_ANNOTATION: &str = "cpjit.cached ";

/// The annotation `CPJIT_DECLARE_SPILLED_TARGET` (cpjit.h) puts on a jump-target hole that
/// cached ops enter with nothing cached (a side exit to uncached code).
pub const SPILLED_TARGET_ANNOTATION: &str = "cpjit.spilled_target";

/// LLVM's `CallingConv::PreserveNone` (llvm/IR/CallingConv.h; not in llvm-sys's enum).
const PRESERVE_NONE_CC: u32 = 21;
/// LLVM's `CallingConv::C`.
const C_CC: u32 = 0;

use crate::target::OpCallingConvention;

mod cache_state;
mod ir;
mod opaque;

use cache_state::CacheState;
use ir::{
    calling_convention_name, function_type_text, is_indirect_musttail, is_no_value, module_symbols,
    no_fp_arguments, shorten,
};

/// Where errors happened: `"<target>: <template>"`.
pub struct Site<'a> {
    pub target: &'a str,
    pub template: &'a str,
    /// For a family member: the name its stencil gets by the family's rule, which errors
    /// use (rather than the template's function or file name).
    pub member: Option<&'a str>,
    /// The calling convention the target's ops must have (`targets/<triple>.toml`).
    pub op_cc: crate::target::OpCallingConvention,
}

/// Checks every stencil function of `module`; returns all errors found.
pub fn validate(module: &Module, manifest: &Manifest, site: &Site) -> Result<IrFacts, Vec<Error>> {
    let mut v = Validator {
        manifest,
        site,
        errors: Vec::new(),
        facts: IrFacts::default(),
        stencil: String::new(),
        display: String::new(),
        visited: HashSet::new(),
        instance_data: HashSet::new(),
        spilled_targets: HashSet::new(),
        instructions: 0,
        jump_holes: Vec::new(),
    };
    let module_ref = module.as_mut_ptr();
    // SAFETY: every pointer below comes from this live module and is only read.
    unsafe {
        v.jump_holes = module_symbols(module_ref)
            .into_iter()
            .filter(|name| manifest.is_jump_hole(name))
            .collect();
        v.instance_data = llvm::annotated_globals(module_ref, INSTANCE_DATA_ANNOTATION);
        v.spilled_targets = llvm::annotated_globals(module_ref, SPILLED_TARGET_ANNOTATION);
        let cached = llvm::annotation_texts(module_ref, CACHED_ANNOTATION);
        let mut f = LLVMGetFirstFunction(module_ref);
        while !f.is_null() {
            if LLVMIsDeclaration(f) == 0 {
                let name = llvm::value_name(f);
                if manifest.is_stencil_symbol(&name) {
                    let is_shim = manifest.is_shim(&name, site.template);
                    v.stencil = name.clone();
                    v.display = match site.member {
                        Some(member) => member.to_string(),
                        None => manifest.stencil_name(&name, site.template),
                    };
                    v.facts.stencils.insert(name.clone());
                    v.visited.clear();
                    v.instructions = 0;
                    match cached.get(&(f as usize)).map(|t| CacheState::parse(t)) {
                        // An unreadable state: the signature cannot be checked against it.
                        Some(Err(e)) => v.error(e),
                        Some(Ok(state)) => {
                            v.facts
                                .cache_states
                                .insert(name.clone(), (state.entry, state.exit, state.floats > 0));
                            if v.signature(f, is_shim, Some(state)) {
                                v.cache_state(f, state);
                                let exit = |call| {
                                    v.jump_hole_call(call)?;
                                    let callee = LLVMGetCalledValue(call) as usize;
                                    Some(!v.spilled_targets.contains(&callee))
                                };
                                let seen = crate::stack_use::read(f, exit);
                                v.facts.stack_uses.insert(name.clone(), seen);
                            }
                        }
                        None => {
                            v.signature(f, is_shim, None);
                        }
                    }
                    v.function(f, is_shim);
                    v.size_budget();
                }
            }
            f = LLVMGetNextFunction(f);
        }
        let mut asm_len = 0usize;
        let asm = LLVMGetModuleInlineAsm(module_ref, &mut asm_len);
        if !asm.is_null() && asm_len > 0 {
            let text =
                String::from_utf8_lossy(std::slice::from_raw_parts(asm.cast::<u8>(), asm_len));
            v.display = String::from("(module)");
            v.error(format!(
                "module-level inline assembly `{}` (stencils must be plain C: the toolchain cannot \
                 check assembly it did not generate)",
                shorten(text.trim())
            ));
        }
        let mut g = LLVMGetFirstGlobal(module_ref);
        while !g.is_null() {
            if LLVMIsThreadLocal(g) != 0 {
                let name = llvm::value_name(g);
                v.display = String::from("(module)");
                v.error(format!(
                    "thread-local global `{name}` (stencils cannot use thread-local storage)"
                ));
            }
            g = LLVMGetNextGlobal(g);
        }
    }
    if v.errors.is_empty() {
        Ok(v.facts)
    } else {
        Err(v.errors)
    }
}

struct Validator<'a> {
    manifest: &'a Manifest,
    site: &'a Site<'a>,
    errors: Vec<Error>,
    facts: IrFacts,
    stencil: String,
    /// What errors call the current stencil (its unit's name in a one-function-per-unit set).
    display: String,
    /// Functions and globals already walked for the current stencil.
    visited: HashSet<usize>,
    /// Globals marked `CPJIT_INSTANCE_DATA`.
    instance_data: HashSet<usize>,
    /// Jump-target holes declared spilled (`CPJIT_DECLARE_SPILLED_TARGET`): cached ops
    /// jump to them with nothing cached, whatever their exit state.
    spilled_targets: HashSet<usize>,
    /// IR instructions of the current stencil and the helpers it reaches.
    instructions: usize,
    /// The continuation and jump-target holes the module names (for "did you mean").
    jump_holes: Vec<String>,
}

impl Validator<'_> {
    fn error(&mut self, what: String) {
        let msg = format!(
            "{}: {}: stencil `{}`: {what}",
            self.site.target, self.site.template, self.display
        );
        if !self.errors.iter().any(|e| e.0 == msg) {
            self.errors.push(Error(msg));
        }
    }

    /// Checks the stencil's calling convention and signature against the set's ABI (and
    /// its declared cache state, for a cached op); whether the signature matched.
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn signature(
        &mut self,
        f: LLVMValueRef,
        is_shim: bool,
        cache: Option<CacheState>,
    ) -> bool {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let (want_cc, want_cc_name) = if is_shim {
                (
                    C_CC,
                    "the C calling convention (the entry shim is called from native code)",
                )
            } else {
                match self.site.op_cc {
                OpCallingConvention::PreserveNone => {
                    (PRESERVE_NONE_CC, "preserve_none (declare it with CPJIT_CC)")
                }
                OpCallingConvention::C => (
                    C_CC,
                    "the C calling convention (this target has no preserve_none; declare it with CPJIT_CC)",
                ),
            }
            };
            let cc = LLVMGetFunctionCallConv(f);
            if cc != want_cc {
                self.error(format!(
                    "calling convention is {} but the set's ABI requires {want_cc_name}",
                    calling_convention_name(cc)
                ));
            }
            let ty = LLVMGlobalGetValueType(f);
            let found = function_type_text(ty);
            let ret = LLVMGetReturnType(ty);
            // The exit status comes back in the return register: any value of its width does
            // (an integer of the pointer's width, or a pointer, as `T *op(frame, ...)` returns).
            let register_bits =
                8 * LLVMPointerSize(LLVMGetModuleDataLayout(LLVMGetGlobalParent(f)));
            let ret_ok = match LLVMGetTypeKind(ret) {
                LLVMTypeKind::LLVMIntegerTypeKind => LLVMGetIntTypeWidth(ret) == register_bits,
                LLVMTypeKind::LLVMPointerTypeKind => true,
                _ => false,
            };
            let count = LLVMCountParamTypes(ty) as usize;
            let mut params = vec![std::ptr::null_mut(); count];
            LLVMGetParamTypes(ty, params.as_mut_ptr());
            let want = self.manifest.parameters;
            let ints = cache.map_or(0, |c| c.registers + c.pinned);
            let floats = cache.map_or(0, |c| c.floats + c.pinned_floats);
            if is_shim && cache.is_some() {
                self.error(
                "the entry shim is declared with CPJIT_CACHED_OP, but it is called from native \
                 code with the pointer arguments only"
                    .into(),
            );
                return false;
            }
            let is_i64 = |p: LLVMTypeRef| {
                LLVMGetTypeKind(p) == LLVMTypeKind::LLVMIntegerTypeKind
                    && LLVMGetIntTypeWidth(p) == 64
            };
            let is_double = |p: LLVMTypeRef| LLVMGetTypeKind(p) == LLVMTypeKind::LLVMDoubleTypeKind;
            let params_ok = count == want + ints + floats
                && params[..want.min(count)]
                    .iter()
                    .all(|&p| LLVMGetTypeKind(p) == LLVMTypeKind::LLVMPointerTypeKind)
                && params[want.min(count)..count.min(want + ints)]
                    .iter()
                    .all(|&p| is_i64(p))
                && params[count.min(want + ints)..]
                    .iter()
                    .all(|&p| is_double(p));
            if let Some(why) = cache
                .filter(|c| c.floats + c.pinned_floats > 0)
                .and_then(|_| no_fp_arguments(f, self.site.target))
            {
                self.error(format!(
                    "has float cache registers (CPJIT_FLOAT_CACHE, CPJIT_PIN_FLOAT_REGS), but \
                     this target passes no `double` argument in an FP register: {why}; build the \
                     family without them for this target"
                ));
                return false;
            }
            if let (Some(c), false) = (cache, params_ok && ret_ok) {
                let wanted = [vec!["ptr"; want], vec!["i64"; ints], vec!["double"; floats]]
                    .concat()
                    .join(", ");
                self.error(format!(
                "signature is `{found}` but the op is declared cached (CPJIT_CACHED_OP, IN = {}, \
                 OUT = {}), which requires `i64 ({wanted})` (cpjit.h's cpjit_cached_op; \
                 the return may be any register-sized type: `ptr`, `i{register_bits}`)",
                c.entry, c.exit
            ));
                return false;
            }
            if !ret_ok || !params_ok || LLVMIsFunctionVarArg(ty) != 0 {
                let wanted = vec!["ptr"; want].join(", ");
                self.error(format!(
                "signature is `{found}` but the set's ABI requires `i64 ({wanted})` (or any \
                 register-sized return: `ptr`, `i{register_bits}`){}",
                if want == 2 {
                    ", i.e. `int64_t op(struct cpjit_frame *frame, uint64_t *sp)` (cpjit.h's cpjit_op)"
                } else {
                    " ([stencils] parameters in manifest.toml)"
                }
            ));
                return false;
            }
            true
        }
    }

    /// Checks a cached op's IR against its declared cache state: registers past the entry
    /// state hold nothing, so they may only be passed on unchanged in their own position;
    /// every continuation or jump passes a value in each register below the exit state and
    /// none past it. Errors name the parameter (`c<k>`, argument number) and the hole.
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn cache_state(&mut self, f: LLVMValueRef, state: CacheState) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let first = self.manifest.parameters;
            for k in state.all().filter(|&r| !state.holds(state.entry, r)) {
                let at = state.parameter(first, k);
                let param = LLVMGetParam(f, at as u32);
                let mut u = LLVMGetFirstUse(param);
                while !u.is_null() {
                    let user = LLVMGetUser(u);
                    if !self.is_pass_on(user, param, at) {
                        self.error(format!(
                            "reads cached register {k} (parameter {}), but the op declares {}: \
                         only the registers of its cached values hold stack values on entry: `{}`",
                            at + 1,
                            state.describe("IN", state.entry),
                            print(user)
                        ));
                        break;
                    }
                    u = LLVMGetNextUse(u);
                }
            }
            let mut bb = LLVMGetFirstBasicBlock(f);
            while !bb.is_null() {
                let mut inst = LLVMGetFirstInstruction(bb);
                while !inst.is_null() {
                    if let Some(hole) = self.jump_hole_call(inst) {
                        self.exit_registers(f, inst, &hole, state);
                    }
                    inst = LLVMGetNextInstruction(inst);
                }
                bb = LLVMGetNextBasicBlock(bb);
            }
        }
    }

    /// The registers a continuation or jump (`call`, a musttail call of a jump hole) passes.
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn exit_registers(
        &mut self,
        f: LLVMValueRef,
        call: LLVMValueRef,
        hole: &str,
        state: CacheState,
    ) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let first = self.manifest.parameters;
            let args = LLVMGetNumArgOperands(call) as usize;
            let all = state.registers + state.pinned + state.floats + state.pinned_floats;
            if args != first + all {
                return; // clang's musttail check already requires the op's own signature.
            }
            let spilled = self
                .spilled_targets
                .contains(&(LLVMGetCalledValue(call) as usize));
            // On a path where the compiler knows what an incoming register holds, it may pass
            // that instead of the register: another incoming register equal to it (after a
            // compare of the two), or a constant (an operand hole's address is a constant
            // expression). Past OUT only the former is taken for nothing (a constant there
            // could be a value the op forgot to spill); to a spilled target both are.
            let incoming = |arg: LLVMValueRef| {
                state
                    .all()
                    .any(|j| LLVMGetParam(f, state.parameter(first, j) as u32) == arg)
            };
            for k in state.all() {
                let at = state.parameter(first, k);
                let arg = LLVMGetOperand(call, at as u32);
                let own = LLVMGetParam(f, at as u32);
                let nothing = is_no_value(arg) || (arg == own && !state.holds(state.entry, k));
                let live = state.holds(state.exit, k);
                let known = incoming(arg) || LLVMIsConstant(arg) != 0;
                // A spilled target is entered with nothing cached: the op's own incoming
                // registers may pass through (they cost nothing), and so may what the compiler
                // knows one holds; any computed value is an error.
                if spilled {
                    if arg != own && !nothing && !known {
                        self.error(format!(
                    "passes a value in cached register {k} (argument {}) to `{hole}`, which is \
                     declared spilled (CPJIT_DECLARE_SPILLED_TARGET: entered with nothing \
                     cached): spill every value first (CPJIT_JUMP_SPILLED): `{}`",
                    at + 1,
                        print(call)
                    ));
                    }
                } else if live && nothing {
                    self.error(format!(
                    "passes no value in cached register {k} (argument {}) to `{hole}`, but the \
                     op declares {}: the registers of its cached values must hold stack values \
                     on exit",
                    at + 1,
                    state.describe("OUT", state.exit),
                ));
                } else if !live && !nothing && arg != own && !incoming(arg) {
                    self.error(format!(
                        "passes a value in cached register {k} (argument {}) to `{hole}`, but the \
                     op declares {}: registers OUT does not cache hold nothing (spill the value, \
                     or declare a larger OUT): `{}`",
                        at + 1,
                        state.describe("OUT", state.exit),
                        print(call)
                    ));
                }
            }
        }
    }

    /// Whether `user` only passes `param` on as argument `position` of a jump-hole call, or
    /// of a musttail call through a pointer (code another trace put in a link slot, entered
    /// with the op's own convention: passing a register on in its own position reads
    /// nothing, whatever state the callee is entered in).
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn is_pass_on(&self, user: LLVMValueRef, param: LLVMValueRef, position: usize) -> bool {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            if self.jump_hole_call(user).is_none() && !is_indirect_musttail(user) {
                return false;
            }
            let args = LLVMGetNumArgOperands(user) as usize;
            (0..args).all(|i| (LLVMGetOperand(user, i as u32) == param) == (i == position))
        }
    }

    /// The hole's name when `inst` is a musttail call of a jump hole (continuation or target).
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn jump_hole_call(&self, inst: LLVMValueRef) -> Option<String> {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            if LLVMIsACallInst(inst).is_null()
                || LLVMGetTailCallKind(inst) != LLVMTailCallKind::LLVMTailCallKindMustTail
            {
                return None;
            }
            let callee = LLVMGetCalledValue(inst);
            if callee.is_null() || LLVMIsAGlobalValue(callee).is_null() {
                return None;
            }
            let name = llvm::value_name(callee);
            self.manifest.is_jump_hole(&name).then_some(name)
        }
    }

    /// Rejects a stencil over the manifest's IR instruction budget (before code generation,
    /// whose scheduling time grows superlinearly with function size).
    fn size_budget(&mut self) {
        let limit = self.manifest.limits.ir_instructions;
        if self.instructions > limit {
            self.error(format!(
                "{} IR instructions (helpers included) exceed the limit [limits] ir_instructions = {limit} \
                 in manifest.toml; split the op or raise the limit",
                self.instructions
            ));
        }
    }

    /// Walks one defined function: `is_entry` is the stencil itself (as opposed to a local
    /// helper it calls); `exempt` relaxes the musttail rule (the entry shim).
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn function(&mut self, f: LLVMValueRef, exempt: bool) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            if !self.visited.insert(f as usize) {
                return;
            }
            for attr in ["ssp", "sspstrong", "sspreq"] {
                let kind = LLVMGetEnumAttributeKindForName(attr.as_ptr().cast(), attr.len());
                if !LLVMGetEnumAttributeAtIndex(f, u32::MAX, kind).is_null() {
                    let name = llvm::value_name(f);
                    self.error(format!(
                    "function `{name}` has the stack-protector attribute `{attr}` (remove -fstack-protector*)"
                ));
                }
            }
            let mut bb = LLVMGetFirstBasicBlock(f);
            while !bb.is_null() {
                let mut inst = LLVMGetFirstInstruction(bb);
                while !inst.is_null() {
                    self.instructions += 1;
                    self.instruction(inst, exempt);
                    inst = LLVMGetNextInstruction(inst);
                }
                bb = LLVMGetNextBasicBlock(bb);
            }
        }
    }

    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn instruction(&mut self, inst: LLVMValueRef, exempt: bool) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let opcode = LLVMGetInstructionOpcode(inst);
            match opcode {
                LLVMOpcode::LLVMInvoke
                | LLVMOpcode::LLVMCallBr
                | LLVMOpcode::LLVMResume
                | LLVMOpcode::LLVMCatchSwitch
                | LLVMOpcode::LLVMCatchRet
                | LLVMOpcode::LLVMCleanupRet
                | LLVMOpcode::LLVMLandingPad => {
                    self.error(format!("unsupported control flow: `{}`", print(inst)));
                    return;
                }
                LLVMOpcode::LLVMCall => self.call(inst, exempt),
                _ => {}
            }
            for i in 0..LLVMGetNumOperands(inst).max(0) as u32 {
                let op = LLVMGetOperand(inst, i);
                if !op.is_null() {
                    self.value(op, inst);
                }
            }
        }
    }

    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn call(&mut self, inst: LLVMValueRef, exempt: bool) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let callee = LLVMGetCalledValue(inst);
            if !callee.is_null() && !LLVMIsAInlineAsm(callee).is_null() {
                // `cpjit.h`'s narrow-operand reads (see `narrow.rs`) and its opaque-value
                // barrier, whose template is empty (`validate/opaque.rs`), are the exceptions.
                if crate::narrow::is_narrow_asm(inst, callee, &self.manifest.hole_prefix)
                    || opaque::is_opaque_asm(inst, callee)
                {
                    return;
                }
                self.error(format!(
                "inline assembly is not allowed in stencils (the toolchain cannot check code it \
                 did not generate: a `ret`, a jump or a reserved register would go unnoticed): `{}`; \
                 fix: write the op in C (to hide a value from the compiler without an instruction, \
                 `CPJIT_OPAQUE(x)` of cpjit.h)",
                print(inst)
            ));
                return;
            }
            // A hole is recognised by its symbol, whatever its declaration: a function
            // (`extern cpjit_op _JIT_CONTINUE`) or data reached through its address
            // (`extern void _JIT_CONTINUE;` ... `((op *)&_JIT_CONTINUE)(...)`), whose callee in
            // IR is a global variable.
            if callee.is_null() || LLVMIsAGlobalValue(callee).is_null() {
                return; // Indirect call: no symbol involved.
            }
            let name = llvm::value_name(callee);
            let prefix = &self.manifest.hole_prefix;
            if !name.starts_with(prefix.as_str()) {
                return; // Checked as a symbol reference with the other operands.
            }
            let musttail = LLVMGetTailCallKind(inst) == LLVMTailCallKind::LLVMTailCallKindMustTail;
            if !self.manifest.is_jump_hole(&name) {
                // A musttail call through an operand jumps to the address it holds; through a
                // name this close to a jump hole's, it is a misspelt jump hole.
                if musttail {
                    self.misspelt_jump_hole(&name, inst);
                    return;
                }
                // Data holes other than the continuation and jump targets are operands: calling
                // one calls the address the runtime patches in (e.g. a helper), not another
                // instance.
                if LLVMIsAFunction(callee).is_null() {
                    return;
                }
            }
            if name[prefix.len()..] == *"CONTINUE" {
                self.facts.continues.insert(self.stencil.clone());
            }
            if !musttail && !exempt {
                self.error(format!(
                    "calls hole `{name}` without musttail (use CPJIT_CONTINUE/CPJIT_JUMP): `{}`",
                    print(inst)
                ));
            }
        }
    }

    /// Refuses the musttail call `inst` of hole `name`, which is neither the continuation
    /// nor a jump target, when its name is within [`advice::MISSPELT`] edits of a jump
    /// hole's: a misspelt target suffix would otherwise silently make it an operand. A
    /// name farther from every jump hole's is a jump to the address an operand holds
    /// (`templates/testing/positions.c`'s `op_test_operand_jump`), which is allowed.
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn misspelt_jump_hole(&mut self, name: &str, inst: LLVMValueRef) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let prefix = &self.manifest.hole_prefix;
            let suffix = &self.manifest.target_suffix;
            let (nearest, distance) =
                advice::nearest_jump_hole(name, prefix, suffix, &self.jump_holes);
            if distance > advice::MISSPELT {
                return;
            }
            self.error(format!(
                "tail-calls hole `{name}`, which is neither the continuation (`{prefix}CONTINUE`) \
             nor a jump target (`{prefix}<NAME>{suffix}`) but {} from one, so the runtime \
             would take it for an operand; did you mean `{nearest}`? fix: rename the hole \
             `{nearest}` (or declare the target with CPJIT_DECLARE_TARGET); a jump to the \
             address an operand holds needs a name farther from the jump holes': `{}`",
                crate::writer::plural(distance, "edit"),
                print(inst)
            ));
        }
    }

    /// Checks a value used by `user` (an instruction): globals are classified, constant
    /// expressions and aggregates are walked, defined globals' initializers too.
    ///
    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn value(&mut self, v: LLVMValueRef, user: LLVMValueRef) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            if !LLVMIsAGlobalValue(v).is_null() {
                self.global(v, user);
            } else if !LLVMIsAConstant(v).is_null() {
                if !self.visited.insert(v as usize) {
                    return;
                }
                for i in 0..LLVMGetNumOperands(v).max(0) as u32 {
                    let op = LLVMGetOperand(v, i);
                    if !op.is_null() {
                        self.value(op, user);
                    }
                }
            }
        }
    }

    /// # Safety
    /// Every LLVM reference passed in belongs to a live module of the calling thread's
    /// context.
    unsafe fn global(&mut self, g: LLVMValueRef, user: LLVMValueRef) {
        // SAFETY: the caller passes references into a live module (this function's # Safety).
        unsafe {
            let name = llvm::value_name(g);
            if !LLVMIsAGlobalVariable(g).is_null() && LLVMIsThreadLocal(g) != 0 {
                self.error(format!(
                    "uses thread-local global `{name}`: `{}`",
                    print(user)
                ));
                return;
            }
            if LLVMIsDeclaration(g) != 0 {
                if name.starts_with("llvm.") && !LLVMIsAFunction(g).is_null() {
                    return; // Intrinsics; anything they lower to is checked in the object.
                }
                if !name.starts_with(self.manifest.hole_prefix.as_str())
                    && !self.manifest.is_allowed_symbol(&name)
                {
                    self.error(format!(
                    "references `{name}`, which is neither a hole (`{}*`), defined in the template, \
                     nor in allowed_symbols: `{}`; {}",
                    self.manifest.hole_prefix,
                    print(user),
                    crate::advice::symbol_fix(&name)
                ));
                }
                return;
            }
            if !LLVMIsAFunction(g).is_null() {
                // A local helper that was not inlined: its body ends up next to the stencil.
                if !self.manifest.is_stencil_symbol(&name) {
                    self.function(g, false);
                }
            } else if !LLVMIsAGlobalVariable(g).is_null() && self.visited.insert(g as usize) {
                if LLVMIsGlobalConstant(g) == 0 && !self.instance_data.contains(&(g as usize)) {
                    self.error(format!(
                    "writable static `{name}`: every instance of a stencil gets a private copy of \
                     the data it references, so it is shared neither between instances nor between \
                     ops; make it `const`, keep shared state behind the frame pointer, or declare \
                     it CPJIT_INSTANCE_DATA for deliberate per-instance data: `{}`",
                    print(user)
                ));
                }
                let init = LLVMGetInitializer(g);
                if !init.is_null() {
                    self.value(init, user);
                }
            }
        }
    }
}

/// The instruction as LLVM prints it, trimmed and shortened for messages.
///
/// # Safety
/// Every LLVM reference passed in belongs to a live module of the calling thread's
/// context.
unsafe fn print(v: LLVMValueRef) -> String {
    // SAFETY: the caller passes references into a live module (this function's # Safety).
    unsafe {
        let raw = LLVMPrintValueToString(v);
        let text = CStr::from_ptr(raw).to_string_lossy().trim().to_string();
        LLVMDisposeMessage(raw);
        shorten(&text)
    }
}
