//! Writes one target's generated crate (`Cargo.toml` + `src/lib.rs`) as text, formatted by
//! this writer alone (never by rustfmt, whose output varies between versions): the output is
//! byte-identical across runs and machines. Every item carries `#[rustfmt::skip]`, so
//! `cargo fmt --check` leaves the generated tables alone.
//!
//! Beside them goes the sidecar `stencil-set.json` ([`Sidecar`]): the inputs digest, the
//! SHA-256 of every other generated file and the set's counts, as typed data for tools (the
//! driver's freshness test, xtask, the bench), so nothing scrapes the generated Rust. Files
//! are written atomically ([`write_atomic`]), the sidecar last: a torn or edited crate no
//! longer matches its sidecar and is rebuilt by a plain run.

use crate::error::{Error, Result};
use crate::listing;
use crate::set::BuiltSet;
use crate::stencil::StencilBuf;
use cpjit_model::{Abi, Arch, HoleValue, ObjectFormat, Section};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

mod families;

/// The sidecar's file name in each crate directory.
pub const SIDECAR: &str = "stencil-set.json";

/// The files of one generated crate, relative to its directory, in a fixed order.
pub struct CrateFiles {
    pub files: Vec<(String, String)>,
}

/// The crate name for `triple`.
pub fn package_name(package: &str, triple: &str) -> String {
    format!("{package}-{triple}")
}

/// Generates the crate for `set`; `model_path` is the path from the crate directory to a
/// local `cpjit-model` crate (`../../model` for the kit's own set), `None` to depend on the
/// published version only. The sidecar comes last.
pub fn generate(set: &BuiltSet, model_path: Option<&str>) -> Result<CrateFiles> {
    let cargo = cargo_toml(set, model_path);
    let lib = lib_rs(set)?;
    let mut files = vec![("Cargo.toml".into(), cargo), ("src/lib.rs".into(), lib)];
    let sidecar = Sidecar::describe(set, &files).to_json()?;
    files.push((SIDECAR.into(), sidecar));
    Ok(CrateFiles { files })
}

/// `stencils/<triple>/stencil-set.json`: what a generated crate is, as typed data. Fields
/// are declared in sorted order and maps are `BTreeMap`s, so the JSON's keys are sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    pub counts: Counts,
    /// Every other generated file (path relative to the crate, `/`-separated) →
    /// `sha256:<hex>` of its whole content.
    pub files: BTreeMap<String, String>,
    /// The sidecar format's version (1).
    pub format: u32,
    /// `sha256:<hex>` over everything the crate is generated from (see `digest`).
    pub inputs_digest: String,
    pub template_set: String,
    pub triple: String,
}

/// The set's totals (what `build-stencils` prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub code_bytes: usize,
    /// Bytes of `code_bytes` in the stencils' cold parts (laid after a trace's hot code).
    pub cold_bytes: usize,
    /// Stencils that continue (the entry shim aside); `elided_jumps` of them fall through
    /// (issue 37's figure: the share of continuing stencils whose hot path falls through).
    pub continuing: usize,
    pub data_bytes: usize,
    /// Continuing stencils whose trailing continuation jump was removed (they fall
    /// through); the entry shim is not counted.
    pub elided_jumps: usize,
    pub holes: usize,
    pub stencils: usize,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_tag(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", crate::cache::hex(&sha2::Sha256::digest(bytes)))
}

impl Sidecar {
    /// The sidecar of `set` whose other generated files are `files`.
    pub fn describe(set: &BuiltSet, files: &[(String, String)]) -> Sidecar {
        Sidecar {
            counts: Counts {
                code_bytes: set.code_bytes(),
                cold_bytes: set.stencils.iter().map(|s| s.cold_len as usize).sum(),
                continuing: set.continuing(),
                data_bytes: set.data_bytes(),
                // The continuing stencils that fall through: the entry shim's elided jump (it falls
                // through into the first instance) is not one of them.
                elided_jumps: set.falling_through(),
                holes: set.hole_count(),
                stencils: set.stencils.len(),
            },
            files: files
                .iter()
                .map(|(name, content)| (name.clone(), sha256_tag(content.as_bytes())))
                .collect(),
            format: 1,
            inputs_digest: format!("sha256:{}", set.digest),
            template_set: set.set_name.clone(),
            triple: set.target.triple.clone(),
        }
    }

    /// Pretty-printed JSON with a trailing newline (deterministic).
    pub fn to_json(&self) -> Result<String> {
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| Error(format!("cannot serialise the sidecar: {e}")))?;
        text.push('\n');
        Ok(text)
    }

    /// The sidecar of the crate in `crate_dir`, if it exists and parses.
    pub fn read(crate_dir: &Path) -> Option<Sidecar> {
        let bytes = std::fs::read(crate_dir.join(SIDECAR)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Whether the crate in `crate_dir` is exactly what this sidecar describes for inputs
    /// `digest`: same inputs digest, and every listed file present with the recorded
    /// content digest (so a torn, truncated or hand-edited file is stale).
    pub fn is_fresh(&self, crate_dir: &Path, digest: &str) -> bool {
        self.format == 1
            && self.inputs_digest == format!("sha256:{digest}")
            && self.files.contains_key("src/lib.rs")
            && self.files.contains_key("Cargo.toml")
            && self.files.iter().all(|(name, tag)| {
                std::fs::read(crate_dir.join(name)).is_ok_and(|b| sha256_tag(&b) == *tag)
            })
    }
}

/// Writes `content` to `path` atomically: a temporary file in the same directory, synced,
/// renamed over `path`, then the directory synced so the rename itself is durable.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| Error(format!("cannot write {}: {e}", path.display()));
    let dir = path.parent().expect("generated files live in a directory");
    std::fs::create_dir_all(dir).map_err(fail)?;
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(content)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    // Directories cannot be opened for syncing on every platform; where they can, do.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The files [`write_atomic`] writes into generated crates (and the facade): only their
/// temporary files are the toolchain's to remove.
pub const GENERATED_FILES: [&str; 3] = ["Cargo.toml", "lib.rs", SIDECAR];

/// A temporary file older than this is stale even if a process with its pid is alive: a
/// write takes milliseconds, and the pid may belong to another process by now.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temporary files [`write_atomic`] left in `dir` when a run was killed between
/// creating and renaming one (`.<file>.<pid>.tmp`, `<file>` one of [`GENERATED_FILES`]):
/// those of a process that is no longer running, and any older than [`STALE_AFTER`]. A
/// concurrent run's fresh temporary file is left alone, and so is anything else. Returns
/// the files removed.
pub fn remove_stale_temporaries(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = temporary_pid(&name) else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_none_or(|age| age > STALE_AFTER);
        if (old || !process_alive(pid)) && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed.sort();
    removed
}

/// The pid in a name of [`write_atomic`]'s temporary-file pattern.
fn temporary_pid(name: &str) -> Option<u32> {
    let (file, pid) = name
        .strip_prefix('.')?
        .strip_suffix(".tmp")?
        .rsplit_once('.')?;
    if !GENERATED_FILES.contains(&file) || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a process `pid` is running. Where that cannot be asked (no `/proc`), it is
/// taken to be, so only the age rule removes files.
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// The digest recorded in the header of an existing `src/lib.rs`, if any.
pub fn header_digest(lib_rs: &str) -> Option<&str> {
    lib_rs
        .lines()
        .nth(1)?
        .strip_prefix("//! Inputs digest: sha256:")
}

/// The generated crate's dependency on `cpjit-model`: always by this toolchain's version
/// (the model it wrote the tables for), plus a path when a local checkout is used. Every
/// generated Cargo.toml that depends on the model uses this line.
pub fn model_dependency(model_path: Option<&str>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    match model_path {
        Some(path) => format!("cpjit-model = {{ version = \"{version}\", path = \"{path}\" }}\n"),
        None => format!("cpjit-model = \"{version}\"\n"),
    }
}

fn cargo_toml(set: &BuiltSet, model_path: Option<&str>) -> String {
    let t = &set.target.triple;
    package_manifest(
        &package_name(&set.package, t),
        &format!(
            "Stencils of template set `{}` for {t} (generated)",
            set.set_name
        ),
        model_path,
    )
}

/// The `Cargo.toml` of a generated crate up to and including its `cpjit-model` dependency
/// (shared by the stencil crates and the facade).
pub fn package_manifest(name: &str, description: &str, model_path: Option<&str>) -> String {
    format!(
        "# Generated by `cpjit build-stencils`, do not edit.\n\
         [package]\n\
         name = \"{name}\"\n\
         description = \"{description}\"\n\
         version = \"{}\"\n\
         edition = \"2021\"\n\
         license = \"MIT OR Apache-2.0\"\n\
         publish = false\n\
         \n\
         [dependencies]\n\
         {}",
        env!("CARGO_PKG_VERSION"),
        model_dependency(model_path),
    )
}

/// `1 hole`, `2 holes`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// `1,234`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The generated crate's first item: the model format it is written in, by a path that
/// fails first, and says what to do, when the crate meets another `cpjit-model`
/// (`cpjit_model::format`).
fn format_line(o: &mut String) {
    let _ = writeln!(
        o,
        "/// The `cpjit-model` format this crate is written in. If this line does not compile,\n\
         /// the crate is out of date: regenerate it with `cpjit build-stencils`.\n\
         const _: u32 = cpjit_model::format::regenerate_with_cpjit_build_stencils::FORMAT_{};\n",
        cpjit_model::format::VERSION
    );
}

fn lib_rs(set: &BuiltSet) -> Result<String> {
    let t = &set.target;
    let mut o = String::new();
    let _ = writeln!(o, "//! Generated by `cpjit build-stencils`, do not edit.");
    let _ = writeln!(o, "//! Inputs digest: sha256:{}", set.digest);
    let _ = writeln!(o, "//!");
    let _ = writeln!(
        o,
        "//! Template set `{}` for `{}` ({}, {}): {} stencils, {} B code, {} B data, {} holes.",
        set.set_name,
        t.triple,
        t.format.name(),
        t.arch.name(),
        set.stencils.len(),
        thousands(set.code_bytes()),
        thousands(set.data_bytes()),
        thousands(set.hole_count())
    );
    o.push_str("#![no_std]\n#![allow(non_upper_case_globals)]\n\nuse cpjit_model::*;\n\n");
    format_line(&mut o);

    o.push_str("/// Index of each stencil in [`SET`]`.stencils`, by name.\n#[rustfmt::skip]\npub mod stencil {\n");
    for (i, s) in set.stencils.iter().enumerate() {
        let _ = writeln!(o, "    pub const {}: usize = {i};", ident(&s.name)?);
    }
    o.push_str("}\n\n");

    o.push_str("/// All stencils of this target.\n#[rustfmt::skip]\npub static SET: StencilSet<'static> = StencilSet {\n");
    let _ = writeln!(o, "    target: \"{}\",", t.triple);
    let _ = writeln!(o, "    arch: Arch::{},", arch_variant(t.arch));
    let _ = writeln!(o, "    format: ObjectFormat::{},", format_variant(t.format));
    let _ = writeln!(o, "    abi: Abi::{},", abi_variant(t.abi));
    let _ = writeln!(
        o,
        "    reserved_registers: &[{}],",
        string_list(&t.reserved_registers)
    );
    let _ = writeln!(o, "    nop: {},", byte_string(&t.nop, "        "));
    match set.shim {
        Some(i) => _ = writeln!(o, "    shim: Some({i}),"),
        None => o.push_str("    shim: None,\n"),
    }
    o.push_str("    stencils: &[\n");
    for s in &set.stencils {
        let _ = writeln!(o, "        def::{},", ident(&s.name)?);
    }
    o.push_str("    ],\n    symbols: &[\n");
    for sym in &set.symbols {
        let _ = writeln!(o, "        {},", string_literal(sym));
    }
    o.push_str("    ],\n");
    if set.zero_fill.is_empty() {
        o.push_str("    zero_fill: &[],\n");
    } else {
        o.push_str("    zero_fill: &[\n");
        for z in &set.zero_fill {
            let _ = writeln!(
                o,
                "        ZeroFill {{ name: {}, size: {}, align: {} }},",
                string_literal(&z.name),
                z.size,
                z.align
            );
        }
        o.push_str("    ],\n");
    }
    let _ = writeln!(o, "    digest: \"{}\",", set.digest);
    let _ = writeln!(o, "    format_version: {},", cpjit_model::format::VERSION);
    pruned(&mut o, set);
    o.push_str("};\n\n");
    crate::frame::write_frames(&mut o, &set.stencils);

    families::families(&mut o, set)?;
    o.push_str("/// The stencils, one constant each (listings show code with its holes).\n#[rustfmt::skip]\nmod def {\n    use cpjit_model::*;\n");
    for (s, template) in set.stencils.iter().zip(&set.templates) {
        o.push('\n');
        stencil_item(&mut o, set, s, template)?;
    }
    o.push_str("}\n");
    Ok(o)
}

/// `StencilSet::pruned`: every pruned member with its family, sorted by member.
fn pruned(o: &mut String, set: &BuiltSet) {
    let mut pruned: Vec<(&str, &str)> = set
        .families
        .iter()
        .flat_map(|f| f.pruned.iter().map(|m| (m.as_str(), f.name.as_str())))
        .collect();
    pruned.sort_unstable();
    if pruned.is_empty() {
        o.push_str("    pruned: &[],\n");
        return;
    }
    o.push_str("    pruned: &[\n");
    for (member, family) in pruned {
        let _ = writeln!(
            o,
            "        ({}, {}),",
            string_literal(member),
            string_literal(family)
        );
    }
    o.push_str("    ],\n");
}

fn stencil_item(o: &mut String, set: &BuiltSet, s: &StencilBuf, template: &str) -> Result<()> {
    let _ = writeln!(
        o,
        "    // ---- {} ({template}): {} B code, {} B data, {} ----",
        s.name,
        s.code.len(),
        s.data_len,
        plural(s.holes.len(), "hole")
    );
    for line in listing::lines(set.target.llvm_triple(), s)? {
        let _ = writeln!(o, "    // {line}");
    }
    let _ = writeln!(
        o,
        "    pub const {}: Stencil<'static> = Stencil {{",
        ident(&s.name)?
    );
    let _ = writeln!(o, "        name: \"{}\",", s.name);
    bytes_field(o, "code", &s.code);
    let _ = writeln!(o, "        code_align: {},", s.code_align);
    bytes_field(o, "init_data", &s.init_data);
    let _ = writeln!(o, "        data_len: {},", s.data_len);
    let _ = writeln!(o, "        data_align: {},", s.data_align);
    if s.zero_fill.is_empty() {
        o.push_str("        zero_fill: &[],\n");
    } else {
        let uses: Vec<String> = s
            .zero_fill
            .iter()
            .map(|z| {
                format!(
                    "ZeroFillUse {{ section: {}, offset: {:#x} }}",
                    set.zero_fill_index(template, &z.section),
                    z.offset
                )
            })
            .collect();
        let _ = writeln!(o, "        zero_fill: &[{}],", uses.join(", "));
    }
    if s.holes.is_empty() {
        o.push_str("        holes: &[],\n");
    } else {
        o.push_str("        holes: &[\n");
        for h in &s.holes {
            let value = match set.set_value(s, h.value) {
                HoleValue::Continue => "HoleValue::Continue".to_string(),
                HoleValue::Code => "HoleValue::Code".to_string(),
                HoleValue::Cold => "HoleValue::Cold".to_string(),
                HoleValue::Data => "HoleValue::Data".to_string(),
                HoleValue::Target(i) => format!("HoleValue::Target({i})"),
                HoleValue::Operand(i) => format!("HoleValue::Operand({i})"),
                HoleValue::OperandHigh(i) => format!("HoleValue::OperandHigh({i})"),
                HoleValue::OperandLow(i) => format!("HoleValue::OperandLow({i})"),
                HoleValue::Symbol(i) => format!("HoleValue::Symbol({i})"),
            };
            let section = match h.section {
                Section::Code => "Code",
                Section::Data => "Data",
            };
            let _ = writeln!(
                o,
                "            Hole {{ section: Section::{section}, offset: {:#x}, kind: HoleKind::{}, value: {value}, addend: {} }},",
                h.offset, h.kind, h.addend
            );
        }
        o.push_str("        ],\n");
    }
    let _ = writeln!(o, "        operands: &[{}],", string_list(&s.operands));
    let _ = writeln!(o, "        targets: &[{}],", string_list(&s.targets));
    let symbols: Vec<String> = (0..s.symbols.len())
        .map(|i| set.symbol_index(s, i as u16).to_string())
        .collect();
    let _ = writeln!(o, "        symbols: &[{}],", symbols.join(", "));
    let _ = writeln!(o, "        falls_through: {},", s.elided_continue);
    let _ = writeln!(o, "        cold_len: {},", s.cold_len);
    o.push_str("    };\n");
    Ok(())
}

/// `code: b"\x..",` (16 bytes a line, continued with `\`) or `code: &[],`: one literal
/// where a list of integers is one expression per byte for rustc to check (issue 38).
fn bytes_field(o: &mut String, field: &str, bytes: &[u8]) {
    if bytes.is_empty() {
        let _ = writeln!(o, "        {field}: &[],");
        return;
    }
    let _ = writeln!(
        o,
        "        {field}: {},",
        byte_string(bytes, "            ")
    );
}

/// `bytes` as a byte-string literal of `\x` escapes, on one line up to 16 bytes, else
/// 16 a line after a `\` that ends the line (so the new line and `indent` are not in it).
fn byte_string(bytes: &[u8], indent: &str) -> String {
    let escaped = |chunk: &[u8]| {
        chunk
            .iter()
            .map(|b| format!("\\x{b:02x}"))
            .collect::<String>()
    };
    if bytes.len() <= 16 {
        return format!("b\"{}\"", escaped(bytes));
    }
    let mut s = String::from("b\"");
    for chunk in bytes.chunks(16) {
        let _ = write!(s, "\\\n{indent}{}", escaped(chunk));
    }
    s.push('"');
    s
}

fn string_list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| string_literal(s))
        .collect::<Vec<_>>()
        .join(", ")
}

fn string_literal(s: &str) -> String {
    format!("{s:?}")
}

/// A stencil name as a Rust identifier (raw for keywords); names that cannot be one are errors.
fn ident(name: &str) -> Result<String> {
    const KEYWORDS: &[&str] = &[
        "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do",
        "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in",
        "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
        "return", "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe",
        "unsized", "use", "virtual", "where", "while", "yield",
    ];
    if matches!(name, "self" | "Self" | "super" | "crate" | "_") || !crate::set::is_identifier(name)
    {
        return Err(Error(format!(
            "stencil name `{name}` cannot be a Rust identifier"
        )));
    }
    Ok(if KEYWORDS.contains(&name) {
        format!("r#{name}")
    } else {
        name.to_string()
    })
}

fn arch_variant(a: Arch) -> &'static str {
    match a {
        Arch::X86_64 => "X86_64",
        Arch::Aarch64 => "Aarch64",
        Arch::Riscv64 => "Riscv64",
    }
}

fn format_variant(f: ObjectFormat) -> &'static str {
    match f {
        ObjectFormat::Elf => "Elf",
        ObjectFormat::MachO => "MachO",
        ObjectFormat::Coff => "Coff",
    }
}

fn abi_variant(a: Abi) -> &'static str {
    match a {
        Abi::SysV64 => "SysV64",
        Abi::Win64 => "Win64",
        Abi::Aapcs64 => "Aapcs64",
        Abi::Lp64d => "Lp64d",
    }
}

/// The relative path from directory `from` to directory `to` (both absolute), `/`-separated.
pub fn relative_path(from: &Path, to: &Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests;
