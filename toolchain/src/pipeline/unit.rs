//! One unit's stages after clang ([`Pipeline::finish_unit`]): its bitcode parsed and
//! validated, laid out, emitted and read into stencils (`emit.rs`, the object cached by
//! bitcode), and the checks of what they may use; split out of `pipeline.rs`, which plans
//! and runs the jobs.

use super::{emit, Attempt, Pipeline, UnitOutput};
use crate::disasm;
use crate::error::{Error, Result};
use crate::family::{self, Member};
use crate::layout;
use crate::llvm;
use crate::narrow;
use crate::stencil::StencilBuf;
use crate::target::Target;
use crate::validate::{self, Site};
use inkwell::context::Context;
use std::time::Instant;

impl Pipeline<'_> {
    /// The stages after clang: parse, validation, object emission (cached by bitcode),
    /// reading, frame layouts and checks.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_unit(
        &self,
        target: &Target,
        template: String,
        member: Option<&Member>,
        flags: &[String],
        bitcode: &[u8],
        start: Instant,
        attempt: &mut Attempt,
    ) -> Result<UnitOutput> {
        let at = |e: Error| e.context(format!("{}: {template}", target.triple));
        let context = Context::create();
        let module = llvm::parse_bitcode(&context, bitcode, &template).map_err(at)?;
        let site = Site {
            target: &target.triple,
            template: &template,
            member: member.map(|m| m.stencil.as_str()),
            op_cc: target.op_calling_convention,
        };
        let facts = validate::validate(&module, self.manifest, &site).map_err(Error::many)?;
        // Holes are called directly even under -fno-plt (see `layout`; part of `machine_key`).
        layout::direct_hole_calls(&module, |name| self.manifest.is_jump_hole(name));
        // Exits cold, the continuation a fall-through (see `layout`; part of `machine_key`),
        // unless the set keeps clang's own layout (`[stencils] layout`, part of the key);
        // never worse than the set's own layout on any stencil (`pipeline/emit.rs`).
        let unit = emit::Unit {
            target,
            template: &template,
            bitcode,
            level: llvm::opt_level(flags),
        };
        let (mut stencils, narrow) = self.laid_out(module, &unit, attempt)?;
        let manifest = self.manifest;
        let is_jump_hole = |name: &str| manifest.is_jump_hole(name);
        narrow::add_checks(
            &mut stencils,
            &narrow,
            &manifest.hole_prefix,
            &is_jump_hole,
            target,
            &template,
        )?;
        check_reserved_registers(target, &template, &stencils)?;
        let mut facts = facts;
        if let Some(m) = member {
            family::rename_member(m, &mut stencils, &mut facts, &target.triple, &template)?;
            self.manifest.families[m.family].check_cache_state(m, &facts, &target.triple)?;
        }
        Ok(UnitOutput {
            template,
            stencils,
            facts,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// Rejects any instruction that reads or writes a register the target reserves (x18 on
/// Apple and Windows AArch64, where the OS may change it at any time).
pub fn check_reserved_registers(
    target: &Target,
    template: &str,
    stencils: &[StencilBuf],
) -> Result<()> {
    let names = target.reserved_register_names();
    if names.is_empty() {
        return Ok(());
    }
    let mut errors = Vec::new();
    for s in stencils {
        for inst in disasm::disassemble(target.llvm_triple(), &s.code)? {
            if let Some(reg) = names.iter().find(|r| disasm::uses_register(&inst.text, r)) {
                errors.push(Error(format!(
                    "{}: {template}: stencil `{}`: code offset {:#x}: `{}` uses the reserved register {reg}",
                    target.triple, s.name, inst.offset, inst.text
                )));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::many(errors))
    }
}
