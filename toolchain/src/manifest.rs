//! The template-set manifest (`manifest.toml`, format documented in `templates/README.md`):
//! which C sources make up the set, how they are compiled, how stencils are named, and which
//! external symbols stencils may reference. Unknown keys are errors naming file and key.

use crate::error::{Error, Result};
use crate::family::{Family, RawFamily};
use crate::glob;
use cpjit_model::{Abi, Arch, ObjectFormat};
use cpjit_targets_schema::TargetFile;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How a set's stencils are found in each translation unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    /// One stencil per defined function whose name matches the glob (e.g. `op_*`).
    Functions(String),
    /// One stencil per translation unit: the function with this name (e.g. `_JIT_ENTRY`),
    /// renamed after the file stem.
    TranslationUnitEntry(String),
}

/// Whose basic-block layout a set's code keeps (`[stencils] layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The kit's (`layout.rs`, x86-64 only): exits cold, the continuation path last, so
    /// that its tail call becomes a fall-through and each exit one conditional branch.
    Kit,
    /// Clang's own: the pass is not run, and the code is what the set's flags give.
    Compiler,
}

impl Layout {
    /// The key's value (and the object cache key's part).
    pub fn name(self) -> &'static str {
        match self {
            Layout::Kit => "kit",
            Layout::Compiler => "compiler",
        }
    }
}

/// A parsed, checked manifest with its directory resolved.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The directory holding `manifest.toml`; sources and include dirs are relative to it.
    pub root: PathBuf,
    /// The manifest's own bytes (part of the inputs digest).
    pub bytes: Vec<u8>,
    pub name: String,
    /// The generated crates' package name: `<package>-<triple>` per target and `<package>`
    /// for the facade (`package`, default `cpjit-stencils`).
    pub package: String,
    pub sources: Vec<String>,
    pub include_dirs: Vec<String>,
    pub defines: Vec<String>,
    pub cflags: Vec<String>,
    /// A header (relative to the root) precompiled once per target and loaded before every
    /// unit (`clang -include-pch`), so that headers all units share are parsed once per
    /// target instead of once per unit. Every unit must be able to start with it.
    pub precompiled_header: Option<String>,
    pub hole_prefix: String,
    pub naming: Naming,
    /// The entry shim: a function name (`functions` naming) or, in a set with one function
    /// per unit, the stencil name, i.e. the unit's file stem (`shim = "shim"` for `shim.c`).
    pub shim: Option<String>,
    /// How many pointer arguments every op and the shim take (`[stencils] parameters`,
    /// default 2: `int64_t op(struct cpjit_frame *frame, uint64_t *sp)`); e.g. 3 for
    /// `(frame, stack pointer, thread state)`.
    pub parameters: usize,
    /// `[stencils] batch_size`: in a one-function-per-unit set, how many units one clang
    /// run compiles together (see `batch`); `None`: one clang run per unit.
    pub batch_size: Option<usize>,
    /// `[stencils] layout`: whether the kit's hot/cold layout pass runs (default `kit`).
    pub layout: Layout,
    pub target_suffix: String,
    pub allowed_symbols: Vec<String>,
    /// `[target.<triple>]` tables: flag changes for one target.
    pub targets: BTreeMap<String, TargetFlags>,
    /// `[[target_rule]]`: flag changes for every target whose facts match, in file order
    /// (see [`Manifest::flags_for`]), so that a new target file needs no line here.
    pub target_rules: Vec<TargetRule>,
    /// Whether a set that defines no stencils, or a `sources` glob that matches nothing, is
    /// accepted (`allow_empty = true`); by default both are errors.
    pub allow_empty: bool,
    pub limits: Limits,
    /// `[[family]]`: templates compiled into many stencils (see `family`); a family of
    /// register-cached ops names its cache-state parameters (`cached = { entry = "IN",
    /// exit = "OUT" }`), which every member's `CPJIT_CACHED_OP` annotation must state.
    pub families: Vec<Family>,
}

impl Limits {
    /// `clang_seconds` as a duration.
    pub fn clang_time(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.clang_seconds)
    }
}

/// `[limits]`: the per-stencil budgets, each named in the error that enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// IR instructions per stencil (helpers included), checked before code generation,
    /// whose time grows superlinearly with function size (12,000 C statements take ~9 s).
    pub ir_instructions: usize,
    /// Bytes of data per stencil (read-only, writable and zero-fill together): every
    /// instance copies them, so a large static array multiplies with the trace length.
    pub data_bytes: usize,
    /// Wall-clock seconds per clang run (one translation unit for one target): clang's
    /// optimiser runs before `ir_instructions` can be checked and is superlinear too.
    pub clang_seconds: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            ir_instructions: 20_000,
            data_bytes: 1 << 20,
            clang_seconds: 300.0,
        }
    }
}

/// `[target.<triple>]`: per-target flag changes.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetFlags {
    /// Appended after the set's and the target file's flags.
    #[serde(default)]
    pub cflags: Vec<String>,
    /// Removed (exact match) from the set's and the target file's flags first.
    #[serde(default)]
    pub remove_cflags: Vec<String>,
    /// The code model LLVM generates this set's code for on this target, instead of the
    /// target file's (`code_model`; only where [`crate::target::Target::with_set_models`]
    /// supports it).
    #[serde(default)]
    pub code_model: Option<String>,
    /// The relocation model, instead of the target file's (`reloc_model`).
    #[serde(default)]
    pub reloc_model: Option<String>,
}

/// `[[target_rule]]`: the flag changes of [`TargetFlags`] for every target whose facts
/// match `when` (each key given must equal the target file's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRule {
    pub when: RuleWhen,
    /// The same changes as a `[target.<triple>]` table, the rule's other keys.
    pub flags: TargetFlags,
}

/// `when` and the keys of [`TargetFlags`] in one table: serde's `flatten` would lose
/// `deny_unknown_fields`, so `when` is taken out and the rest read as a `TargetFlags`,
/// which refuses an unknown key by name.
impl<'de> Deserialize<'de> for TargetRule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(d)?;
        let when = table
            .remove("when")
            .ok_or_else(|| D::Error::missing_field("when"))?;
        let when = RuleWhen::deserialize(when)
            .map_err(|e| D::Error::custom(format!("key `when`: {}", e.message())))?;
        let flags = TargetFlags::deserialize(toml::Value::Table(table)).map_err(|e| {
            D::Error::custom(format!(
                "{} (a [[target_rule]] takes `when` and the keys of a [target.<triple>] table)",
                e.message()
            ))
        })?;
        Ok(TargetRule { when, flags })
    }
}

/// A rule's condition on the target file's facts; at least one key.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleWhen {
    pub arch: Option<String>,
    pub format: Option<String>,
    pub abi: Option<String>,
}

impl RuleWhen {
    fn matches(&self, t: &TargetFile) -> bool {
        self.arch.as_deref().is_none_or(|a| a == t.arch.name())
            && self.format.as_deref().is_none_or(|f| f == t.format.name())
            && self.abi.as_deref().is_none_or(|a| a == t.abi.name())
    }

    /// Refuses an empty condition or a value no target file can have, naming the rule.
    fn check(&self, file: &str, index: usize) -> Result<()> {
        let rule = format!("{file}: [[target_rule]] {}", index + 1);
        if self.arch.is_none() && self.format.is_none() && self.abi.is_none() {
            return Err(Error(format!(
                "{rule}: key `when` is empty; give `arch`, `format` and/or `abi` (e.g. when = \
                 {{ arch = \"x86_64\", format = \"elf\" }}), or use a [target.<triple>] table"
            )));
        }
        let key = |k: &str| format!("{rule}: key `when.{k}`");
        let known = |k: &str, v: &Option<String>, names: &[&str]| match v {
            Some(v) if !names.contains(&v.as_str()) => Err(Error(format!(
                "{}: unknown value `{v}` (expected one of {})",
                key(k),
                names.join(", ")
            ))),
            _ => Ok(()),
        };
        known("arch", &self.arch, &Arch::ALL.map(Arch::name))?;
        const FORMATS: [ObjectFormat; 3] =
            [ObjectFormat::Elf, ObjectFormat::MachO, ObjectFormat::Coff];
        known("format", &self.format, &FORMATS.map(ObjectFormat::name))?;
        known("abi", &self.abi, &Abi::ALL.map(Abi::name))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    #[serde(default = "default_package")]
    package: String,
    sources: Vec<String>,
    #[serde(default)]
    include_dirs: Vec<String>,
    #[serde(default)]
    defines: Vec<String>,
    #[serde(default)]
    cflags: Vec<String>,
    #[serde(default)]
    precompiled_header: Option<String>,
    #[serde(default = "default_hole_prefix")]
    hole_prefix: String,
    #[serde(default)]
    allowed_symbols: Vec<String>,
    stencils: RawStencils,
    #[serde(default)]
    target: BTreeMap<String, TargetFlags>,
    #[serde(default)]
    target_rule: Vec<TargetRule>,
    #[serde(default)]
    allow_empty: bool,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    family: Vec<RawFamily>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStencils {
    functions: Option<String>,
    translation_unit_entry: Option<String>,
    shim: Option<String>,
    #[serde(default = "default_parameters")]
    parameters: usize,
    batch_size: Option<usize>,
    layout: Option<String>,
    #[serde(default = "default_target_suffix")]
    target_suffix: String,
}

/// The package name of the kit's own default set's crates.
pub const DEFAULT_PACKAGE: &str = "cpjit-stencils";

fn default_package() -> String {
    DEFAULT_PACKAGE.into()
}

fn default_hole_prefix() -> String {
    "_JIT_".into()
}

fn default_parameters() -> usize {
    2
}

fn default_target_suffix() -> String {
    "_TARGET".into()
}

impl Manifest {
    /// Reads `<dir>/manifest.toml`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join("manifest.toml");
        let bytes = std::fs::read(&path).map_err(|e| {
            Error(format!(
                "{}: cannot read template-set manifest: {e}",
                path.display()
            ))
        })?;
        let root = dir
            .canonicalize()
            .map_err(|e| Error(format!("{}: {e}", dir.display())))?;
        Manifest::parse(&path.display().to_string(), root, bytes)
    }

    /// Parses manifest text; `file` names it in errors.
    pub fn parse(file: &str, root: PathBuf, bytes: Vec<u8>) -> Result<Manifest> {
        let text =
            std::str::from_utf8(&bytes).map_err(|e| Error(format!("{file}: not UTF-8: {e}")))?;
        let raw: RawManifest = toml::from_str(text)
            .map_err(|e| Error(format!("{file}: {}", e.to_string().trim_end())))?;
        let naming = match (raw.stencils.functions, raw.stencils.translation_unit_entry) {
            (Some(f), None) => Naming::Functions(f),
            (None, Some(e)) => Naming::TranslationUnitEntry(e),
            _ => {
                return Err(Error(format!(
                    "{file}: [stencils] needs exactly one of `functions` (a glob such as \"op_*\") \
                     and `translation_unit_entry` (a symbol such as \"_JIT_ENTRY\")"
                )))
            }
        };
        if let Naming::Functions(pattern) = &naming {
            glob::check(&format!("{file}: key `stencils.functions`"), pattern)?;
        }
        for pattern in &raw.allowed_symbols {
            glob::check(&format!("{file}: key `allowed_symbols`"), pattern)?;
        }
        let package_ok = raw.package.starts_with(|c: char| c.is_ascii_lowercase())
            && raw
                .package
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !package_ok {
            return Err(Error(format!(
                "{file}: key `package` is `{}` but must be a package name: lowercase ASCII \
                 letters, digits, `-` and `_`, starting with a letter",
                raw.package
            )));
        }
        if raw.hole_prefix.is_empty() {
            return Err(Error(format!(
                "{file}: key `hole_prefix` must not be empty"
            )));
        }
        if !(raw.limits.clang_seconds > 0.0 && raw.limits.clang_seconds <= 1e9) {
            return Err(Error(format!(
                "{file}: key `limits.clang_seconds` must be a positive number of seconds"
            )));
        }
        if let Some(header) = &raw.precompiled_header {
            if header.is_empty() || Path::new(header).is_absolute() {
                return Err(Error(format!(
                    "{file}: key `precompiled_header`: `{header}` must be a header path relative \
                     to the manifest's directory"
                )));
            }
        }
        if !(1..=6).contains(&raw.stencils.parameters) {
            return Err(Error(format!(
                "{file}: key `stencils.parameters` is {} but must be 1 to 6 (pointer arguments \
                 passed in registers on every target)",
                raw.stencils.parameters
            )));
        }
        if let Some(size) = raw.stencils.batch_size {
            // With `functions` naming, only family members are batched: each defines one
            // function, whose name the batch learns by preprocessing (`batch_names`).
            if matches!(naming, Naming::Functions(_)) && raw.family.is_empty() {
                return Err(Error(format!(
                    "{file}: key `stencils.batch_size` batches units of one function each: \
                     `translation_unit_entry` units, or the members of `[[family]]` entries \
                     with `functions` naming; this set has neither, so remove the key (or put \
                     its functions in fewer units)"
                )));
            }
            if !(1..=4096).contains(&size) {
                return Err(Error(format!(
                    "{file}: key `stencils.batch_size` is {size} but must be 1 to 4096 units per \
                     clang run"
                )));
            }
        }
        let layout = match raw.stencils.layout.as_deref() {
            None | Some("kit") => Layout::Kit,
            Some("compiler") => Layout::Compiler,
            Some(other) => {
                return Err(Error(format!(
                    "{file}: key `stencils.layout` is \"{other}\" but must be \"kit\" (the \
                     kit's hot/cold layout on x86-64: exits cold, the continuation a \
                     fall-through; the default) or \"compiler\" (clang's own block layout)"
                )))
            }
        };
        if raw.sources.is_empty() {
            return Err(Error(format!("{file}: key `sources` lists no patterns")));
        }
        for d in &raw.defines {
            if d.is_empty() || d.starts_with('-') {
                return Err(Error(format!(
                    "{file}: key `defines`: `{d}` must be NAME or NAME=VALUE (without -D)"
                )));
            }
        }
        let target_rules = raw.target_rule;
        for (i, rule) in target_rules.iter().enumerate() {
            rule.when.check(file, i)?;
        }
        let mut families: Vec<Family> = Vec::new();
        for (i, raw) in raw.family.into_iter().enumerate() {
            let family = Family::check(file, i, raw)?;
            if families.iter().any(|f| f.name == family.name) {
                return Err(Error(format!(
                    "{file}: two [[family]] entries are named `{}`",
                    family.name
                )));
            }
            families.push(family);
        }
        Ok(Manifest {
            root,
            bytes,
            name: raw.name,
            package: raw.package,
            sources: raw.sources,
            include_dirs: raw.include_dirs,
            defines: raw.defines,
            cflags: raw.cflags,
            precompiled_header: raw.precompiled_header,
            hole_prefix: raw.hole_prefix,
            naming,
            shim: raw.stencils.shim,
            parameters: raw.stencils.parameters,
            batch_size: raw.stencils.batch_size,
            layout,
            target_suffix: raw.stencils.target_suffix,
            allowed_symbols: raw.allowed_symbols,
            targets: raw.target,
            target_rules,
            allow_empty: raw.allow_empty,
            limits: raw.limits,
            families,
        })
    }

    /// The set's flag changes for target `t`: its `[target.<triple>]` table, else those of
    /// the first `[[target_rule]]` whose condition its facts meet, else none.
    pub fn flags_for(&self, t: &TargetFile) -> Option<&TargetFlags> {
        self.targets.get(&t.triple).or_else(|| {
            self.target_rules
                .iter()
                .find(|r| r.when.matches(t))
                .map(|r| &r.flags)
        })
    }

    /// The translation units: every file matched by `sources`, relative to the root, sorted
    /// and deduplicated. A named file that does not exist is an error; so is a glob that
    /// matches nothing, unless the manifest says `allow_empty = true` (a growing set).
    pub fn translation_units(&self) -> Result<Vec<PathBuf>> {
        let manifest_file = self.root.join("manifest.toml");
        let mut all = Vec::new();
        let mut errors = Vec::new();
        for pattern in &self.sources {
            let matched = glob::expand(&self.root, pattern)?;
            let is_glob = pattern.contains(['*', '?', '[', '{']);
            if matched.is_empty() && !is_glob {
                errors.push(Error(format!(
                    "{}: key `sources`: `{pattern}` does not exist (in {})",
                    manifest_file.display(),
                    self.root.display()
                )));
            } else if matched.is_empty() && !self.allow_empty {
                errors.push(Error(format!(
                    "{}: key `sources`: the glob `{pattern}` matches no file (in {}); fix the \
                     pattern, or set `allow_empty = true` if the set may be empty",
                    manifest_file.display(),
                    self.root.display()
                )));
            }
            all.extend(matched);
        }
        // Another set's files are not this set's inputs (its digest leaves nested sets out).
        let family_sources = self.families.iter().map(|f| PathBuf::from(&f.source));
        for unit in all.iter().cloned().chain(family_sources) {
            if let Some(nested) = self.nested_set_of(&unit) {
                errors.push(Error(format!(
                    "{}: `{}` belongs to the nested template set `{}/` (it has a manifest.toml \
                     of its own): a set's sources cannot be another set's files",
                    manifest_file.display(),
                    unit.display(),
                    nested.display()
                )));
            }
        }
        if !errors.is_empty() {
            return Err(Error::many(errors));
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// The nested set (a directory below the root with a `manifest.toml` of its own, such
    /// as the kit's `threearg/`) that `path`, relative to the root, lies in, if any.
    pub fn nested_set_of(&self, path: &Path) -> Option<PathBuf> {
        path.ancestors()
            .skip(1)
            .filter(|dir| !dir.as_os_str().is_empty())
            .filter(|dir| self.root.join(dir).join("manifest.toml").is_file())
            .last()
            .map(Path::to_path_buf)
    }

    /// Whether `name` is a stencil of this set (matches the naming rule or is the shim).
    pub fn is_stencil_symbol(&self, name: &str) -> bool {
        match &self.naming {
            Naming::Functions(pattern) => {
                self.shim.as_deref() == Some(name) || glob::matches(pattern, name)
            }
            Naming::TranslationUnitEntry(entry) => name == entry,
        }
    }

    /// The name of the stencil that function `name` of unit `template` becomes (the unit's
    /// file stem in a set with one function per unit): what errors call it.
    pub fn stencil_name(&self, name: &str, template: &str) -> String {
        match &self.naming {
            Naming::TranslationUnitEntry(entry) if name == entry => {
                let base = template.rsplit('/').next().unwrap_or(template);
                base.split('.').next().unwrap_or(base).to_string()
            }
            _ => name.to_string(),
        }
    }

    /// Whether function `name` of unit `template` is the entry shim.
    pub fn is_shim(&self, name: &str, template: &str) -> bool {
        self.is_stencil_symbol(name)
            && self.shim.as_deref() == Some(self.stencil_name(name, template).as_str())
    }

    /// Whether `name` is a hole that jumps to another instance: the continuation
    /// (`<prefix>CONTINUE`) or a jump target (`<prefix><NAME><target_suffix>`).
    pub fn is_jump_hole(&self, name: &str) -> bool {
        name.strip_prefix(self.hole_prefix.as_str())
            .is_some_and(|rest| rest == "CONTINUE" || rest.ends_with(self.target_suffix.as_str()))
    }

    /// Whether stencils may reference the external symbol `name`.
    pub fn is_allowed_symbol(&self, name: &str) -> bool {
        glob::any_matches(&self.allowed_symbols, name)
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
