//! Object-file readers: ELF, COFF and Mach-O relocatable objects (as produced by LLVM for
//! the six targets) → normalized [`StencilBuf`]s.
//!
//! Each format has one module ([`elf`], [`coff`], [`macho`]) with one relocation table that
//! maps every raw relocation type to a [`cpjit_model::HoleKind`]; it produces a
//! format-neutral [`parsed::ParsedObject`], which [`assemble`] turns into stencils (code
//! ranges, helpers, data closure, hole values, field zeroing, continuation elision).
//!
//! Invariant: bad bytes never panic. Every offset, index and size read from the file is
//! checked before use; failures are [`ObjectError`]s naming the target, template and as
//! much of the place as is known.

// An object error is produced once per failed read and carries its whole context by value;
// boxing it would only complicate every `?`.
#![allow(clippy::result_large_err)]

mod assemble;
pub mod coff;
pub mod elf;
mod error;
pub mod macho;
pub mod parsed;

use cpjit_model::{Arch, ObjectFormat};

pub use error::{ObjectError, ObjectErrorKind};

use crate::stencil::StencilBuf;

/// What the readers need to know besides the bytes.
pub struct ReadOptions<'a> {
    /// Target triple, for messages.
    pub target: &'a str,
    pub arch: Arch,
    pub format: ObjectFormat,
    /// Template source file name, for messages.
    pub template: &'a str,
    /// Prefix of hole symbols (`_JIT_`), without any object-format C prefix.
    pub hole_prefix: &'a str,
    /// `<hole_prefix><NAME><target_suffix>` is jump target `<NAME><target_suffix>`.
    pub target_suffix: &'a str,
    /// Which defined functions are stencils (name without the format's C prefix).
    pub select: &'a dyn Fn(&str) -> bool,
    /// The manifest's per-stencil limits (data size).
    pub limits: &'a crate::manifest::Limits,
    /// Move the code after an AArch64 function's last continuation jump into the stencil's
    /// cold part (`layout::moves_cold_tail`; `assemble/tail.rs`).
    pub move_cold_tail: bool,
}

/// Reads one object file and returns its selected stencils, sorted by name.
pub fn read_stencils(bytes: &[u8], opts: &ReadOptions) -> Result<Vec<StencilBuf>, ObjectError> {
    let parsed = match opts.format {
        ObjectFormat::Elf => elf::parse(bytes, opts.arch),
        ObjectFormat::Coff => coff::parse(bytes, opts.arch),
        ObjectFormat::MachO => macho::parse(bytes, opts.arch),
    };
    parsed
        .and_then(|obj| assemble::assemble(&obj, opts))
        .map_err(|e| e.origin(opts.target, opts.template))
}
