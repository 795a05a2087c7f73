//! Human-readable listings of stencils: disassembly with holes annotated inline, data as
//! hex with its holes. Used by `stencils show` and by the comments of generated crates.

use crate::disasm;
use crate::error::Result;
use crate::stencil::StencilBuf;
use cpjit_model::{Hole, Section};
use std::fmt::Write as _;

/// `; hole Aarch64Branch26 -> continue` (plus `+ addend` when non-zero).
pub fn hole_note(stencil: &StencilBuf, hole: &Hole) -> String {
    let addend = match hole.addend {
        0 => String::new(),
        a if a < 0 => format!(" - {:#x}", a.unsigned_abs()),
        a => format!(" + {a:#x}"),
    };
    format!(
        "; hole {} -> {}{addend}",
        hole.kind,
        stencil.value_text(hole.value)
    )
}

/// Listing lines (without trailing newlines): one per instruction, then the data bytes.
pub fn lines(triple: &str, stencil: &StencilBuf) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for inst in disasm::disassemble(triple, &stencil.code)? {
        let bytes = &stencil.code[inst.offset as usize..(inst.offset + inst.len) as usize];
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut line = format!("{:04x}  {:<24} {}", inst.offset, hex.join(" "), inst.text);
        let end = inst.offset + inst.len;
        for hole in stencil.holes.iter().filter(|h| h.section == Section::Code) {
            if hole.offset >= inst.offset && hole.offset < end {
                let _ = write!(line, "  {}", hole_note(stencil, hole));
            }
        }
        out.push(line.trim_end().to_string());
    }
    if !stencil.data.is_empty() {
        out.push(format!(
            "data ({} B, align {}):",
            stencil.data.len(),
            stencil.data_align
        ));
        // A long zero-fill tail is summarised, as the writer does not spell it out either.
        let shown = crate::writer::long_zero_tail(&stencil.data).unwrap_or(stencil.data.len());
        for (i, chunk) in stencil.data[..shown].chunks(16).enumerate() {
            let start = (i * 16) as u32;
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            let mut line = format!("{start:04x}  {}", hex.join(" "));
            for hole in stencil.holes.iter().filter(|h| h.section == Section::Data) {
                if hole.offset >= start && hole.offset < start + 16 {
                    let _ = write!(
                        line,
                        "  {} (at {:#x})",
                        hole_note(stencil, hole),
                        hole.offset
                    );
                }
            }
            out.push(line);
        }
        if shown < stencil.data.len() {
            out.push(format!(
                "{shown:04x}  ({} zero bytes)",
                stencil.data.len() - shown
            ));
        }
    }
    Ok(out)
}
