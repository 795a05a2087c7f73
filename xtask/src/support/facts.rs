//! What the support report and the hand-written target lists say about one target, derived
//! from its target file: display names, how the matrix executes its stencils (one phrase,
//! shared by the report and the README's table check) and its known limits.
//!
//! Limits come from two places: rules over the target file's facts (its `[test]` table,
//! calling convention, reserved registers), and [`KNOWN_LIMITS`], the one hand-maintained
//! table of what the toolchain or LLVM cannot do for a kind of target. The table is keyed by
//! facts (format, architecture, OS), never by triple, and not kept in the target files: the
//! toolchain digests those files' bytes, so a prose change there would make every generated
//! crate of the target stale.

use cpjit_model::{Abi, Arch, Host, ObjectFormat, Os};
use cpjit_targets_schema::{Execution, OpCallingConvention, TargetFile};

/// `ELF`, `Mach-O`, `COFF`: the names the docs use.
pub fn format_name(format: ObjectFormat) -> &'static str {
    match format {
        ObjectFormat::Elf => "ELF",
        ObjectFormat::MachO => "Mach-O",
        ObjectFormat::Coff => "COFF",
    }
}

pub fn arch_name(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "x86-64",
        Arch::Aarch64 => "AArch64",
        Arch::Riscv64 => "RISC-V 64",
    }
}

/// The helper calling convention's name, as the docs write it.
pub fn abi_name(abi: Abi) -> &'static str {
    match abi {
        Abi::SysV64 => "System V",
        Abi::Win64 => "Win64",
        Abi::Aapcs64 => "AAPCS64",
        Abi::Lp64d => "LP64D",
    }
}

pub fn op_convention_name(cc: OpCallingConvention) -> &'static str {
    match cc {
        OpCallingConvention::PreserveNone => "preserve_none",
        OpCallingConvention::C => "C (musttail)",
    }
}

/// The target file's value of `op_calling_convention` (the JSON report's).
pub fn op_convention_key(cc: OpCallingConvention) -> &'static str {
    match cc {
        OpCallingConvention::PreserveNone => "preserve_none",
        OpCallingConvention::C => "c",
    }
}

/// The process kind of a Rust or stencil target, e.g. `Linux AArch64`.
fn process(triple: &str) -> Option<(Os, Arch)> {
    Host::of_triple(triple).map(|h| (h.os, h.arch))
}

/// How the matrix executes `t`'s stencils, as one phrase the README's table must start
/// with: `natively`, ``under `qemu-aarch64` ``, ``in a real Windows process: `<rust
/// target>` under wine``, or `in a Linux AArch64 process under qemu` (host-abi: "under
/// qemu" when the Rust target's own row runs under qemu). `None` without a `[test]` table.
pub fn how_executed(t: &TargetFile, all: &[TargetFile]) -> Option<String> {
    let test = t.test.as_ref()?;
    Some(match test.execution {
        Execution::Native => "natively".to_string(),
        Execution::Qemu => format!("under `qemu-{}`", t.arch.name()),
        Execution::Wine => format!(
            "in a real Windows process: `{}` under wine",
            test.rust_target
        ),
        Execution::HostAbi => {
            let (os, arch) = process(&test.rust_target)?;
            let emulated = all.iter().any(|o| {
                o.triple == test.rust_target
                    && o.test.as_ref().map(|x| x.execution) == Some(Execution::Qemu)
            });
            let under = if emulated { " under qemu" } else { "" };
            format!("in a {} {} process{under}", os.name(), arch_name(arch))
        }
    })
}

/// A limit of a kind of target that no target-file key states; see the module doc.
pub struct KnownLimit {
    pub format: Option<ObjectFormat>,
    pub arch: Option<Arch>,
    /// The OS of the stencils' own triple.
    pub os: Option<Os>,
    pub limit: &'static str,
    /// Where the fact lives, so the line is updated with it.
    pub source: &'static str,
}

/// The hand-maintained limits, by format, architecture and OS (`None`: any).
pub const KNOWN_LIMITS: &[KnownLimit] = &[
    KnownLimit {
        format: Some(ObjectFormat::MachO),
        arch: None,
        os: None,
        limit: "frame layouts unknown (Mach-O unwind information is not read): with \
                `JitOptions::unwind`, finishing a trace of this set is an error",
        source: "toolchain/src/frame.rs, runtime/src/debug/unwind.rs",
    },
    KnownLimit {
        format: Some(ObjectFormat::Coff),
        arch: Some(Arch::Aarch64),
        os: None,
        limit: "frame layouts unknown (ARM64 COFF `.xdata` unwind codes are not decoded): \
                with `JitOptions::unwind`, finishing a trace of this set is an error",
        source: "toolchain/src/frame.rs, runtime/src/debug/unwind.rs",
    },
    KnownLimit {
        format: None,
        arch: Some(Arch::Riscv64),
        os: None,
        limit: "unwinding is exact at calls only: LLVM 19 describes prologues, not epilogues",
        source: "runtime/src/debug/unwind.rs",
    },
];

/// Every known limit of `t`: the rules over its target file's facts, then [`KNOWN_LIMITS`].
pub fn limits(t: &TargetFile) -> Vec<String> {
    let mut out = Vec::new();
    let own = process(&t.triple).map(|(os, _)| os);
    if let Some(test) = &t.test {
        let checked = match &test.check_target {
            Some(c) => format!("only compile-checked (`cargo check --target {c}`)"),
            None => "not compiled for it".to_string(),
        };
        match test.execution {
            Execution::HostAbi => {
                let os = match own {
                    Some(Os::Apple) => "an Apple OS",
                    Some(o) => o.name(),
                    None => "its own OS",
                };
                let runner = process(&test.rust_target)
                    .map(|(o, a)| format!("{} {}", o.name(), arch_name(a)))
                    .unwrap_or_default();
                out.push(format!(
                    "stencils run in an ABI-compatible {runner} process (`{}`), not on {os}; \
                     the runtime's OS-specific code for the target (executable memory, unwind \
                     registration) is {checked}",
                    test.rust_target
                ));
            }
            Execution::Wine => out.push(format!(
                "stencils run under wine (`{}`), not on Windows itself; the runtime for the \
                 stencils' own Rust target is {checked}",
                test.rust_target
            )),
            Execution::Qemu => out.push(format!(
                "stencils run under qemu-user, which models neither icache maintenance nor weak \
                 memory ordering; only `cargo xtask test-matrix --native` on {} hardware covers \
                 them",
                arch_name(t.arch)
            )),
            Execution::Native => {}
        }
        if let Some(suites) = &test.suites {
            out.push(format!(
                "the matrix runs only the {} suites of `ci/matrix.toml` in this row \
                 (`[test] suites`; the target file says why)",
                suites.join(", ")
            ));
        }
    } else {
        out.push("no `[test]` table: the matrix does not execute these stencils".to_string());
    }
    if t.op_calling_convention == OpCallingConvention::C {
        out.push(format!(
            "clang-19 has no `preserve_none` for {}: ops use the C calling convention with \
             `musttail` (`op_calling_convention = \"c\"`)",
            t.arch.name()
        ));
    }
    if !t.reserved_registers.is_empty() {
        let regs: Vec<String> = t
            .reserved_registers
            .iter()
            .map(|r| format!("`{r}`"))
            .collect();
        out.push(format!(
            "{} reserved for the OS: the toolchain rejects a stencil that touches {}",
            regs.join(", "),
            if regs.len() == 1 { "it" } else { "one" }
        ));
    }
    for k in KNOWN_LIMITS {
        let applies = k.format.is_none_or(|f| f == t.format)
            && k.arch.is_none_or(|a| a == t.arch)
            && k.os.is_none_or(|o| Some(o) == own);
        if applies {
            out.push(format!("{} (see {})", k.limit, k.source));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn target(name: &str, body: &str) -> TargetFile {
        TargetFile::parse(
            &format!("targets/{name}.toml"),
            name,
            format!("triple = \"{name}\"\n{body}").into_bytes(),
        )
        .unwrap()
    }

    const ARM: &str = "arch = \"aarch64\"\nabi = \"aapcs64\"\ncode_model = \"small\"\n\
                       reloc_model = \"pic\"\nnop = \"1f2003d5\"\ncode_align = 4\n";

    #[test]
    fn host_abi_rows_name_their_process_and_whether_it_is_emulated() {
        let linux = target(
            "aarch64-x-linux-gnu",
            &format!("{ARM}format = \"elf\"\n[test]\nexecution = \"qemu\"\nrust_target = \"aarch64-x-linux-gnu\"\n"),
        );
        let apple = target(
            "aarch64-x-apple",
            &format!("{ARM}format = \"macho\"\nreserved_registers = [\"x18\"]\n[test]\nexecution = \"host-abi\"\nrust_target = \"aarch64-x-linux-gnu\"\ncheck_target = \"aarch64-x-apple\"\n"),
        );
        let all = [linux.clone(), apple.clone()];
        assert_eq!(how_executed(&linux, &all).unwrap(), "under `qemu-aarch64`");
        assert_eq!(
            how_executed(&apple, &all).unwrap(),
            "in a Linux AArch64 process under qemu"
        );
        assert_eq!(
            how_executed(&apple, std::slice::from_ref(&apple)).unwrap(),
            "in a Linux AArch64 process"
        );
        let l = limits(&apple).join("\n");
        assert!(
            l.contains(
                "ABI-compatible Linux AArch64 process (`aarch64-x-linux-gnu`), not on an Apple OS"
            ),
            "{l}"
        );
        assert!(l.contains("cargo check --target aarch64-x-apple"), "{l}");
        assert!(l.contains("frame layouts unknown (Mach-O"), "{l}");
        assert!(l.contains("`x18` reserved for the OS"), "{l}");
        let l = limits(&linux).join("\n");
        assert!(
            l.contains("qemu-user") && !l.contains("frame layouts"),
            "{l}"
        );
    }
}
