//! The template library of the LLVM peer: the same LLVM IR that the stencils were compiled
//! from, one module per stencil.
//!
//! The bitcode comes from the toolchain's own code (`cpjit_toolchain::clang`): the set's
//! manifest and the host target file give the exact clang-19 flags of the stencil build, so
//! the peer compiles the very IR the stencils came from; no op is written twice. Each
//! translation unit is then split into one module per stencil (the other stencils deleted,
//! dead globals removed), which a trace clones once per instance.

use cpjit_toolchain::cc1::{self, Cc1Command, GroupInput};
use cpjit_toolchain::family::{self, Member};
use cpjit_toolchain::{clang, llvm, manifest::Manifest, target::Target};
use inkwell::context::Context;
use inkwell::llvm_sys::core::LLVMGetFirstUse;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, RelocMode, Target as LlvmTarget, TargetMachine};
use inkwell::types::FunctionType;
use inkwell::values::AsValueRef;
use inkwell::OptimizationLevel;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The triple the peer compiles for: the target of the set copy-and-patch stitches
/// (the one built for this process).
pub fn triple() -> &'static str {
    crate::copy_patch::set().target
}

/// One module per stencil name, all in one context.
pub struct Library<'ctx> {
    /// The prefix of hole symbols (the manifest's `hole_prefix`).
    pub hole_prefix: String,
    modules: RefCell<HashMap<String, Module<'ctx>>>,
    /// The host target machine (for the IR pass pipelines).
    pub machine: TargetMachine,
    context: &'ctx Context,
    /// Where family members not loaded yet are compiled from ([`Library::with_members`]).
    members: Option<MemberSource>,
}

/// A template set's family members, compiled on first use: the set's directory and the
/// target files' (see [`member_bitcode`]).
pub struct MemberSource {
    pub templates: PathBuf,
    pub targets: PathBuf,
}

/// Bitcode of some translation units of a template set, as the stencil build produces it.
pub struct TemplateIr {
    pub hole_prefix: String,
    /// (unit path relative to the set, bitcode)
    pub units: Vec<(String, Vec<u8>)>,
    /// (family member's stencil name, bitcode of its unit): each defines the one stencil.
    pub members: Vec<(String, Vec<u8>)>,
}

/// Compiles `units` (paths relative to `templates`) to bitcode with the stencil build's
/// flags for [`triple`].
pub fn template_bitcode(
    templates: &Path,
    targets: &Path,
    units: &[&str],
) -> Result<TemplateIr, String> {
    let manifest = Manifest::load(templates).map_err(|e| e.to_string())?;
    let target =
        Target::load(&targets.join(format!("{}.toml", triple()))).map_err(|e| e.to_string())?;
    let flags = clang::compile_flags(&manifest, &target);
    let units = units
        .iter()
        .map(|unit| {
            let path = templates.join(unit);
            let pp = clang::preprocess(&flags, &path).map_err(|e| format!("{unit}: {e}"))?;
            let bc = clang::compile_bitcode(&flags, &pp).map_err(|e| format!("{unit}: {e}"))?;
            Ok((unit.to_string(), bc))
        })
        .collect::<Result<_, String>>()?;
    Ok(TemplateIr {
        hole_prefix: manifest.hole_prefix,
        units,
        members: Vec::new(),
    })
}

/// The set's family members that `wanted` keeps, compiled to bitcode as the stencil build
/// compiles them (each member's defines, then its source; `clang -cc1` on many inputs per
/// process, one process per core), as (stencil name, bitcode).
pub fn member_bitcode(
    templates: &Path,
    targets: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let manifest = Manifest::load(templates).map_err(|e| e.to_string())?;
    let target =
        Target::load(&targets.join(format!("{}.toml", triple()))).map_err(|e| e.to_string())?;
    let flags = clang::compile_flags(&manifest, &target);
    let members: Vec<Member> = family::all_members(&manifest.families, &manifest.root)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|m| wanted(&m.stencil))
        .collect();
    let limit = manifest.limits.clang_time() * members.len().max(1) as u32;
    let command = Cc1Command::from_driver(&flags, None, limit).map_err(|e| e.to_string())?;
    let inputs = members
        .iter()
        .map(|m| {
            let text =
                cc1::wrapper(&manifest.root.join(&m.source), &m.defines).ok_or_else(|| {
                    format!(
                        "{}: family member {}: its defines cannot be written as C",
                        templates.display(),
                        m.stencil
                    )
                })?;
            Ok(GroupInput {
                name: cc1::input_name(&m.stencil),
                text,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = inputs.len().div_ceil(cores).max(1);
    let bitcode = std::thread::scope(|scope| {
        let groups: Vec<_> = inputs
            .chunks(chunk)
            .map(|group| scope.spawn(|| command.compile_group(group, limit)))
            .collect();
        groups
            .into_iter()
            .map(|g| g.join().expect("a clang group thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(|e| format!("{}: family members: {e}", templates.display()))?;
    let bitcode = bitcode.into_iter().flat_map(|g| g.bitcode);
    Ok(members
        .into_iter()
        .map(|m| m.stencil)
        .zip(bitcode)
        .collect())
}

impl<'ctx> Library<'ctx> {
    /// Parses each unit's bitcode and keeps one module for each stencil it defines whose
    /// name is in `stencils`.
    pub fn new(
        context: &'ctx Context,
        ir: &TemplateIr,
        stencils: &[&str],
    ) -> Result<Library<'ctx>, String> {
        llvm::initialize();
        let machine = host_machine()?;
        let mut modules = HashMap::new();
        for (unit, bc) in &ir.units {
            let tu = llvm::parse_bitcode(context, bc, unit).map_err(|e| format!("{unit}: {e}"))?;
            for name in stencils {
                if tu
                    .get_function(name)
                    .is_none_or(|f| f.count_basic_blocks() == 0)
                {
                    continue;
                }
                let m = tu.clone();
                // Keep only this stencil: every other external definition of the unit is
                // another stencil (the toolchain rejects direct calls between them).
                for f in m.get_functions().collect::<Vec<_>>() {
                    let fname = f.get_name().to_string_lossy().into_owned();
                    if fname == *name
                        || f.count_basic_blocks() == 0
                        || f.get_linkage() != Linkage::External
                    {
                        continue;
                    }
                    // SAFETY: a valid function of `m`.
                    let used = unsafe { !LLVMGetFirstUse(f.as_value_ref()).is_null() };
                    if used {
                        return Err(format!(
                            "{unit}: {name}: cannot split the unit: {fname} is defined and used"
                        ));
                    }
                    // SAFETY: `f` belongs to `m` and has no uses.
                    unsafe { f.delete() };
                }
                m.run_passes("globaldce", &machine, PassBuilderOptions::create())
                    .map_err(|e| format!("{unit}: {name}: globaldce: {e}"))?;
                m.verify()
                    .map_err(|e| format!("{unit}: {name}: invalid module: {e}"))?;
                modules.insert(name.to_string(), m);
            }
        }
        for (name, bc) in &ir.members {
            modules.insert(name.clone(), member_module(context, name, bc)?);
        }
        if let Some(missing) = stencils.iter().find(|s| !modules.contains_key(**s)) {
            return Err(format!(
                "no template unit defines stencil {missing} (units: {})",
                ir.units
                    .iter()
                    .map(|(u, _)| u.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(Library {
            hole_prefix: ir.hole_prefix.clone(),
            modules: RefCell::new(modules),
            machine,
            context,
            members: None,
        })
    }

    /// The library, compiling the family members of `source` that a trace uses but the
    /// library lacks when it first needs them.
    pub fn with_members(mut self, source: MemberSource) -> Library<'ctx> {
        self.members = Some(source);
        self
    }

    /// Loads the family members among `names` not loaded yet (one clang group per core).
    pub fn load_members(&self, names: &[&str]) -> Result<(), String> {
        let missing: Vec<&str> = {
            let modules = self.modules.borrow();
            names
                .iter()
                .copied()
                .filter(|n| !modules.contains_key(*n))
                .collect()
        };
        let Some(source) = self.members.as_ref().filter(|_| !missing.is_empty()) else {
            return Ok(());
        };
        let bitcode = member_bitcode(&source.templates, &source.targets, |s| missing.contains(&s))?;
        let mut modules = self.modules.borrow_mut();
        for (name, bc) in &bitcode {
            modules.insert(name.clone(), member_module(self.context, name, bc)?);
        }
        Ok(())
    }

    /// A copy of stencil `name`'s module (a family member's compiled now if needed).
    pub fn template(&self, name: &str) -> Result<Module<'ctx>, String> {
        self.load_members(&[name])?;
        self.modules
            .borrow()
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no template module for {name}"))
    }

    /// The type of stencil `name`'s function, if its module is loaded.
    pub fn stencil_type(&self, name: &str) -> Option<FunctionType<'ctx>> {
        Some(
            self.modules
                .borrow()
                .get(name)?
                .get_function(name)?
                .get_type(),
        )
    }
}

/// The module of family member `name` from its unit's bitcode, its one stencil renamed
/// after the member as the toolchain does (`rename_member`).
fn member_module<'ctx>(
    context: &'ctx Context,
    name: &str,
    bc: &[u8],
) -> Result<Module<'ctx>, String> {
    let m = llvm::parse_bitcode(context, bc, name).map_err(|e| format!("{name}: {e}"))?;
    let defined: Vec<_> = m
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0 && f.get_linkage() == Linkage::External)
        .collect();
    let [stencil] = defined.as_slice() else {
        return Err(format!(
            "family member {name}: its unit defines {} external functions, not one stencil",
            defined.len()
        ));
    };
    stencil.as_global_value().set_name(name);
    // The annotations (a cached op's states, a spilled target) are for the toolchain's
    // checks; they would keep a target the op never jumps to referenced.
    if let Some(annotations) = m.get_global("llvm.global.annotations") {
        // SAFETY: a global of `m` that nothing else references.
        unsafe { annotations.delete() };
    }
    m.verify()
        .map_err(|e| format!("family member {name}: invalid module: {e}"))?;
    Ok(m)
}

/// A target machine for the host with the JIT's settings.
pub fn host_machine() -> Result<TargetMachine, String> {
    let triple = inkwell::targets::TargetTriple::create(self::triple());
    let target = LlvmTarget::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            "",
            "",
            OptimizationLevel::Default,
            RelocMode::Default,
            CodeModel::JITDefault,
        )
        .ok_or_else(|| format!("LLVM cannot create a target machine for {}", self::triple()))
}
