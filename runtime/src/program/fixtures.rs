//! Stencils and sets written by hand, for the runtime's tests.

use cpjit_model::{Hole, HoleKind, HoleValue, Section, Stencil, StencilSet};

/// A hole in a stencil's code, for tests that write stencils by hand.
pub(crate) const fn code_hole(offset: u32, kind: HoleKind, value: HoleValue, addend: i64) -> Hole {
    Hole {
        section: Section::Code,
        offset,
        kind,
        value,
        addend,
    }
}

/// An x86-64 `ret` that ends a trace, for tests that write stencils by hand.
#[cfg(target_arch = "x86_64")]
pub(crate) const X86_RET: Stencil<'static> = Stencil {
    name: "ret",
    code: &[0xc3],
    falls_through: false,
    ..Stencil::EMPTY
};

/// A set of `stencils` for tests that write stencils by hand, which this process can run
/// (the host's ABI and reserved registers: `Jit::new`'s host check passes), as ELF.
pub(crate) const fn host_set(
    arch: cpjit_model::Arch,
    nop: &'static [u8],
    stencils: &'static [Stencil<'static>],
    symbols: &'static [&'static str],
) -> StencilSet<'static> {
    use cpjit_model::{Abi, Host};
    StencilSet {
        target: "host",
        arch,
        format: cpjit_model::ObjectFormat::Elf,
        abi: match Host::current() {
            Some(h) => h.abi(),
            None => Abi::SysV64,
        },
        // Hand-written stencils touch no register any OS reserves.
        reserved_registers: match Host::current() {
            Some(h) => h.reserved_registers(),
            None => &[],
        },
        nop,
        shim: None,
        stencils,
        symbols,
        zero_fill: &[],
        digest: "",
        format_version: cpjit_model::format::VERSION,
        pruned: &[],
    }
}
