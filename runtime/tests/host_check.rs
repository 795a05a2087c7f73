//! `Jit::new` refuses a stencil set this process cannot run (another architecture, another
//! calling convention, or stencils free to use a register the OS reserves) with an error
//! that names the processes that can, instead of crashing at run time.

use crate::common;
use common::{resolve, SET};
use cpjit_runtime::model::{Abi, Arch, Host, Os, StencilSet};
use cpjit_runtime::{Error, Jit};

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn refusal(set: &'static StencilSet<'static>) -> String {
    match Jit::new(set, resolve) {
        Err(e @ Error::HostCannotRun { .. }) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("`{}` was accepted", set.target),
    }
}

#[test]
fn the_host_set_is_accepted() {
    assert!(Host::current().unwrap().runs_set(SET));
    Jit::new(SET, resolve).unwrap();
}

#[test]
fn another_calling_convention_is_refused_naming_who_can_run_it() {
    let host = Host::current().unwrap();
    let (abi, who) = match (host.arch, host.abi()) {
        (Arch::X86_64, Abi::SysV64) => (Abi::Win64, "Windows"),
        (Arch::X86_64, _) => (Abi::SysV64, "Linux"),
        // No AArch64 process runs Win64 code.
        (Arch::Aarch64, _) => (Abi::Win64, "no process runs"),
        (Arch::Riscv64, _) => (Abi::Win64, "no process runs"),
    };
    let set = leak(StencilSet {
        target: "other-abi",
        abi,
        ..*SET
    });
    let text = refusal(set);
    assert!(
        text.contains("`other-abi`") && text.contains(&host.to_string()) && text.contains(who),
        "{text}"
    );
}

#[test]
fn another_architecture_is_refused() {
    let other = match SET.arch {
        Arch::X86_64 => Arch::Aarch64,
        Arch::Aarch64 | Arch::Riscv64 => Arch::X86_64,
    };
    let set = leak(StencilSet {
        target: "elsewhere",
        arch: other,
        ..*SET
    });
    assert!(refusal(set).contains("`elsewhere`"));
}

/// Apple and Windows AArch64 processes use x18 themselves: a set that may use it (as Linux
/// stencils may) is refused there, and accepted everywhere else.
#[test]
fn stencils_free_to_use_a_reserved_register_are_refused_where_the_os_reserves_it() {
    let set = leak(StencilSet {
        target: "uses-x18",
        reserved_registers: &[],
        ..*SET
    });
    let host = Host::current().unwrap();
    if host.reserved_registers().is_empty() {
        Jit::new(set, resolve).unwrap();
    } else {
        let text = refusal(set);
        // AArch64: a Linux process could run it. RISC-V: every OS keeps gp and tp.
        let who = match host.arch {
            Arch::Riscv64 => "no process runs",
            _ => Os::Linux.name(),
        };
        assert!(text.contains(who), "{text}");
    }
}
