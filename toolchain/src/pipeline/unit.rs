//! One unit's stages after clang ([`Pipeline::finish_unit`]): its bitcode parsed and
//! validated, the layout pass, the object emitted (cached by bitcode) and read into
//! stencils, their frame layouts and the checks of what they may use; split out of
//! `pipeline.rs`, which plans and runs the jobs.

use super::{Attempt, Pipeline, UnitOutput};
use crate::cache;
use crate::disasm;
use crate::error::{Error, Result};
use crate::family::{self, Member};
use crate::instructions;
use crate::layout;
use crate::llvm;
use crate::manifest::Layout;
use crate::narrow;
use crate::object::{self, ReadOptions};
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
        // unless the set keeps clang's own layout (`[stencils] layout`, part of the key).
        // Where the target splits, cold blocks go to the stencil's cold part (see `layout`);
        // clang's own layout is never split (the splitter acts only on the functions the
        // pass gives an entry count).
        let is_stencil = |name: &str| self.manifest.is_stencil_symbol(name);
        let kit = self.manifest.layout == Layout::Kit;
        let split =
            (kit && layout::splits_cold(target)).then_some(&is_stencil as &dyn Fn(&str) -> bool);
        let move_cold_tail = kit && layout::moves_cold_tail(target);
        if kit {
            let continuation = format!("{}CONTINUE", self.manifest.hole_prefix);
            let cold = match split {
                Some(is_stencil) => layout::Cold::Split(is_stencil),
                None if move_cold_tail => layout::Cold::Tail,
                None => layout::Cold::Inline,
            };
            layout::favour_continuation(&module, &continuation, cold);
        }
        // Static helpers must be followable (part of `machine_key`); split stencil
        // functions get their own sections from the splitter.
        llvm::function_sections(&module, target, split);
        // Narrow operands become immediates where the format allows (part of the key).
        let narrow = narrow::declare_ranges(&module, &self.manifest.hole_prefix, target);

        let level = llvm::opt_level(flags);
        let obj_key = cache::key(&[
            b"obj",
            self.llvm_version.as_bytes(),
            llvm::machine_key(target, level).as_bytes(),
            self.manifest.layout.name().as_bytes(),
            narrow::CACHE_TAG,
            bitcode,
        ]);
        let object_bytes = match attempt.get(self.cache, "obj", &obj_key) {
            Some(bytes) => bytes,
            None => {
                let bytes = llvm::emit_object(&module, target, level).map_err(at)?;
                attempt.put("obj", &obj_key, &bytes);
                bytes
            }
        };
        drop(module);

        let manifest = self.manifest;
        // A function's cold part (`<op>.cold`, see `layout`) is read with it, never alone.
        let select = |name: &str| !name.ends_with(".cold") && manifest.is_stencil_symbol(name);
        let options = ReadOptions {
            target: &target.triple,
            arch: target.arch,
            format: target.format,
            template: &template,
            hole_prefix: &manifest.hole_prefix,
            target_suffix: &manifest.target_suffix,
            select: &select,
            limits: &manifest.limits,
            move_cold_tail,
        };
        let mut stencils =
            object::read_stencils(&object_bytes, &options).map_err(|e| Error(e.to_string()))?;
        instructions::mark_relaxable_got_uses(target.llvm_triple(), &mut stencils)?;
        crate::frame::derive(target, &object_bytes, &mut stencils).map_err(at)?;
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
