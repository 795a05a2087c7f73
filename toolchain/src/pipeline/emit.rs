//! A unit's object emitted and read back in the set's layout (`[stencils] layout`): the
//! kit's (`layout.rs`) checked stencil by stencil against the set's own wherever the pass
//! changed the unit, so that no stencil is larger or loses a fall-through for it.

use super::{Attempt, Pipeline};
use crate::cache;
use crate::error::{Error, Result};
use crate::instructions;
use crate::layout;
use crate::llvm;
use crate::manifest::Layout;
use crate::narrow;
use crate::object::{self, ReadOptions};
use crate::stencil::StencilBuf;
use crate::target::Target;
use inkwell::module::Module;
use inkwell::OptimizationLevel;

/// What every emission of one unit shares.
pub(super) struct Unit<'a> {
    pub target: &'a Target,
    pub template: &'a str,
    /// The unit's bitcode (the object cache keys' content).
    pub bitcode: &'a [u8],
    pub level: OptimizationLevel,
}

/// How one object of a unit is laid out: the set's layout, and with the kit's where the
/// cold blocks go (split off by LLVM, or moved by the reader).
struct Emission<'a> {
    layout: Layout,
    split: Option<&'a dyn Fn(&str) -> bool>,
    move_cold_tail: bool,
}

impl Emission<'_> {
    /// The set's own layout: clang's, nothing split or moved.
    const OWN: Emission<'static> = Emission {
        layout: Layout::Compiler,
        split: None,
        move_cold_tail: false,
    };
}

impl Pipeline<'_> {
    /// The unit's stencils (frame layouts derived) and its narrow operands, from `module`
    /// (validated, holes called directly) in the set's layout. With the kit's, where the
    /// pass changed anything, the unit is emitted with the set's own layout too (both
    /// objects cached) and each stencil keeps the kit's layout only if it is no worse
    /// (`layout::no_worse`).
    pub(super) fn laid_out(
        &self,
        module: Module,
        unit: &Unit,
        attempt: &mut Attempt,
    ) -> Result<(Vec<StencilBuf>, narrow::Declared)> {
        if self.manifest.layout == Layout::Compiler {
            return self.emit_and_read(&module, &Emission::OWN, unit, attempt);
        }
        // Where the target splits, cold blocks go to the stencil's cold part (see
        // `layout`); on AArch64 COFF and Mach-O the reader moves them there (the tail after
        // the last continuation jump); the set's own layout is never split (the splitter
        // acts only on the functions the pass gives an entry count).
        let is_stencil = |name: &str| self.manifest.is_stencil_symbol(name);
        let split =
            layout::splits_cold(unit.target).then_some(&is_stencil as &dyn Fn(&str) -> bool);
        let move_cold_tail = layout::moves_cold_tail(unit.target);
        let cold = match split {
            Some(is_stencil) => layout::Cold::Split(is_stencil),
            None if move_cold_tail => layout::Cold::Tail,
            None => layout::Cold::Inline,
        };
        let own = module.clone();
        let continuation = format!("{}CONTINUE", self.manifest.hole_prefix);
        let favoured = layout::favour_continuation(&module, &continuation, cold);
        let kit_layout = Emission {
            layout: Layout::Kit,
            split,
            move_cold_tail,
        };
        let (kit, narrow) = self.emit_and_read(&module, &kit_layout, unit, attempt)?;
        drop(module);
        if !favoured.changed() {
            return Ok((kit, narrow));
        }
        let (own, _) = self.emit_and_read(&own, &Emission::OWN, unit, attempt)?;
        let (chosen, _) = layout::no_worse(kit, own)
            .map_err(|e| Error(format!("{}: {}: {e}", unit.target.triple, unit.template)))?;
        Ok((chosen, narrow))
    }

    /// `module` (laid out as `layout` says) emitted, or its object taken from the cache
    /// (keyed by the unit's bitcode and the layout), and read back into stencils with their
    /// frame layouts.
    fn emit_and_read(
        &self,
        module: &Module,
        emission: &Emission,
        unit: &Unit,
        attempt: &mut Attempt,
    ) -> Result<(Vec<StencilBuf>, narrow::Declared)> {
        let (target, template) = (unit.target, unit.template);
        let at = |e: Error| e.context(format!("{}: {template}", target.triple));
        // Static helpers must be followable (part of `machine_key`); split stencil
        // functions get their own sections from the splitter.
        llvm::function_sections(module, target, emission.split);
        // Narrow operands become immediates where the format allows (part of the key).
        let narrow = narrow::declare_ranges(module, &self.manifest.hole_prefix, target);
        let obj_key = cache::key(&[
            b"obj",
            self.llvm_version.as_bytes(),
            llvm::machine_key(target, unit.level).as_bytes(),
            emission.layout.name().as_bytes(),
            narrow::CACHE_TAG,
            unit.bitcode,
        ]);
        let object_bytes = match attempt.get(self.cache, "obj", &obj_key) {
            Some(bytes) => bytes,
            None => {
                let bytes = llvm::emit_object(module, target, unit.level).map_err(at)?;
                attempt.put("obj", &obj_key, &bytes);
                bytes
            }
        };
        let manifest = self.manifest;
        // A function's cold part (`<op>.cold`, see `layout`) is read with it, never alone.
        let select = |name: &str| !name.ends_with(".cold") && manifest.is_stencil_symbol(name);
        let options = ReadOptions {
            target: &target.triple,
            arch: target.arch,
            format: target.format,
            template,
            hole_prefix: &manifest.hole_prefix,
            target_suffix: &manifest.target_suffix,
            select: &select,
            limits: &manifest.limits,
            move_cold_tail: emission.move_cold_tail,
        };
        let mut stencils =
            object::read_stencils(&object_bytes, &options).map_err(|e| Error(e.to_string()))?;
        instructions::mark_relaxable_got_uses(target.llvm_triple(), &mut stencils)?;
        crate::frame::derive(target, &object_bytes, &mut stencils).map_err(at)?;
        Ok((stencils, narrow))
    }
}
