//! Which processes can run which stencils: the one host-compatibility rule, used by the
//! runtime (`Jit::new` refuses a set its process cannot run), the generated facade (which
//! sets a process may pick), the conformance suite and the test matrix (which process
//! executes each target's stencils).
//!
//! Stencil machine code is OS-agnostic once the calling conventions match: a process can
//! run a set of its own architecture and ABI that leaves alone every register the
//! process's OS reserves (`x18` on Apple and Windows AArch64).

use crate::{Abi, Arch, StencilSet};
use core::fmt;

/// The operating-system family of a process, as far as running stencils is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Os {
    Linux,
    Apple,
    Windows,
    /// Another Unix-like system (e.g. a BSD): System V on x86-64, no reserved registers.
    OtherUnix,
}

impl Os {
    pub const ALL: [Os; 4] = [Os::Linux, Os::Apple, Os::Windows, Os::OtherUnix];

    pub const fn name(self) -> &'static str {
        match self {
            Os::Linux => "Linux",
            Os::Apple => "Apple",
            Os::Windows => "Windows",
            Os::OtherUnix => "other Unix",
        }
    }
}

/// A process that might run stencils: its architecture and OS family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Host {
    pub arch: Arch,
    pub os: Os,
}

impl Host {
    /// This process, or `None` on an architecture no stencils are built for.
    pub const fn current() -> Option<Host> {
        let arch = if cfg!(target_arch = "x86_64") {
            Arch::X86_64
        } else if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else if cfg!(target_arch = "riscv64") {
            Arch::Riscv64
        } else {
            return None;
        };
        let os = if cfg!(windows) {
            Os::Windows
        } else if cfg!(target_vendor = "apple") {
            Os::Apple
        } else if cfg!(target_os = "linux") {
            Os::Linux
        } else {
            Os::OtherUnix
        };
        Some(Host { arch, os })
    }

    /// A process of the Rust or stencil target `triple` (`<arch>-<vendor>-<os>[-<env>]`),
    /// or `None` when its architecture is not one stencils are built for.
    pub fn of_triple(triple: &str) -> Option<Host> {
        let (arch_name, rest) = triple.split_once('-')?;
        let arch = Arch::from_triple_component(arch_name)?;
        let has = |part: &str| rest.split('-').any(|p| p == part);
        let os = if has("windows") {
            Os::Windows
        } else if has("apple") {
            Os::Apple
        } else if has("linux") {
            Os::Linux
        } else {
            Os::OtherUnix
        };
        Some(Host { arch, os })
    }

    /// The calling convention of C functions in this process.
    pub const fn abi(self) -> Abi {
        match (self.arch, self.os) {
            (Arch::X86_64, Os::Windows) => Abi::Win64,
            (Arch::X86_64, _) => Abi::SysV64,
            (Arch::Aarch64, _) => Abi::Aapcs64,
            (Arch::Riscv64, _) => Abi::Lp64d,
        }
    }

    /// Registers this process's OS uses itself, which stencils must leave alone.
    pub const fn reserved_registers(self) -> &'static [&'static str] {
        match (self.arch, self.os) {
            (Arch::Aarch64, Os::Apple | Os::Windows) => &["x18"],
            // The global and thread pointers belong to the process on every RISC-V OS.
            (Arch::Riscv64, _) => &["gp", "tp"],
            _ => &[],
        }
    }

    /// Can this process run stencils of `arch` and `abi` that never touch
    /// `reserved_registers`? The one host-compatibility rule.
    pub fn runs(self, arch: Arch, abi: Abi, reserved_registers: &[&str]) -> bool {
        arch == self.arch
            && abi == self.abi()
            && self
                .reserved_registers()
                .iter()
                .all(|r| reserved_registers.contains(r))
    }

    /// [`Host::runs`] for a stencil set.
    pub fn runs_set(self, set: &StencilSet<'_>) -> bool {
        self.runs(set.arch, set.abi, set.reserved_registers)
    }

    /// Names the kinds of process that can run such stencils, for error messages, e.g.
    /// `needs an x86_64 Windows process`.
    pub fn who_runs<'a>(arch: Arch, abi: Abi, reserved_registers: &'a [&'a str]) -> WhoRuns<'a> {
        WhoRuns {
            arch,
            abi,
            reserved_registers,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.arch.name(), self.os.name())
    }
}

/// The list of process kinds able to run some stencils; see [`Host::who_runs`].
#[derive(Clone, Copy, Debug)]
pub struct WhoRuns<'a> {
    arch: Arch,
    abi: Abi,
    reserved_registers: &'a [&'a str],
}

impl fmt::Display for WhoRuns<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hosts = Os::ALL
            .into_iter()
            .map(|os| Host {
                arch: self.arch,
                os,
            })
            .filter(|h| h.runs(self.arch, self.abi, self.reserved_registers))
            .peekable();
        if hosts.peek().is_none() {
            return write!(
                f,
                "no process runs {} code with the {} ABI",
                self.arch.name(),
                self.abi.name()
            );
        }
        write!(f, "needs an {} process of:", self.arch.name())?;
        for (i, h) in hosts.enumerate() {
            write!(f, "{} {}", if i == 0 { "" } else { "," }, h.os.name())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    fn host(arch: Arch, os: Os) -> Host {
        Host { arch, os }
    }

    #[test]
    fn triples_name_their_process() {
        let h = |t| Host::of_triple(t).unwrap();
        assert_eq!(h("x86_64-alpine-linux-musl"), host(Arch::X86_64, Os::Linux));
        assert_eq!(h("x86_64-pc-windows-gnu"), host(Arch::X86_64, Os::Windows));
        assert_eq!(h("aarch64-apple-ios"), host(Arch::Aarch64, Os::Apple));
        assert_eq!(
            h("riscv64gc-unknown-linux-musl"),
            host(Arch::Riscv64, Os::Linux)
        );
        assert_eq!(
            h("x86_64-unknown-freebsd"),
            host(Arch::X86_64, Os::OtherUnix)
        );
        assert_eq!(Host::of_triple("mips64-unknown-linux-gnuabi64"), None);
        assert_eq!(
            Host::of_triple("riscv64-unknown-linux-musl"),
            Some(host(Arch::Riscv64, Os::Linux))
        );
        assert_eq!(
            Host::of_triple("riscv64gc-unknown-linux-musl"),
            Some(host(Arch::Riscv64, Os::Linux))
        );
        assert_eq!(Host::of_triple("x86_64"), None);
    }

    #[test]
    fn abi_and_reserved_registers_decide() {
        let linux_arm = host(Arch::Aarch64, Os::Linux);
        let apple_arm = host(Arch::Aarch64, Os::Apple);
        // Linux stencils may use x18: not on Apple; Apple stencils run anywhere on AArch64.
        assert!(linux_arm.runs(Arch::Aarch64, Abi::Aapcs64, &[]));
        assert!(!apple_arm.runs(Arch::Aarch64, Abi::Aapcs64, &[]));
        assert!(apple_arm.runs(Arch::Aarch64, Abi::Aapcs64, &["x18"]));
        assert!(linux_arm.runs(Arch::Aarch64, Abi::Aapcs64, &["x18"]));
        let linux_x86 = host(Arch::X86_64, Os::Linux);
        assert!(linux_x86.runs(Arch::X86_64, Abi::SysV64, &[]));
        assert!(!linux_x86.runs(Arch::X86_64, Abi::Win64, &[]));
        assert!(!linux_x86.runs(Arch::Aarch64, Abi::Aapcs64, &["x18"]));
        assert!(host(Arch::X86_64, Os::Windows).runs(Arch::X86_64, Abi::Win64, &[]));
    }

    #[test]
    fn errors_name_the_processes_that_can() {
        let w = Host::who_runs(Arch::X86_64, Abi::Win64, &[]).to_string();
        assert_eq!(w, "needs an x86_64 process of: Windows");
        let a = Host::who_runs(Arch::Aarch64, Abi::Aapcs64, &[]).to_string();
        assert_eq!(a, "needs an aarch64 process of: Linux, other Unix");
        let none = Host::who_runs(Arch::Aarch64, Abi::Win64, &[]).to_string();
        assert!(none.starts_with("no process runs"), "{none}");
    }
}
