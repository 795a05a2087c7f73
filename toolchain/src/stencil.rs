//! [`StencilBuf`]: an owned stencil as the object readers produce it, with its stable text
//! form (golden tests, `stencils show`) and JSON form (`--json`).
//!
//! Holes index the stencil's *own* sorted `operands`, `targets` and `symbols`; the pipeline
//! remaps [`HoleValue::Symbol`] to set-wide indices when it builds a
//! [`cpjit_model::StencilSet`].

use std::fmt::Write as _;

use cpjit_model::{Hole, HoleValue, Section};
use serde::ser::{Serialize, SerializeStruct, Serializer};

/// One stencil: code, data and holes, everything sorted and deterministic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StencilBuf {
    /// Template function name without any object-format prefix.
    pub name: String,
    pub code: Vec<u8>,
    /// Required code alignment in bytes (a power of two).
    pub code_align: u32,
    /// The initialized data: read-only data, then writable data.
    pub init_data: Vec<u8>,
    /// Bytes of data per instance: `init_data`, then the zero-fill sections (with the
    /// padding that aligns them), which are described in `zero_fill`, never stored as zeros.
    pub data_len: u64,
    /// Required data alignment in bytes (a power of two).
    pub data_align: u32,
    /// The zero-fill sections of the stencil's data, by offset.
    pub zero_fill: Vec<ZeroFillBuf>,
    /// Sorted by (section, offset).
    pub holes: Vec<Hole>,
    /// Operand names (hole symbol without prefix; `NAME` for the halves `NAME_HI`/`NAME_LO`),
    /// sorted; `HoleValue::Operand(i)`, `OperandHigh(i)` and `OperandLow(i)` index this.
    pub operands: Vec<String>,
    /// Jump-target names (with the target suffix, e.g. `JUMP_TARGET`), sorted.
    pub targets: Vec<String>,
    /// External symbols, sorted; `HoleValue::Symbol(i)` indexes this (stencil-local).
    pub symbols: Vec<String>,
    /// The trailing jump to the continuation was removed: execution falls through to the
    /// next instance, which must start at `code.len()`.
    pub elided_continue: bool,
    /// The last `cold_len` bytes of `code` are the cold part (split-off cold blocks and
    /// static helpers), laid out by the runtime after the trace's hot code; references to
    /// it are [`HoleValue::Cold`] holes with the offset into it in the addend.
    pub cold_len: u32,
    /// Where each function of the object that makes up the code was copied (the template
    /// function first, then the static helpers it calls), for [`crate::frame`].
    pub pieces: Vec<CodePiece>,
    /// The frame layout (`None` until [`crate::frame::derive`] has run).
    pub frame: Option<crate::frame::DerivedFrame>,
}

/// Bytes `start..end` of the object section `section` (by name), copied to code offset `at`
/// (lengthened by `growth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodePiece {
    pub section: String,
    pub start: u64,
    pub end: u64,
    pub at: u64,
    /// The start of the function the piece belongs to: `start`, or before it for a cold
    /// tail moved off its function (`object/assemble/tail.rs`).
    pub function: u64,
    /// The function's instructions that the reader lengthened (x86-64 cold tails): old
    /// section offset and bytes added, in order; the piece's copy is the lengthened code.
    pub growth: Vec<(u64, u64)>,
}

/// Bytes the instructions before old section offset `offset` grew by, for a
/// [`CodePiece::growth`] list.
pub fn grown_before(growth: &[(u64, u64)], offset: u64) -> u64 {
    growth
        .iter()
        .take_while(|&&(at, _)| at < offset)
        .map(|&(_, by)| by)
        .sum()
}

/// A zero-fill section held by a stencil's data: the object's section (by name) and where
/// it lies in the data. The set describes each section once ([`cpjit_model::ZeroFill`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ZeroFillBuf {
    /// The object section's name (`.bss`, `.bss.counter`, `__DATA,__bss`, ...).
    pub section: String,
    pub size: u64,
    pub align: u32,
    /// Offset in the stencil's data.
    pub offset: u64,
}

impl StencilBuf {
    /// A hole's value as text: `continue`, `code`, `data`, `operand:NAME`,
    /// `operand-hi:NAME`, `operand-lo:NAME` (a half of operand `NAME`), `target:NAME`,
    /// `symbol:NAME` (names resolved through this stencil's lists).
    pub fn value_text(&self, value: HoleValue) -> String {
        let name = |list: &[String], i: u16| {
            list.get(i as usize)
                .cloned()
                .unwrap_or_else(|| format!("<bad index {i}>"))
        };
        match value {
            HoleValue::Continue => "continue".to_string(),
            HoleValue::Code => "code".to_string(),
            HoleValue::Cold => "cold".to_string(),
            HoleValue::Data => "data".to_string(),
            HoleValue::Operand(i) => format!("operand:{}", name(&self.operands, i)),
            HoleValue::OperandHigh(i) => format!("operand-hi:{}", name(&self.operands, i)),
            HoleValue::OperandLow(i) => format!("operand-lo:{}", name(&self.operands, i)),
            HoleValue::Target(i) => format!("target:{}", name(&self.targets, i)),
            HoleValue::Symbol(i) => format!("symbol:{}", name(&self.symbols, i)),
        }
    }

    /// One hole as text, e.g. `code+0x1c Aarch64Branch26 continue +0`.
    pub fn hole_text(&self, hole: &Hole) -> String {
        format!(
            "{}+{:#x} {} {} {:+}",
            hole.section.name(),
            hole.offset,
            hole.kind,
            self.value_text(hole.value),
            hole.addend
        )
    }

    /// The stable text form compared by the golden tests. Changing it changes every
    /// expectation file, so only extend it deliberately.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "stencil {}", self.name);
        let elided = if self.elided_continue {
            ", trailing jump to continuation elided"
        } else {
            ""
        };
        // The cold part only where there is one, so that other stencils' text is unchanged.
        let cold = if self.cold_len > 0 {
            format!(", the last {} cold", self.cold_len)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "code: {} bytes, align {}{elided}{cold}",
            self.code.len(),
            self.code_align
        );
        hex_lines(&mut out, &self.code);
        let _ = writeln!(
            out,
            "data: {} bytes, align {}",
            self.data_len, self.data_align
        );
        hex_lines(&mut out, &self.init_data);
        for z in &self.zero_fill {
            let _ = writeln!(
                out,
                "  {:04x}: zero-fill {}, {} bytes, align {}",
                z.offset, z.section, z.size, z.align
            );
        }
        let _ = writeln!(out, "holes: {}", self.holes.len());
        for hole in &self.holes {
            let _ = writeln!(out, "  {}", self.hole_text(hole));
        }
        let _ = writeln!(out, "operands: {}", self.operands.join(" "));
        let _ = writeln!(out, "targets: {}", self.targets.join(" "));
        let _ = writeln!(out, "symbols: {}", self.symbols.join(" "));
        out
    }
}

/// `  0010: 48 8b 05 ...`, 16 bytes a line.
fn hex_lines(out: &mut String, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "  {:04x}:", i * 16);
        for b in chunk {
            let _ = write!(out, " {b:02x}");
        }
        out.push('\n');
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// JSON view of a hole: names instead of indices so a diff of two targets is readable.
struct HoleJson<'a> {
    stencil: &'a StencilBuf,
    hole: &'a Hole,
}

impl Serialize for HoleJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Hole", 5)?;
        st.serialize_field(
            "section",
            match self.hole.section {
                Section::Code => "code",
                Section::Data => "data",
            },
        )?;
        st.serialize_field("offset", &self.hole.offset)?;
        st.serialize_field("kind", self.hole.kind.name())?;
        st.serialize_field("value", &self.stencil.value_text(self.hole.value))?;
        st.serialize_field("addend", &self.hole.addend)?;
        st.end()
    }
}

/// For tests that write stencils by hand and set only the fields they need
/// (`StencilBuf { holes, ..StencilBuf::plain("op_x", code) }`).
#[cfg(test)]
impl StencilBuf {
    /// A stencil named `name` of `code` and nothing else: no data, holes, names, pieces or
    /// frame, alignment 1.
    pub(crate) fn plain(name: &str, code: Vec<u8>) -> StencilBuf {
        StencilBuf {
            name: name.into(),
            code,
            code_align: 1,
            init_data: vec![],
            data_len: 0,
            data_align: 1,
            zero_fill: vec![],
            holes: vec![],
            operands: vec![],
            targets: vec![],
            symbols: vec![],
            elided_continue: false,
            cold_len: 0,
            pieces: vec![],
            frame: None,
        }
    }
}

impl Serialize for StencilBuf {
    /// Code and data as lowercase hex strings; holes with their values by name.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let holes: Vec<HoleJson<'_>> = self
            .holes
            .iter()
            .map(|hole| HoleJson {
                stencil: self,
                hole,
            })
            .collect();
        let mut st = s.serialize_struct("Stencil", 13)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("code", &hex(&self.code))?;
        st.serialize_field("code_align", &self.code_align)?;
        st.serialize_field("data", &hex(&self.init_data))?;
        st.serialize_field("data_len", &self.data_len)?;
        st.serialize_field("data_align", &self.data_align)?;
        st.serialize_field("zero_fill", &self.zero_fill)?;
        st.serialize_field("holes", &holes)?;
        st.serialize_field("operands", &self.operands)?;
        st.serialize_field("targets", &self.targets)?;
        st.serialize_field("symbols", &self.symbols)?;
        st.serialize_field("elided_continue", &self.elided_continue)?;
        st.serialize_field("cold_len", &self.cold_len)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpjit_model::HoleKind;

    #[test]
    fn growth_counts_only_the_instructions_before_an_offset() {
        let growth = [(4, 4), (10, 3)];
        assert_eq!(grown_before(&growth, 4), 0);
        assert_eq!(grown_before(&growth, 5), 4);
        assert_eq!(grown_before(&growth, 11), 7);
    }

    fn sample() -> StencilBuf {
        StencilBuf {
            code_align: 4,
            init_data: vec![1, 2],
            data_len: 2,
            data_align: 8,
            holes: vec![Hole {
                section: Section::Code,
                offset: 0x1c,
                kind: HoleKind::Aarch64Branch26,
                value: HoleValue::Operand(0),
                addend: -4,
            }],
            operands: vec!["OPERAND0".into()],
            symbols: vec!["helper".into()],
            elided_continue: true,
            ..StencilBuf::plain("op_x", (0u8..18).collect())
        }
    }

    #[test]
    fn text_form_lists_bytes_holes_and_names() {
        let text = sample().to_text();
        assert!(text.contains("code: 18 bytes, align 4, trailing jump to continuation elided\n"));
        assert!(text
            .contains("  0000: 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f\n  0010: 10 11\n"));
        assert!(text.contains("  code+0x1c Aarch64Branch26 operand:OPERAND0 -4\n"));
        assert!(text.contains("symbols: helper\n"));
    }

    #[test]
    fn json_uses_hex_and_names() {
        let json = serde_json::to_value(sample()).unwrap();
        assert_eq!(json["code"].as_str().unwrap().len(), 36);
        assert_eq!(json["holes"][0]["value"], "operand:OPERAND0");
        assert_eq!(json["holes"][0]["kind"], "Aarch64Branch26");
        assert_eq!(json["elided_continue"], true);
    }
}
