//! The format-neutral view of an object file that every reader produces and
//! [`super::assemble`] turns into stencils.
//!
//! Readers do all format-specific work here: section classification, symbol prefixes,
//! relocation tables, implicit addends, `__imp_` forms and instruction classification. What
//! is left is the same for all formats: which bytes belong to which stencil, and what each
//! relocation's target means for it.

use cpjit_model::HoleKind;

use super::error::ObjectError;

/// Where a section's bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SectionKind {
    /// Executable code.
    Code,
    /// Read-only data (`.rodata*`, `__const`, `__cstring`, `.rdata`).
    ReadOnly,
    /// Writable initialized data (`.data*`, `__data`).
    Writable,
    /// Zero-initialized data (`.bss`, `__bss`, `__common`, COFF uninitialized data).
    ZeroFill,
}

/// An allocated section the readers keep (ignored ones are not listed).
#[derive(Clone, Debug)]
pub struct ParsedSection {
    /// Name for messages (`.text.op_x`, `__TEXT,__text`, `.text#3` for COFF COMDATs).
    pub name: String,
    pub kind: SectionKind,
    /// Alignment in bytes (a power of two, at least 1).
    pub align: u32,
    /// Contents; empty for [`SectionKind::ZeroFill`], whose zeros are only laid out (under
    /// the data limit) for the stencils that reference it, never for the whole object.
    pub bytes: Vec<u8>,
    /// Size in bytes (`bytes.len()` except for zero-fill).
    pub size: u64,
    /// Relocations in this section, sorted by offset.
    pub relocs: Vec<ParsedReloc>,
}

/// A symbol, with the format's C prefix (Mach-O `_`) already removed.
#[derive(Clone, Debug)]
pub struct ParsedSymbol {
    pub name: String,
    pub definition: Option<Definition>,
}

/// Where a defined symbol lives.
#[derive(Clone, Copy, Debug)]
pub struct Definition {
    /// Index into [`ParsedObject::sections`].
    pub section: usize,
    pub offset: u64,
    /// The function's exact size when the format records it (ELF `st_size`, a COMDAT
    /// section's length); `None` means "up to the next range start in the section".
    pub size: Option<u64>,
    /// The symbol may start a function range (functions, not local labels or data).
    pub starts_range: bool,
}

/// What a relocation refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocTarget {
    /// A symbol, by index into [`ParsedObject::symbols`].
    Symbol(usize),
    /// The start of a kept section (ELF section symbols, Mach-O `r_extern = 0`).
    Section(usize),
    /// An absolute or otherwise unplaceable symbol (named, for the error message).
    Absolute(usize),
}

/// One relocation, already mapped to a hole kind with its complete addend.
#[derive(Clone, Debug)]
pub struct ParsedReloc {
    pub offset: u64,
    /// The raw type's name (`R_X86_64_PLT32`), for messages.
    pub type_name: String,
    /// The hole kind, or why this relocation cannot be one (reported only if a stencil
    /// uses it, with the stencil's name added).
    pub kind: Result<HoleKind, ObjectError>,
    pub target: RelocTarget,
    /// The addend in the model's terms (see [`cpjit_model::HoleKind`] formulas): explicit,
    /// or decoded from the instruction with the format's bias applied.
    pub addend: i64,
}

/// A whole object file in format-neutral form.
#[derive(Clone, Debug, Default)]
pub struct ParsedObject {
    pub sections: Vec<ParsedSection>,
    pub symbols: Vec<ParsedSymbol>,
    /// Local functions (by symbol index) that share their section with other functions in
    /// a format whose assembler resolves calls to them without a relocation (ELF). A stencil
    /// in the same section might call one invisibly, so it is rejected.
    pub unrelocated_locals: Vec<usize>,
}

impl ParsedObject {
    /// The [start, end) of the function defined by symbol `index` within its section.
    /// The third value says whether the end is exact (a recorded size) rather than the
    /// next symbol, in which case alignment padding may follow the last instruction.
    pub fn function_range(&self, index: usize) -> Option<(usize, u64, u64, bool)> {
        let def = self.symbols.get(index)?.definition?;
        let section_len = self.sections.get(def.section)?.size;
        let end = match def.size {
            Some(size) if size > 0 => def.offset.checked_add(size)?,
            _ => self
                .symbols
                .iter()
                .filter_map(|s| s.definition)
                .filter(|d| d.section == def.section && d.starts_range && d.offset > def.offset)
                .map(|d| d.offset)
                .min()
                .unwrap_or(section_len),
        };
        let exact = matches!(def.size, Some(size) if size > 0);
        (def.offset <= end && end <= section_len).then_some((def.section, def.offset, end, exact))
    }
}
