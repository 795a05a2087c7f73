//! The target files, `targets/<triple>.toml`: the one place a stencil target and its facts
//! are written, and this crate the one place their keys are declared, parsed and checked.
//! The toolchain (which builds a target's stencils) and xtask (which derives the matrix
//! rows and the set-up from them) both read target files through [`load_all`], so a key,
//! its allowed values and its error message exist once. Adding a target is adding a file.
//!
//! Every error names the file and the key. Light on purpose (serde and toml): xtask depends
//! on it and must build in seconds.

use cpjit_model::{Abi, Arch, Host, ObjectFormat};
use serde::Deserialize;
use std::path::Path;

/// One parsed and checked target file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetFile {
    pub triple: String,
    pub arch: Arch,
    pub format: ObjectFormat,
    pub abi: Abi,
    /// Extra clang flags for this target.
    pub cflags: Vec<String>,
    /// One of [`CODE_MODELS`] and of [`RELOC_MODELS`].
    pub code_model: String,
    pub reloc_model: String,
    /// The padding instruction's bytes.
    pub nop: Vec<u8>,
    /// A power of two, a multiple of the nop's size.
    pub code_align: u32,
    /// Registers stencils must never touch (e.g. `x18` on Apple and Windows AArch64).
    pub reserved_registers: Vec<String>,
    /// See [`TargetFile::llvm_triple`].
    pub llvm_triple: Option<String>,
    /// The calling convention every op (all stencils but the entry shim) must have.
    pub op_calling_convention: OpCallingConvention,
    /// `same_code_as`: another target whose code objects are this target's (the two
    /// differ only in how a process runs them, e.g. musl and glibc): the toolchain compiles
    /// their stencils once and writes both crates. [`load_all`] checks that every other
    /// fact of the two files is equal.
    pub same_code_as: Option<String>,
    /// The `[test]` table: how the test matrix executes the target's stencils.
    pub test: Option<TestFacts>,
    /// The file's bytes (the toolchain digests them).
    pub bytes: Vec<u8>,
}

/// The calling convention of a target's ops (the stencils that tail-call each other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCallingConvention {
    /// clang's `preserve_none`: every register is an argument or scratch register.
    PreserveNone,
    /// The platform's C convention (with `musttail`), where clang has no `preserve_none`.
    C,
}

/// How a matrix row's process meets the target's stencils.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Execution {
    /// The Rust target is the stencils' own target, run on this host.
    Native,
    /// The Rust target is the stencils' own target, run under qemu-user.
    Qemu,
    /// A Windows process under wine.
    Wine,
    /// A process of another OS with the same architecture and calling convention.
    HostAbi,
}

impl Execution {
    pub fn name(self) -> &'static str {
        match self {
            Execution::Native => "native",
            Execution::Qemu => "qemu",
            Execution::Wine => "wine",
            Execution::HostAbi => "host-abi",
        }
    }
}

/// The `[test]` table of a target file.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFacts {
    pub execution: Execution,
    /// The Rust target whose test binaries execute the stencils.
    pub rust_target: String,
    /// A Rust target on which the runtime must at least compile (`cargo check`), when no
    /// process of this host can run the target's own OS.
    pub check_target: Option<String>,
    /// The linker of `rust_target` (cargo's `target.<rust_target>.linker`), when not the
    /// host's `cc`: a cross gcc, or `rust-lld` for a target whose C runtime Rust brings
    /// (musl's self-contained crt and libc).
    pub linker: Option<String>,
    /// The C compiler of `rust_target` for build scripts (the `cc` crate's `CC_<target>`),
    /// when the `cc` crate's guess (`<prefix>-gcc`) is not installed; clang is given
    /// `--target` by the `cc` crate.
    pub cc: Option<String>,
    /// What runs `rust_target`'s test binaries on an x86_64 Linux host (cargo's
    /// `target.<rust_target>.runner`): program and arguments, the program relative to the
    /// kit's root when it has a slash. Required for `qemu` and `wine` rows.
    pub runner: Option<Vec<String>>,
    /// The Debian packages this row needs (emulator, cross linker, C library), installed by
    /// `cargo xtask setup`.
    #[serde(default)]
    pub packages: Vec<String>,
    /// The suites of `ci/matrix.toml` this row runs (default: all), when a row's extra
    /// coverage does not pay for its time; the file says why.
    pub suites: Option<Vec<String>>,
}

/// The code models a target file may name (LLVM's).
pub const CODE_MODELS: [&str; 4] = ["small", "kernel", "medium", "large"];
/// The relocation models a target file may name (LLVM's).
pub const RELOC_MODELS: [&str; 3] = ["static", "pic", "dynamic-no-pic"];

/// The file as written; [`TargetFile::parse`] checks the values.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    triple: String,
    arch: String,
    format: String,
    abi: String,
    #[serde(default)]
    cflags: Vec<String>,
    code_model: String,
    reloc_model: String,
    nop: String,
    code_align: u32,
    #[serde(default)]
    reserved_registers: Vec<String>,
    /// The triple clang and LLVM know the target by, when it differs from the Rust-style
    /// name (`riscv64gc-…` is `riscv64-…` to LLVM; the ISA extensions go in `cflags`).
    llvm_triple: Option<String>,
    /// `preserve_none` (the default) or `c` where clang has no `preserve_none` for the
    /// architecture (RISC-V in clang-19); must agree with `CPJIT_CC` in cpjit.h.
    #[serde(default)]
    op_calling_convention: Option<String>,
    same_code_as: Option<String>,
    test: Option<TestFacts>,
}

impl TargetFile {
    /// Reads and parses one target file.
    pub fn load(path: &Path) -> Result<TargetFile, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("{}: cannot read target file: {e}", path.display()))?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        TargetFile::parse(&path.display().to_string(), stem, bytes)
    }

    /// Parses a target file; `file` names it in errors, `stem` must equal its triple.
    pub fn parse(file: &str, stem: &str, bytes: Vec<u8>) -> Result<TargetFile, String> {
        let text = std::str::from_utf8(&bytes).map_err(|e| format!("{file}: not UTF-8: {e}"))?;
        let raw: RawTarget =
            toml::from_str(text).map_err(|e| format!("{file}: {}", e.to_string().trim_end()))?;
        let bad = |key: &str, value: &str, expected: &str| {
            format!("{file}: key `{key}`: unknown value `{value}` (expected {expected})")
        };
        if raw.triple != stem {
            return Err(format!(
                "{file}: key `triple`: `{}` does not match the file name (`{stem}.toml`)",
                raw.triple
            ));
        }
        let arch = Arch::ALL
            .into_iter()
            .find(|a| a.name() == raw.arch)
            .ok_or_else(|| bad("arch", &raw.arch, &one_of(Arch::ALL.map(Arch::name))))?;
        const FORMATS: [ObjectFormat; 3] =
            [ObjectFormat::Elf, ObjectFormat::MachO, ObjectFormat::Coff];
        let format = FORMATS
            .into_iter()
            .find(|f| f.name() == raw.format)
            .ok_or_else(|| {
                bad(
                    "format",
                    &raw.format,
                    &one_of(FORMATS.map(ObjectFormat::name)),
                )
            })?;
        // A contradiction here would surface only as objects the readers do not expect,
        // blamed on the cache or the object: name the key instead.
        let spelled = raw.llvm_triple.as_deref().unwrap_or(&raw.triple);
        if let Some(implied) = implied_format(spelled).filter(|&f| f != format) {
            return Err(format!(
                "{file}: key `format`: `{}` contradicts the triple `{spelled}`, whose objects \
                 are {}; set format = \"{}\", or correct the triple",
                raw.format,
                implied.name(),
                implied.name()
            ));
        }
        if let Some(implied) = implied_arch(spelled).filter(|&a| a != arch) {
            return Err(format!(
                "{file}: key `arch`: `{}` contradicts the triple `{spelled}`, whose \
                 architecture is {}; set arch = \"{}\", or correct the triple",
                raw.arch,
                implied.name(),
                implied.name()
            ));
        }
        let abi = Abi::ALL
            .into_iter()
            .find(|a| a.name() == raw.abi)
            .ok_or_else(|| bad("abi", &raw.abi, &one_of(Abi::ALL.map(Abi::name))))?;
        if !CODE_MODELS.contains(&raw.code_model.as_str()) {
            return Err(bad("code_model", &raw.code_model, &one_of(CODE_MODELS)));
        }
        if !RELOC_MODELS.contains(&raw.reloc_model.as_str()) {
            return Err(bad("reloc_model", &raw.reloc_model, &one_of(RELOC_MODELS)));
        }
        let nop = parse_hex(&raw.nop)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                bad(
                    "nop",
                    &raw.nop,
                    "the instruction's bytes in hex, e.g. \"90\"",
                )
            })?;
        if !raw.code_align.is_power_of_two() || raw.code_align as usize % nop.len() != 0 {
            return Err(format!(
                "{file}: key `code_align`: {} must be a power of two and a multiple of the nop \
                 size ({})",
                raw.code_align,
                nop.len()
            ));
        }
        for r in &raw.reserved_registers {
            let expected = match arch {
                Arch::Aarch64 if aarch64_register_number(r).is_none() => {
                    "an AArch64 general register such as x18"
                }
                Arch::Riscv64 if riscv_register_names(r).is_none() => {
                    "a RISC-V general register such as gp, tp or x3"
                }
                Arch::X86_64 => "no reserved registers on x86_64",
                _ => continue,
            };
            return Err(bad("reserved_registers", r, expected));
        }
        let op_calling_convention = match raw.op_calling_convention.as_deref() {
            None | Some("preserve_none") => OpCallingConvention::PreserveNone,
            Some("c") => OpCallingConvention::C,
            Some(v) => return Err(bad("op_calling_convention", v, "preserve_none or c")),
        };
        if raw.same_code_as.as_deref() == Some(raw.triple.as_str()) {
            return Err(format!(
                "{file}: key `same_code_as`: names the file's own triple; name the other \
                 target whose code objects these are, or remove the key"
            ));
        }
        Ok(TargetFile {
            triple: raw.triple,
            arch,
            format,
            abi,
            cflags: raw.cflags,
            code_model: raw.code_model,
            reloc_model: raw.reloc_model,
            nop,
            code_align: raw.code_align,
            reserved_registers: raw.reserved_registers,
            llvm_triple: raw.llvm_triple,
            op_calling_convention,
            same_code_as: raw.same_code_as,
            test: raw.test,
            bytes,
        })
    }

    /// The triple to give clang (`--target`), LLVM's code generator and its disassembler.
    pub fn llvm_triple(&self) -> &str {
        self.llvm_triple.as_deref().unwrap_or(&self.triple)
    }

    /// Every spelling of the reserved registers in disassembly (`x18` → `x18`, `w18`;
    /// `gp` → `x3`, `gp`).
    pub fn reserved_register_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for r in &self.reserved_registers {
            if self.arch == Arch::Riscv64 {
                if let Some((numeric, abi)) = riscv_register_names(r) {
                    names.push(numeric);
                    names.push(abi.to_string());
                }
            } else if let Some(n) = aarch64_register_number(r) {
                names.push(format!("x{n}"));
                names.push(format!("w{n}"));
            }
        }
        names
    }

    /// The `[test]` table, which the test matrix needs, checked: its Rust target must be a
    /// process that can run these stencils (the one host-compatibility rule,
    /// [`Host::runs`]), and native and qemu rows run the stencils' own target.
    pub fn test_facts(&self) -> Result<&TestFacts, String> {
        let file = format!("targets/{}.toml", self.triple);
        let test = self.test.as_ref().ok_or_else(|| {
            format!("{file}: no [test] table (execution, rust_target): the matrix cannot run it")
        })?;
        let rust_target = &test.rust_target;
        let host = Host::of_triple(rust_target).ok_or_else(|| {
            format!("{file}: [test] rust_target `{rust_target}`: not a supported architecture")
        })?;
        let reserved: Vec<&str> = self.reserved_registers.iter().map(String::as_str).collect();
        if !host.runs(self.arch, self.abi, &reserved) {
            return Err(format!(
                "{file}: [test] rust_target `{rust_target}`: a {host} process cannot run these \
                 stencils ({} {}); {}",
                self.arch.name(),
                self.abi.name(),
                Host::who_runs(self.arch, self.abi, &reserved)
            ));
        }
        if let Some(runner) = &test.runner {
            if runner.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(format!(
                    "{file}: [test] runner: empty; give the program and its arguments, e.g. \
                     [\"qemu-aarch64\", \"-cpu\", \"max\"]"
                ));
            }
        } else if matches!(test.execution, Execution::Qemu | Execution::Wine) {
            return Err(format!(
                "{file}: [test] execution `{}` needs a `runner` (the emulator that runs \
                 {rust_target}'s test binaries on an x86_64 Linux host, e.g. \
                 [\"qemu-aarch64\", \"-cpu\", \"max\"])",
                test.execution.name()
            ));
        }
        let same_target = *rust_target == self.triple;
        let native_like = matches!(test.execution, Execution::Native | Execution::Qemu);
        if native_like != same_target {
            return Err(format!(
                "{file}: [test] execution `{}` with rust_target `{rust_target}`: native and qemu \
                 rows run the stencils' own target, the others another one",
                test.execution.name()
            ));
        }
        Ok(test)
    }
}

/// Every target file (`*.toml`) in `dir`, sorted by triple; every file's error, if any.
pub fn load_all(dir: &Path) -> Result<Vec<TargetFile>, Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        vec![format!(
            "{}: cannot read target directory: {e}",
            dir.display()
        )]
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| vec![format!("{}: {e}", dir.display())])?
            .path();
        if path.extension().is_some_and(|x| x == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    let (mut targets, mut errors) = (Vec::new(), Vec::new());
    for path in paths {
        match TargetFile::load(&path) {
            Ok(t) => targets.push(t),
            Err(e) => errors.push(e),
        }
    }
    if targets.is_empty() && errors.is_empty() {
        errors.push(format!("{}: no target files (*.toml)", dir.display()));
    }
    if errors.is_empty() {
        errors.extend(
            targets
                .iter()
                .filter_map(|t| check_same_code(dir, t, &targets).err()),
        );
    }
    if errors.is_empty() {
        Ok(targets)
    } else {
        Err(errors)
    }
}

/// Checks `t`'s `same_code_as` against the other files of `dir` (`all`): the twin exists,
/// has no twin of its own, and every fact that reaches the code (all but `triple`,
/// `same_code_as` and `[test]`) is equal, so compiling once for both is exact.
fn check_same_code(dir: &Path, t: &TargetFile, all: &[TargetFile]) -> Result<(), String> {
    let Some(twin) = &t.same_code_as else {
        return Ok(());
    };
    let file = dir.join(format!("{}.toml", t.triple));
    let file = file.display();
    let Some(other) = all.iter().find(|o| o.triple == *twin) else {
        return Err(format!(
            "{file}: key `same_code_as`: no target file `{twin}.toml` in {}; name one of the \
             targets there, or remove the key",
            dir.display()
        ));
    };
    if let Some(third) = &other.same_code_as {
        return Err(format!(
            "{file}: key `same_code_as`: `{twin}` has `same_code_as = \"{third}\"` itself; \
             name `{third}` directly"
        ));
    }
    let differing: Vec<&str> = code_facts(t)
        .into_iter()
        .zip(code_facts(other))
        .filter(|((_, a), (_, b))| a != b)
        .map(|((key, _), _)| key)
        .collect();
    if differing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{file}: key `same_code_as`: `{twin}` differs in {}; code objects are the same only \
         when every key but `triple` and [test] is: make them equal, or remove the key (the \
         target's stencils are then compiled on their own)",
        differing
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The facts of a target file that reach its code, by key, comparable between files. The
/// destructuring names every field, so a new key must be sorted in here or out.
fn code_facts(t: &TargetFile) -> [(&'static str, String); 11] {
    let TargetFile {
        triple: _,
        same_code_as: _,
        test: _,
        bytes: _,
        arch,
        format,
        abi,
        cflags,
        code_model,
        reloc_model,
        nop,
        code_align,
        reserved_registers,
        llvm_triple,
        op_calling_convention,
    } = t;
    [
        ("arch", arch.name().to_string()),
        ("format", format.name().to_string()),
        ("abi", abi.name().to_string()),
        ("cflags", format!("{cflags:?}")),
        ("code_model", code_model.clone()),
        ("reloc_model", reloc_model.clone()),
        ("nop", format!("{nop:?}")),
        ("code_align", code_align.to_string()),
        ("reserved_registers", format!("{reserved_registers:?}")),
        ("llvm_triple", format!("{llvm_triple:?}")),
        (
            "op_calling_convention",
            format!("{op_calling_convention:?}"),
        ),
    ]
}

fn one_of<const N: usize>(names: [&str; N]) -> String {
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn aarch64_register_number(r: &str) -> Option<u32> {
    let n: u32 = r
        .strip_prefix('x')
        .or_else(|| r.strip_prefix('w'))?
        .parse()
        .ok()?;
    (n <= 30).then_some(n)
}

/// RISC-V ABI register names, by number (`x0`..`x31`).
const RISCV_ABI_NAMES: [&str; 32] = [
    "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4",
    "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
    "t5", "t6",
];

/// `("x3", "gp")` for either `x3` or `gp`: both spellings, as the disassembler may print
/// either.
fn riscv_register_names(r: &str) -> Option<(String, &'static str)> {
    let n = match r.strip_prefix('x').and_then(|n| n.parse::<usize>().ok()) {
        Some(n) if n < 32 => n,
        _ => RISCV_ABI_NAMES.iter().position(|name| *name == r)?,
    };
    Some((format!("x{n}"), RISCV_ABI_NAMES[n]))
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The object format LLVM gives `triple` by its OS and vendor (Mach-O for Apple, COFF for
/// Windows, ELF for the usual Unix systems); `None` for an OS not known here.
fn implied_format(triple: &str) -> Option<ObjectFormat> {
    let parts: Vec<&str> = triple.split('-').skip(1).collect();
    let any = |prefixes: &[&str]| {
        parts
            .iter()
            .any(|p| prefixes.iter().any(|prefix| p.starts_with(prefix)))
    };
    if any(&["apple", "darwin", "macos", "ios", "tvos", "watchos"]) {
        Some(ObjectFormat::MachO)
    } else if any(&["windows", "win32", "uefi"]) {
        Some(ObjectFormat::Coff)
    } else if any(&[
        "linux", "freebsd", "netbsd", "openbsd", "android", "none", "elf",
    ]) {
        Some(ObjectFormat::Elf)
    } else {
        None
    }
}

/// The architecture of `triple`'s first component, when it is one of [`Arch::ALL`].
fn implied_arch(triple: &str) -> Option<Arch> {
    let first = triple.split('-').next()?;
    match first {
        "x86_64" | "amd64" => Some(Arch::X86_64),
        "aarch64" | "arm64" => Some(Arch::Aarch64),
        f if f.starts_with("riscv64") => Some(Arch::Riscv64),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
