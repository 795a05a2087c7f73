//! Building one target's stencil set from the per-unit outputs: naming (one stencil per
//! function, or one per unit named after its file stem), sorting, duplicate detection, the
//! set-wide symbol list, the shim, and the checks that nothing was dropped or left unelided.

use crate::error::Error;
use crate::family;
use crate::manifest::{Manifest, Naming};
use crate::pipeline::UnitOutput;
use crate::stencil::StencilBuf;
use crate::target::Target;
use cpjit_model::HoleValue;
use std::collections::BTreeMap;

/// One target's stencils, ready to be written.
#[derive(Debug)]
pub struct BuiltSet {
    pub target: Target,
    pub set_name: String,
    /// The manifest's `package`: the crate is `<package>-<triple>`.
    pub package: String,
    /// Sorted by name. Holes' symbol indices are still per stencil (into `StencilBuf::symbols`);
    /// [`BuiltSet::symbol_index`] maps them to set-wide indices.
    pub stencils: Vec<StencilBuf>,
    /// The template each stencil came from (same order as `stencils`).
    pub templates: Vec<String>,
    /// External symbols of all stencils, sorted.
    pub symbols: Vec<String>,
    /// Every zero-fill section a stencil's data holds, once, sorted by name.
    pub zero_fill: Vec<SetZeroFill>,
    pub shim: Option<u16>,
    pub digest: String,
    /// Sum of the job times of this target (seconds).
    pub seconds: f64,
    /// The manifest's stencil families as tables of stencil indices (empty without
    /// `[[family]]`, and then the generated crate is what it was before families existed).
    pub families: Vec<family::Table>,
}

/// A zero-fill section described once for the whole set ([`cpjit_model::ZeroFill`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SetZeroFill {
    /// `<template>:<section>`: sections of one unit are shared by its stencils.
    pub name: String,
    pub size: u64,
    pub align: u32,
}

/// The set-wide name of zero-fill section `section` of `template`'s object.
pub fn zero_fill_name(template: &str, section: &str) -> String {
    format!("{template}:{section}")
}

impl BuiltSet {
    /// The set-wide index of the zero-fill section `section` of `template`'s object.
    pub fn zero_fill_index(&self, template: &str, section: &str) -> u16 {
        let name = zero_fill_name(template, section);
        self.zero_fill
            .binary_search_by(|z| z.name.cmp(&name))
            .expect("every stencil's zero-fill is in the set") as u16
    }

    /// The set-wide index of stencil-local symbol `local` of `stencil`.
    pub fn symbol_index(&self, stencil: &StencilBuf, local: u16) -> u16 {
        let name = &stencil.symbols[local as usize];
        self.symbols
            .binary_search(name)
            .expect("every stencil symbol is in the set") as u16
    }

    /// A hole value with set-wide symbol indices.
    pub fn set_value(&self, stencil: &StencilBuf, value: HoleValue) -> HoleValue {
        match value {
            HoleValue::Symbol(i) => HoleValue::Symbol(self.symbol_index(stencil, i)),
            other => other,
        }
    }

    pub fn code_bytes(&self) -> usize {
        self.stencils.iter().map(|s| s.code.len()).sum()
    }

    /// Data bytes of one instance of every stencil (zero-fill included).
    pub fn data_bytes(&self) -> usize {
        self.stencils.iter().map(|s| s.data_len as usize).sum()
    }

    pub fn hole_count(&self) -> usize {
        self.stencils.iter().map(|s| s.holes.len()).sum()
    }

    /// Stencils that continue: the entry shim aside, those that jump to the continuation
    /// or fall through into it (the denominator of the fall-through figure, issue 37).
    pub fn continuing(&self) -> usize {
        (0..self.stencils.len())
            .filter(|&i| self.continues(i))
            .count()
    }

    /// Continuing stencils whose continuation is a fall-through (trailing jump elided).
    pub fn falling_through(&self) -> usize {
        (0..self.stencils.len())
            .filter(|&i| self.continues(i) && self.stencils[i].elided_continue)
            .count()
    }

    fn continues(&self, i: usize) -> bool {
        let s = &self.stencils[i];
        self.shim != Some(i as u16)
            && (s.elided_continue || s.holes.iter().any(|h| h.value == HoleValue::Continue))
    }
}

/// Assembles the set of `target` from its units' outputs (in unit order).
pub fn build(
    manifest: &Manifest,
    target: &Target,
    units: Vec<UnitOutput>,
    digest: String,
) -> Result<BuiltSet, Vec<Error>> {
    let t = &target.triple;
    let mut errors = Vec::new();
    let mut by_name: BTreeMap<String, (StencilBuf, String)> = BTreeMap::new();
    let mut seconds = 0.0;
    let unit_count = units.len();
    for unit in units {
        seconds += unit.seconds;
        let template = unit.template;
        // Nothing silently dropped: every stencil function validated in the IR must have
        // been read from the object, and nothing else.
        let read: Vec<&str> = unit.stencils.iter().map(|s| s.name.as_str()).collect();
        for name in &unit.facts.stencils {
            if !read.contains(&name.as_str()) {
                errors.push(Error(format!(
                    "{t}: {template}: stencil `{name}` is defined in the IR but the object reader returned no stencil for it"
                )));
            }
        }
        for mut stencil in unit.stencils {
            if !unit.facts.stencils.contains(&stencil.name) {
                errors.push(Error(format!(
                    "{t}: {template}: the object reader returned `{}`, which is not a stencil function of the IR",
                    stencil.name
                )));
                continue;
            }
            check_stencil(
                manifest,
                t,
                &template,
                &stencil,
                &unit.facts.continues,
                &mut errors,
            );
            // Instances are packed at the target's instruction alignment: a function's
            // section alignment (16 on x86-64) is a layout preference for called
            // functions, but instances fall through into each other, so padding to it
            // would execute nops between every pair of instances.
            stencil.code_align = target.code_align;
            if let Naming::TranslationUnitEntry(entry) = &manifest.naming {
                if stencil.name == *entry {
                    crate::frame::rename(&mut stencil, file_stem(&template));
                }
            }
            if !is_identifier(&stencil.name) {
                errors.push(Error(format!(
                    "{t}: {template}: stencil name `{}` is not a C/Rust identifier",
                    stencil.name
                )));
                continue;
            }
            if let Some((_, first)) = by_name.get(&stencil.name) {
                errors.push(Error(format!(
                    "{t}: duplicate stencil `{}` in {first} and {template}",
                    stencil.name
                )));
                continue;
            }
            by_name.insert(stencil.name.clone(), (stencil, template.clone()));
        }
    }
    if by_name.is_empty() && errors.is_empty() && !manifest.allow_empty {
        let rule = match &manifest.naming {
            Naming::Functions(glob) => format!("no function matches `{glob}`"),
            Naming::TranslationUnitEntry(entry) => format!("no unit defines `{entry}`"),
        };
        errors.push(Error(format!(
            "{t}: the set `{}` defines no stencils ({rule} in {} translation unit(s)); fix \
             `sources` or `[stencils]` in manifest.toml, or set `allow_empty = true`",
            manifest.name, unit_count
        )));
    }
    let mut symbols: Vec<String> = by_name
        .values()
        .flat_map(|(s, _)| s.symbols.iter().cloned())
        .collect();
    symbols.sort();
    symbols.dedup();
    if symbols.len() > u16::MAX as usize || by_name.len() > u16::MAX as usize {
        errors.push(Error(format!("{t}: more than 65535 stencils or symbols")));
    }
    let (mut stencils, templates): (Vec<StencilBuf>, Vec<String>) = by_name.into_values().unzip();
    let zero_fill = describe_zero_fill(t, &stencils, &templates, &mut errors);
    let shim = match &manifest.shim {
        None => None,
        Some(name) => match stencils.iter().position(|s| s.name == *name) {
            Some(i) => Some(i as u16),
            None => {
                errors.push(Error(format!(
                    "{t}: the shim `{name}` named in [stencils] is not defined by any template"
                )));
                None
            }
        },
    };
    if let Some(i) = shim {
        mark_entry_parameters(&mut stencils[i as usize], manifest.parameters);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(BuiltSet {
        target: target.clone(),
        set_name: manifest.name.clone(),
        package: manifest.package.clone(),
        stencils,
        templates,
        symbols,
        zero_fill,
        shim,
        digest,
        seconds,
        families: Vec::new(),
    })
}

/// Records in the shim a parameter count other than the default two (`[stencils]
/// parameters`), as the model's `EntryParameters` marker at code offset 0, so that the
/// runtime hands out entries of that arity only. Sets of two parameters get no marker, and
/// their crates stay as they were.
fn mark_entry_parameters(shim: &mut StencilBuf, parameters: usize) {
    if parameters == cpjit_model::DEFAULT_ENTRY_PARAMETERS {
        return;
    }
    shim.holes.push(cpjit_model::Hole {
        section: cpjit_model::Section::Code,
        offset: 0,
        kind: cpjit_model::HoleKind::EntryParameters,
        value: HoleValue::Code,
        addend: parameters as i64,
    });
    shim.holes.sort();
}

/// Adds the tables of the manifest's families to `set`, whose stencils include every
/// family member (`members`, from `family::all_members`).
pub fn with_families(
    mut set: BuiltSet,
    manifest: &Manifest,
    members: &[family::Member],
) -> Result<BuiltSet, Vec<Error>> {
    let mut errors = Vec::new();
    for (i, f) in manifest.families.iter().enumerate() {
        let mine: Vec<&family::Member> = members.iter().filter(|m| m.family == i).collect();
        let index_of = |name: &str| {
            set.stencils
                .binary_search_by(|s| s.name.as_str().cmp(name))
                .ok()
                .map(|i| i as u16)
        };
        match f.table(&mine, &manifest.root, index_of) {
            Ok(t) => set.families.push(t),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(errors)
    }
}

/// The set's zero-fill table: each section of each unit once, however many of the unit's
/// stencils hold it. Checks what the model stores in 16 and 32 bits.
fn describe_zero_fill(
    t: &str,
    stencils: &[StencilBuf],
    templates: &[String],
    errors: &mut Vec<Error>,
) -> Vec<SetZeroFill> {
    let mut table: BTreeMap<String, SetZeroFill> = BTreeMap::new();
    for (s, template) in stencils.iter().zip(templates) {
        if s.data_len > u64::from(u32::MAX) {
            errors.push(Error(format!(
                "{t}: {template}: stencil `{}`: {} B of data per instance exceed 4 GiB",
                s.name, s.data_len
            )));
        }
        for z in &s.zero_fill {
            let name = zero_fill_name(template, &z.section);
            table.entry(name.clone()).or_insert(SetZeroFill {
                name,
                size: z.size,
                align: z.align,
            });
        }
    }
    if table.len() > u16::MAX as usize {
        errors.push(Error(format!("{t}: more than 65535 zero-fill sections")));
    }
    table.into_values().collect()
}

/// Per-stencil invariants that the object reader's output must satisfy.
fn check_stencil(
    manifest: &Manifest,
    t: &str,
    template: &str,
    s: &StencilBuf,
    continues: &std::collections::BTreeSet<String>,
    errors: &mut Vec<Error>,
) {
    let at = format!("{t}: {template}: stencil `{}`", s.name);
    for symbol in &s.symbols {
        if !manifest.is_allowed_symbol(symbol) {
            errors.push(Error(format!(
                "{at}: the object references `{symbol}`, which is not in allowed_symbols \
                 (a library call the compiler introduced?); {}",
                crate::advice::symbol_fix(symbol)
            )));
        }
    }
    // The continuation jump must not be left as the last instruction: the next instance
    // follows directly, so the jump is dead weight (and the runtime relies on elision).
    let code_len = s.code.len() as u64;
    if let Some(h) = s.holes.iter().find(|h| {
        h.section == cpjit_model::Section::Code
            && h.kind.is_branch()
            && h.value == HoleValue::Continue
            && u64::from(h.offset) + 4 == code_len
    }) {
        errors.push(Error(format!(
            "{at}: the trailing jump to the continuation at code offset {:#x} ({}) was not elided",
            h.offset, h.kind
        )));
    }
    if s.elided_continue && !continues.contains(&s.name) {
        errors.push(Error(format!(
            "{at}: the reader elided a continuation jump, but the IR has no musttail call to {}CONTINUE",
            manifest.hole_prefix
        )));
    }
    if !s.code_align.is_power_of_two() || !s.data_align.is_power_of_two() {
        errors.push(Error(format!(
            "{at}: alignment code {} / data {} is not a power of two",
            s.code_align, s.data_align
        )));
    }
}

fn file_stem(template: &str) -> String {
    let base = template.rsplit('/').next().unwrap_or(template);
    base.split('.').next().unwrap_or(base).to_string()
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_stems() {
        assert!(is_identifier("op_add2"));
        assert!(is_identifier("_x"));
        assert!(!is_identifier("2op"));
        assert!(!is_identifier("op-add"));
        assert!(!is_identifier(""));
        assert_eq!(file_stem("vm/add.c"), "add");
    }
}
