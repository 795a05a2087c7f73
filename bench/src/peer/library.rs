//! The template library of the LLVM peer: the same LLVM IR that the stencils were compiled
//! from, one module per stencil.
//!
//! The bitcode comes from the toolchain's own code (`cpjit_toolchain::clang`): the set's
//! manifest and the host target file give the exact clang-19 flags of the stencil build, so
//! the peer compiles the very IR the stencils came from; no op is written twice. Each
//! translation unit is then split into one module per stencil (the other stencils deleted,
//! dead globals removed), which a trace clones once per instance.

use cpjit_toolchain::{clang, llvm, manifest::Manifest, target::Target};
use inkwell::context::Context;
use inkwell::llvm_sys::core::LLVMGetFirstUse;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, RelocMode, Target as LlvmTarget, TargetMachine};
use inkwell::values::AsValueRef;
use inkwell::OptimizationLevel;
use std::collections::HashMap;
use std::path::Path;

/// The triple the peer compiles for: the target of the set copy-and-patch stitches
/// (the one built for this process).
pub fn triple() -> &'static str {
    crate::copy_patch::set().target
}

/// One module per stencil name, all in one context.
pub struct Library<'ctx> {
    /// The prefix of hole symbols (the manifest's `hole_prefix`).
    pub hole_prefix: String,
    pub modules: HashMap<String, Module<'ctx>>,
    /// The host target machine (for the IR pass pipelines).
    pub machine: TargetMachine,
}

/// Bitcode of some translation units of a template set, as the stencil build produces it.
pub struct TemplateIr {
    pub hole_prefix: String,
    /// (unit path relative to the set, bitcode)
    pub units: Vec<(String, Vec<u8>)>,
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
    })
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
            modules,
            machine,
        })
    }
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
