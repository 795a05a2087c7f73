//! Target files (`targets/<triple>.toml`) as the toolchain builds for them: everything
//! specific to one target triple. Adding a target means adding one file; only a new object
//! format needs reader code. The file's keys are parsed and checked by `cpjit-targets-schema`
//! (shared with xtask); this module adds what only the build needs (LLVM's code and
//! relocation models, a template set's own choice of them).

use crate::error::{Error, Result};
use cpjit_model::{Arch, ObjectFormat};
pub use cpjit_targets_schema::{OpCallingConvention, TargetFile};
use inkwell::targets::{CodeModel, RelocMode};
use std::path::Path;

/// One target file, as the toolchain builds for it: its facts ([`TargetFile`], which
/// parses and checks the file; read through `Deref`), possibly with the code and relocation
/// models of a template set ([`Target::with_set_models`]).
#[derive(Debug, Clone)]
pub struct Target(TargetFile);

impl std::ops::Deref for Target {
    type Target = TargetFile;
    fn deref(&self) -> &TargetFile {
        &self.0
    }
}

impl Target {
    /// Reads every `*.toml` in `dir`, sorted by triple (every file's error together).
    pub fn load_all(dir: &Path) -> Result<Vec<Target>> {
        let all = cpjit_targets_schema::load_all(dir)
            .map_err(|errors| Error::many(errors.into_iter().map(Error).collect()))?;
        let errors: Vec<Error> = all
            .iter()
            .filter_map(|t| {
                let file = dir.join(format!("{}.toml", t.triple));
                check_nop(&file.display().to_string(), t).err()
            })
            .collect();
        if !errors.is_empty() {
            return Err(Error::many(errors));
        }
        Ok(all.into_iter().map(Target).collect())
    }

    /// Reads and parses one target file.
    pub fn load(path: &Path) -> Result<Target> {
        let t = TargetFile::load(path).map_err(Error)?;
        check_nop(&path.display().to_string(), &t)?;
        Ok(Target(t))
    }

    /// Parses a target file; `file` names it in errors, `stem` must equal its triple.
    pub fn parse(file: &str, stem: &str, bytes: Vec<u8>) -> Result<Target> {
        let t = TargetFile::parse(file, stem, bytes).map_err(Error)?;
        check_nop(file, &t)?;
        Ok(Target(t))
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
        t.0.code_model = code.to_string();
        t.0.reloc_model = reloc.to_string();
        Ok(t)
    }

    pub fn llvm_code_model(&self) -> CodeModel {
        parse_code_model(&self.code_model).expect("checked when parsed")
    }

    pub fn llvm_reloc_mode(&self) -> RelocMode {
        parse_reloc_model(&self.reloc_model).expect("checked when parsed")
    }
}

/// Refuses a target file (`file`) whose `nop` is not one whole `nop` instruction of its
/// architecture: the writer and the runtime pad with it, so it must do nothing (the schema
/// knows no instructions; `cpjit-isa` does).
fn check_nop(file: &str, t: &TargetFile) -> Result<()> {
    if cpjit_isa::is_nop(t.arch, &t.nop) {
        return Ok(());
    }
    let hex: String = t.nop.iter().map(|b| format!("{b:02x}")).collect();
    let expected = match t.arch {
        Arch::X86_64 => "\"90\" (or a multi-byte nop such as \"0f1f00\")",
        Arch::Aarch64 => "\"1f2003d5\"",
        Arch::Riscv64 => "\"13000000\" (nop) or \"0100\" (c.nop)",
    };
    Err(Error(format!(
        "{file}: key `nop`: `{hex}` is not one whole nop instruction of {} (the padding \
         between instances must do nothing); expected {expected}",
        t.arch.name()
    )))
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
    fn a_nop_that_is_no_whole_nop_instruction_is_refused_naming_file_and_key() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        for t in Target::load_all(&dir).unwrap() {
            let file = dir.join(format!("{}.toml", t.triple));
            let text = String::from_utf8(t.bytes.clone()).unwrap();
            let nop_line = text.lines().find(|l| l.starts_with("nop = ")).unwrap();
            // `int3` on x86-64 (it pads, but traps), half an instruction elsewhere.
            let bad = if t.arch == Arch::X86_64 { "cc" } else { "1f20" };
            let edited = text.replace(nop_line, &format!("nop = \"{bad}\""));
            let err = Target::parse("targets/t.toml", &t.triple, edited.into_bytes()).unwrap_err();
            assert!(
                err.0.starts_with(&format!(
                    "targets/t.toml: key `nop`: `{bad}` is not one whole nop instruction of {}",
                    t.arch.name()
                )) && err.0.contains("expected \""),
                "{}: {err}",
                file.display()
            );
        }
    }
}
