//! Target files (`targets/<triple>.toml`): everything specific to one target triple. Adding
//! a target means adding one file; only a new object format needs reader code.
//! Unknown keys are errors naming file and key; the `[test]` table belongs to the test
//! matrix and is passed through unchecked.

use crate::error::{Error, Result};
use cpjit_model::{Abi, Arch, ObjectFormat};
use inkwell::targets::{CodeModel, RelocMode};
use serde::Deserialize;
use std::path::Path;

/// One parsed target file.
#[derive(Debug, Clone)]
pub struct Target {
    pub triple: String,
    pub arch: Arch,
    pub format: ObjectFormat,
    pub abi: Abi,
    pub cflags: Vec<String>,
    pub code_model: String,
    pub reloc_model: String,
    pub nop: Vec<u8>,
    pub code_align: u32,
    /// Registers stencils must never touch (e.g. `x18` on Apple and Windows AArch64).
    pub reserved_registers: Vec<String>,
    /// See [`Target::llvm_triple`].
    pub llvm_triple: Option<String>,
    /// The calling convention every op (all stencils but the entry shim) must have.
    pub op_calling_convention: OpCallingConvention,
    /// The file's bytes (part of the inputs digest).
    pub bytes: Vec<u8>,
}

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
    /// Owned by the test matrix (`cargo xtask test-matrix`).
    #[allow(dead_code)]
    test: Option<toml::Table>,
}

/// The calling convention of a target's ops (the stencils that tail-call each other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCallingConvention {
    /// clang's `preserve_none`: every register is an argument or scratch register.
    PreserveNone,
    /// The platform's C convention (with `musttail`), where clang has no `preserve_none`.
    C,
}

impl Target {
    /// Reads every `*.toml` in `dir`, sorted by triple.
    pub fn load_all(dir: &Path) -> Result<Vec<Target>> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            Error(format!(
                "{}: cannot read target directory: {e}",
                dir.display()
            ))
        })?;
        let mut paths = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| Error(format!("{}: {e}", dir.display())))?
                .path();
            if path.extension().is_some_and(|x| x == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
        let mut targets = Vec::new();
        let mut errors = Vec::new();
        for path in paths {
            match Target::load(&path) {
                Ok(t) => targets.push(t),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(Error::many(errors));
        }
        if targets.is_empty() {
            return Err(Error(format!(
                "{}: no target files (*.toml)",
                dir.display()
            )));
        }
        Ok(targets)
    }

    pub fn load(path: &Path) -> Result<Target> {
        let bytes = std::fs::read(path)
            .map_err(|e| Error(format!("{}: cannot read target file: {e}", path.display())))?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        Target::parse(&path.display().to_string(), stem, bytes)
    }

    /// Parses a target file; `file` names it in errors, `stem` must equal its triple.
    pub fn parse(file: &str, stem: &str, bytes: Vec<u8>) -> Result<Target> {
        let text =
            std::str::from_utf8(&bytes).map_err(|e| Error(format!("{file}: not UTF-8: {e}")))?;
        let raw: RawTarget = toml::from_str(text)
            .map_err(|e| Error(format!("{file}: {}", e.to_string().trim_end())))?;
        let bad = |key: &str, value: &str, expected: &str| {
            Error(format!(
                "{file}: key `{key}`: unknown value `{value}` (expected {expected})"
            ))
        };
        if raw.triple != stem {
            return Err(Error(format!(
                "{file}: key `triple`: `{}` does not match the file name (`{stem}.toml`)",
                raw.triple
            )));
        }
        let arch = match raw.arch.as_str() {
            "x86_64" => Arch::X86_64,
            "aarch64" => Arch::Aarch64,
            "riscv64" => Arch::Riscv64,
            v => return Err(bad("arch", v, "x86_64, aarch64 or riscv64")),
        };
        let format = match raw.format.as_str() {
            "elf" => ObjectFormat::Elf,
            "macho" => ObjectFormat::MachO,
            "coff" => ObjectFormat::Coff,
            v => return Err(bad("format", v, "elf, macho or coff")),
        };
        let abi = match raw.abi.as_str() {
            "sysv64" => Abi::SysV64,
            "win64" => Abi::Win64,
            "aapcs64" => Abi::Aapcs64,
            "lp64d" => Abi::Lp64d,
            v => return Err(bad("abi", v, "sysv64, win64, aapcs64 or lp64d")),
        };
        parse_code_model(&raw.code_model).ok_or_else(|| {
            bad(
                "code_model",
                &raw.code_model,
                "small, kernel, medium or large",
            )
        })?;
        parse_reloc_model(&raw.reloc_model).ok_or_else(|| {
            bad(
                "reloc_model",
                &raw.reloc_model,
                "static, pic or dynamic-no-pic",
            )
        })?;
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
            return Err(Error(format!(
                "{file}: key `code_align`: {} must be a power of two and a multiple of the nop size ({})",
                raw.code_align,
                nop.len()
            )));
        }
        for r in &raw.reserved_registers {
            if arch == Arch::Aarch64 && aarch64_register_number(r).is_none() {
                return Err(bad(
                    "reserved_registers",
                    r,
                    "an AArch64 general register such as x18",
                ));
            }
            if arch == Arch::Riscv64 && riscv_register_names(r).is_none() {
                return Err(bad(
                    "reserved_registers",
                    r,
                    "a RISC-V general register such as gp, tp or x3",
                ));
            }
            if arch == Arch::X86_64 {
                return Err(bad(
                    "reserved_registers",
                    r,
                    "no reserved registers on x86_64",
                ));
            }
        }
        Ok(Target {
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
            op_calling_convention: match raw.op_calling_convention.as_deref() {
                None | Some("preserve_none") => OpCallingConvention::PreserveNone,
                Some("c") => OpCallingConvention::C,
                Some(v) => return Err(bad("op_calling_convention", v, "preserve_none or c")),
            },
            bytes,
        })
    }

    /// This target as template set `set` (its manifest `file`) builds it: with the code and
    /// relocation models of the set's `[target.<triple>]` table where it gives them. Only
    /// the target file's own pair and the pairs of [`SET_MODELS`] for the target's
    /// architecture and object format are accepted; anything else is refused naming file,
    /// set, target and the supported pairs.
    pub fn with_set_models(
        &self,
        file: &str,
        set: &str,
        code_model: Option<&str>,
        reloc_model: Option<&str>,
    ) -> Result<Target> {
        let code = code_model.unwrap_or(&self.code_model);
        let reloc = reloc_model.unwrap_or(&self.reloc_model);
        if (code, reloc) == (self.code_model.as_str(), self.reloc_model.as_str()) {
            return Ok(self.clone());
        }
        let supported: Vec<(&str, &str)> = SET_MODELS
            .iter()
            .filter(|m| m.0 == self.arch && m.1 == self.format)
            .map(|m| (m.2, m.3))
            .collect();
        if !supported.contains(&(code, reloc)) {
            let mut pairs = vec![format!(
                "code_model = \"{}\", reloc_model = \"{}\" (the target file's)",
                self.code_model, self.reloc_model
            )];
            pairs.extend(
                supported
                    .iter()
                    .map(|(c, r)| format!("code_model = \"{c}\", reloc_model = \"{r}\"")),
            );
            return Err(Error(format!(
                "{file}: [target.{}] of set `{set}`: code_model = \"{code}\", reloc_model = \
                 \"{reloc}\" is not supported on {} {} (the readers and the runtime patch \
                 its holes only for): {}",
                self.triple,
                self.arch.name(),
                self.format.name(),
                pairs.join("; ")
            )));
        }
        let mut t = self.clone();
        t.code_model = code.to_string();
        t.reloc_model = reloc.to_string();
        Ok(t)
    }

    pub fn llvm_code_model(&self) -> CodeModel {
        parse_code_model(&self.code_model).expect("checked when parsed")
    }

    pub fn llvm_reloc_mode(&self) -> RelocMode {
        parse_reloc_model(&self.reloc_model).expect("checked when parsed")
    }

    /// Every spelling of the reserved registers in disassembly (`x18` → `x18`, `w18`).
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

    /// The triple to give clang (`--target`), LLVM's code generator and its disassembler.
    pub fn llvm_triple(&self) -> &str {
        self.llvm_triple.as_deref().unwrap_or(&self.triple)
    }
}

/// The code and relocation models a set may ask for instead of its target file's, per
/// architecture and object format: x86-64 ELF's medium code model without PIC, where every
/// address is a `movabs` imm64 (`HoleKind::X86Imm64`) given `-mlarge-data-threshold=0`
/// and calls and jumps stay rel32.
pub const SET_MODELS: &[(Arch, ObjectFormat, &str, &str)] =
    &[(Arch::X86_64, ObjectFormat::Elf, "medium", "static")];

fn parse_code_model(s: &str) -> Option<CodeModel> {
    Some(match s {
        "small" => CodeModel::Small,
        "kernel" => CodeModel::Kernel,
        "medium" => CodeModel::Medium,
        "large" => CodeModel::Large,
        _ => return None,
    })
}

fn parse_reloc_model(s: &str) -> Option<RelocMode> {
    Some(match s {
        "static" => RelocMode::Static,
        "pic" => RelocMode::PIC,
        "dynamic-no-pic" => RelocMode::DynamicNoPic,
        _ => return None,
    })
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

/// (Unit tests) The kit's target file with architecture `arch` and object format `format`,
/// so tests say what kind of target they need instead of naming a triple.
#[cfg(test)]
pub(crate) fn test_target(arch: Arch, format: ObjectFormat) -> Target {
    Target::load_all(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets"))
        .unwrap()
        .into_iter()
        .find(|t| t.arch == arch && t.format == format)
        .unwrap_or_else(|| panic!("no target file for {} {}", arch.name(), format.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
triple = "aarch64-example-os"
arch = "aarch64"
format = "macho"
abi = "aapcs64"
cflags = []
code_model = "small"
reloc_model = "pic"
nop = "1f2003d5"
code_align = 4
reserved_registers = ["x18"]
[test]
execution = "host-abi"
"#;

    fn parse(text: &str) -> Result<Target> {
        Target::parse(
            "targets/aarch64-example-os.toml",
            "aarch64-example-os",
            text.as_bytes().to_vec(),
        )
    }

    #[test]
    fn good_file() {
        let t = parse(GOOD).unwrap();
        assert_eq!(t.nop, [0x1f, 0x20, 0x03, 0xd5]);
        assert_eq!(t.reserved_register_names(), ["x18", "w18"]);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let err = parse(&GOOD.replace("code_align", "codealign = 4\ncode_align")).unwrap_err();
        assert!(
            err.0.contains("targets/aarch64-example-os.toml") && err.0.contains("codealign"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = parse(&GOOD.replace("\"macho\"", "\"wasm\"")).unwrap_err();
        assert!(
            err.0.contains("`format`") && err.0.contains("wasm"),
            "{err}"
        );
        let err = parse(&GOOD.replace("1f2003d5", "1f2003d")).unwrap_err();
        assert!(err.0.contains("`nop`"), "{err}");
        let err = parse(&GOOD.replace("\"x18\"", "\"r18\"")).unwrap_err();
        assert!(
            err.0.contains("reserved_registers") && err.0.contains("r18"),
            "{err}"
        );
        let err = parse(&GOOD.replace("\"pic\"", "\"pie\"")).unwrap_err();
        assert!(err.0.contains("reloc_model"), "{err}");
    }

    #[test]
    fn a_set_may_choose_only_the_supported_code_and_relocation_models() {
        let elf = test_target(Arch::X86_64, ObjectFormat::Elf);
        let medium = elf
            .with_set_models("m.toml", "s", Some("medium"), Some("static"))
            .unwrap();
        assert_eq!(
            (medium.code_model.as_str(), medium.reloc_model.as_str()),
            ("medium", "static")
        );
        assert_eq!(medium.llvm_code_model(), CodeModel::Medium);
        let own = elf.with_set_models("m.toml", "s", None, None).unwrap();
        assert_eq!(own.code_model, elf.code_model);
        // Half of the pair, another pair, and the pair on a target that cannot take it.
        let err = elf
            .with_set_models("m.toml", "s", Some("medium"), None)
            .unwrap_err();
        for needle in [
            "m.toml",
            "set `s`",
            &elf.triple,
            "x86_64 elf",
            "\"medium\", reloc_model = \"static\"",
        ] {
            assert!(err.0.contains(needle), "{err} lacks {needle}");
        }
        assert!(elf
            .with_set_models("m.toml", "s", Some("large"), Some("static"))
            .is_err());
        for (arch, format) in [
            (Arch::X86_64, ObjectFormat::MachO),
            (Arch::X86_64, ObjectFormat::Coff),
            (Arch::Aarch64, ObjectFormat::Elf),
            (Arch::Riscv64, ObjectFormat::Elf),
        ] {
            let t = test_target(arch, format);
            let err = t
                .with_set_models("m.toml", "s", Some("medium"), Some("static"))
                .unwrap_err();
            assert!(
                err.0.contains(&t.triple) && err.0.contains("(the target file's)"),
                "{err}"
            );
        }
    }

    #[test]
    fn triple_must_match_file_name() {
        let err = Target::parse("targets/x.toml", "x", GOOD.as_bytes().to_vec()).unwrap_err();
        assert!(
            err.0.contains("targets/x.toml") && err.0.contains("triple"),
            "{err}"
        );
    }
}
