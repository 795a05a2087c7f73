//! Human-readable listings of stencils: disassembly with holes annotated inline, data as
//! hex with its holes. Used by `stencils show` and by the comments of generated crates.

use crate::disasm;
use crate::error::Result;
use crate::stencil::StencilBuf;
use cpjit_model::{Hole, HoleKind, Section};
use std::fmt::Write as _;

/// `; hole Aarch64Branch26 -> continue` (plus `+ addend` when non-zero); for the shim's
/// parameter-count marker, `; entry shim of 3 parameters`.
pub fn hole_note(stencil: &StencilBuf, hole: &Hole) -> String {
    if hole.kind == HoleKind::EntryParameters {
        return format!("; entry shim of {} parameters", hole.addend);
    }
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
    if stencil.data_len != 0 {
        out.push(format!(
            "data ({} B, align {}):",
            stencil.data_len, stencil.data_align
        ));
        for (i, chunk) in stencil.init_data.chunks(16).enumerate() {
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
        // Zero-fill is described, not stored: one line per section.
        for z in &stencil.zero_fill {
            out.push(format!(
                "{:04x}  ({} zero bytes: {})",
                z.offset, z.size, z.section
            ));
        }
    }
    Ok(out)
}
