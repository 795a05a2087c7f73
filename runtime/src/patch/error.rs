//! The patch error: which hole, which value, and what was wrong with it.

use cpjit_model::HoleKind;
use std::fmt;

/// A hole that could not be patched. Nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchError {
    pub kind: HoleKind,
    /// Offset of the hole in the code (or data) slice that was patched.
    pub offset: usize,
    /// Run-time address of the hole.
    pub place: u64,
    /// The value that was to be encoded (`S + A`, or `G + A` for GOT kinds).
    pub value: u64,
    pub problem: Problem,
}

/// What was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The encoded distance does not fit the field. `actual` is in bytes: `value - place`,
    /// or `Page(value) - Page(place)` for `adrp`; `min..=max` is what the field can hold.
    OutOfRange { min: i64, max: i64, actual: i64 },
    /// The absolute value (an immediate, or a narrow operand checked against the range its
    /// template declared) is outside `min..=max`, read as a signed 64-bit number.
    ValueOutOfRange { min: i64, max: i64 },
    /// The encoded quantity is not a multiple of `align` bytes: the branch distance for
    /// branches, the address for scaled loads/stores.
    Misaligned { align: u64 },
    /// The AArch64 instruction word at the hole is not the class the kind patches.
    UnexpectedInstruction { found: u32, expected: &'static str },
    /// The x86-64 opcode/ModRM bytes before the hole are not what the kind patches.
    UnexpectedBytes {
        found: PrecedingBytes,
        expected: &'static str,
    },
    /// The instruction overlaps the one at `other` that it was paired with.
    Overlap { other: usize },
    /// The patch needs `start..end`, but the slice is only `len` bytes long.
    OutOfBounds {
        start: usize,
        end: usize,
        len: usize,
    },
}

/// Up to three bytes just before an x86-64 hole (fewer at the start of the slice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrecedingBytes {
    bytes: [u8; 3],
    len: u8,
}

impl PrecedingBytes {
    /// The (up to) three bytes before `code[offset]`, clamped to the slice.
    pub fn before(code: &[u8], offset: usize) -> PrecedingBytes {
        let end = offset.min(code.len());
        let start = end.saturating_sub(3);
        let mut bytes = [0; 3];
        bytes[..end - start].copy_from_slice(&code[start..end]);
        PrecedingBytes {
            bytes,
            len: (end - start) as u8,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl fmt::Display for PrecedingBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len == 0 {
            return f.write_str("(none: the hole is at the start)");
        }
        for (i, b) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PatchError {}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            kind,
            offset,
            place,
            value,
            problem,
        } = *self;
        write!(f, "{kind} hole at offset {offset:#x}: ")?;
        match problem {
            Problem::OutOfRange { min, max, actual } => {
                let pages = matches!(
                    kind,
                    HoleKind::Aarch64AdrPage21 | HoleKind::Aarch64AdrGotPage21
                );
                let of = if pages { "the page of " } else { "" };
                write!(
                    f,
                    "{of}value {value:#x} is {} bytes from {of}{place:#x} (range {})",
                    SignedHex(actual),
                    Span(min, max)
                )
            }
            Problem::ValueOutOfRange { min, max } => match kind.operand_check() {
                Some(range) => write!(
                    f,
                    "operand value {} does not fit the range the template declared for it \
                     ({}: {}..={})",
                    value as i64, range.name(), min, max
                ),
                None => write!(
                    f,
                    "value {} ({value:#x}) does not fit the immediate ({}..={}, place {place:#x})",
                    value as i64, min, max
                ),
            },
            Problem::Misaligned { align } if kind.is_branch() => write!(
                f,
                "branch from {place:#x} to {value:#x} spans {} bytes, not a multiple of {align}",
                SignedHex(value.wrapping_sub(place) as i64)
            ),
            Problem::Misaligned { align } => write!(
                f,
                "value {value:#x} is not a multiple of {align}, the access size (place {place:#x})"
            ),
            Problem::UnexpectedInstruction { found, expected } => write!(
                f,
                "instruction {found:#010x} is not {expected} (place {place:#x}, value {value:#x})"
            ),
            Problem::UnexpectedBytes { found, expected } => write!(
                f,
                "bytes before the hole [{found}] are not {expected} (place {place:#x}, value {value:#x})"
            ),
            Problem::Overlap { other } => write!(
                f,
                "overlaps the instruction at offset {other:#x} it was paired with"
            ),
            Problem::OutOfBounds { start, end, len } => write!(
                f,
                "needs bytes {start:#x}..{end:#x} but the code is {len:#x} bytes long \
                 (place {place:#x}, value {value:#x})"
            ),
        }
    }
}

/// `-0x10` rather than two's complement.
struct SignedHex(i64);

impl fmt::Display for SignedHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            write!(f, "-{:#x}", self.0.unsigned_abs())
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// A field's range, as `±128 MiB` (all ranges here are two's-complement fields).
struct Span(i64, i64);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = self.0.unsigned_abs();
        let (unit, name) = match size {
            s if s >= 1 << 30 && s % (1 << 30) == 0 => (1 << 30, "GiB"),
            s if s >= 1 << 20 && s % (1 << 20) == 0 => (1 << 20, "MiB"),
            s if s >= 1 << 10 && s % (1 << 10) == 0 => (1 << 10, "KiB"),
            _ => (1, "bytes"),
        };
        write!(
            f,
            "±{} {name}: {}..={}",
            size / unit,
            SignedHex(self.0),
            SignedHex(self.1)
        )
    }
}
