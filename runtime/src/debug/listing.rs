//! [`Trace::listing`](crate::Trace::listing): the stitched code in hex, sixteen bytes a
//! line, split at instance boundaries, each instance headed by its stencil's name and
//! followed by its holes: where each is, its kind, what it refers to and the value it was
//! patched with (before the addend). The runtime links no disassembler; pipe the bytes to
//! `llvm-mc --disassemble` (or read them in a debugger) for mnemonics.

use crate::arena::round_up;
use crate::trace::{Target, Trace, TraceBuilder};
use cpjit_model::{HoleValue, OperandPart, Section};
use std::fmt::Write;

/// `cold`: where each instance's cold part is (trace code offsets), listed after the tail.
pub(crate) fn listing(
    b: &TraceBuilder<'_, '_>,
    trace: &Trace,
    id: u64,
    cold: &[Option<u64>],
) -> String {
    let set = b.jit.set;
    let code = trace.code_bytes();
    let base = trace.code_range().start as u64;
    let data_base = trace.data_range().start as u64;
    let offsets = trace.instance_offsets();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace{id}: {} instances, code {:#x}..{:#x} ({} bytes), data {:#x} ({} bytes), {} veneers, {} GOT slots",
        offsets.len(),
        base,
        trace.code_range().end,
        code.len(),
        data_base,
        trace.data_range().len(),
        trace.veneers(),
        trace.got_slots()
    );
    let target = |t: Target| match t {
        Target::Address(a) => format!("{a:#x}"),
        Target::Instance(id) => match offsets.get(id.index()) {
            Some(&o) => format!("{:#x} (instance {})", base + o as u64, id.index()),
            None => format!("instance {} (missing)", id.index()),
        },
        Target::Label(l) => format!("{l:?} (unbound)"),
    };
    let mut data_end = 0usize;
    let mut end = 0usize;
    for (i, inst) in b.instances.iter().enumerate() {
        let s = &set.stencils[inst.stencil as usize];
        let at = offsets[i] as usize;
        if at > end {
            let _ = writeln!(out, "  padding");
            hex(&mut out, base, end, &code[end..at]);
        }
        let data_at = if s.data_len == 0 {
            data_end
        } else {
            let d = round_up(data_end, s.data_align as usize);
            data_end = d + s.data_len as usize;
            d
        };
        let hot_len = s.hot_len();
        let _ = writeln!(
            out,
            "[{i}] {} at {:#x} (+{at:#x}, {} bytes{}{})",
            s.name,
            base + at as u64,
            hot_len,
            if s.data_len == 0 {
                String::new()
            } else {
                format!(", data at {:#x}", data_base + data_at as u64)
            },
            match cold[i] {
                Some(c) => format!(", cold part at {:#x}, {} bytes", base + c, s.cold_len),
                None => String::new(),
            }
        );
        hex(&mut out, base, at, &code[at..at + hot_len]);
        for h in s.holes {
            let (what, value) = match h.value {
                HoleValue::Operand(k) | HoleValue::OperandHigh(k) | HoleValue::OperandLow(k) => {
                    let (_, part) = h.value.operand().expect("an operand value");
                    let half = match part {
                        OperandPart::Whole => "",
                        OperandPart::High => " (high half)",
                        OperandPart::Low => " (low half)",
                    };
                    (
                        format!("{}{half}", s.operands[k as usize]),
                        format!(
                            "{:#x}",
                            part.of(b.operands[inst.operands as usize + k as usize])
                        ),
                    )
                }
                HoleValue::Target(k) => (
                    s.targets[k as usize].to_string(),
                    target(b.targets[inst.targets as usize + k as usize]),
                ),
                HoleValue::Symbol(k) => (
                    set.symbols[k as usize].to_string(),
                    match b.jit.symbol(k) {
                        Some(a) => format!("{a:#x}"),
                        None => "unresolved".into(),
                    },
                ),
                HoleValue::Continue => (
                    "continue".into(),
                    match offsets.get(i + 1) {
                        Some(_) => target(Target::Instance(crate::InstanceId::from_index(i + 1))),
                        None => b.continuation.map_or("none".into(), target),
                    },
                ),
                HoleValue::Code => ("own code".into(), format!("{:#x}", base + at as u64)),
                HoleValue::Cold => (
                    "own cold part".into(),
                    cold[i].map_or("none".into(), |c| format!("{:#x}", base + c)),
                ),
                HoleValue::Data => (
                    "own data".into(),
                    format!("{:#x}", data_base + data_at as u64),
                ),
            };
            let (section, offset) = match h.section {
                Section::Code if h.offset as usize >= hot_len => {
                    ("cold", h.offset as usize - hot_len)
                }
                Section::Code => ("code", h.offset as usize),
                Section::Data => ("data", h.offset as usize),
            };
            let addend = match h.addend {
                0 => String::new(),
                a if a < 0 => format!(", addend -{:#x}", a.unsigned_abs()),
                a => format!(", addend +{a:#x}"),
            };
            let _ = writeln!(
                out,
                "    hole {section}+{offset:#x} {}: {what} = {value}{addend}",
                h.kind
            );
        }
        end = at + hot_len;
    }
    if end < code.len() {
        let veneers = trace.veneers() * crate::patch::VENEER_SIZE;
        let tail_end = code.len() - veneers;
        if b.continuation.is_some() {
            let tail = end + b.jit.facts.tail_jump.len();
            let _ = writeln!(
                out,
                "tail jump to {}",
                b.continuation.map(target).unwrap_or_default()
            );
            hex(&mut out, base, end, &code[end..tail]);
            end = tail;
        }
        if end < tail_end {
            let cold_parts = cold.iter().any(Option::is_some);
            let _ = writeln!(
                out,
                "  {}",
                if cold_parts {
                    "cold parts, padding"
                } else {
                    "padding"
                }
            );
            hex(&mut out, base, end, &code[end..tail_end]);
        }
        if veneers > 0 {
            let _ = writeln!(out, "veneers ({})", trace.veneers());
            hex(&mut out, base, tail_end, &code[tail_end..]);
        }
    }
    out
}

/// `bytes` (at offset `at` of code starting at `base`) as hex lines of sixteen bytes.
fn hex(out: &mut String, base: u64, at: usize, bytes: &[u8]) {
    for (k, line) in bytes.chunks(16).enumerate() {
        let offset = at + 16 * k;
        let _ = write!(out, "  {:#014x} +{offset:05x} ", base + offset as u64);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for &byte in line {
            out.push(' ');
            out.push(HEX[(byte >> 4) as usize] as char);
            out.push(HEX[(byte & 15) as usize] as char);
        }
        out.push('\n');
    }
}
