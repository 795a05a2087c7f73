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
    let mut l = Listing {
        b,
        trace,
        cold,
        code: trace.code_bytes(),
        base: trace.code_range().start as u64,
        data_base: trace.data_range().start as u64,
        offsets: trace.instance_offsets(),
        out: String::new(),
    };
    let _ = writeln!(
        l.out,
        "trace{id}: {} instances, code {:#x}..{:#x} ({} bytes), data {:#x} ({} bytes), {} veneers, {} GOT slots",
        l.offsets.len(),
        l.base,
        trace.code_range().end,
        l.code.len(),
        l.data_base,
        trace.data_range().len(),
        trace.veneers(),
        trace.got_slots()
    );
    let mut data_end = 0usize;
    let mut end = 0usize;
    for i in 0..b.instances.len() {
        end = l.instance(i, end, &mut data_end);
    }
    l.tail(end);
    l.out
}

/// One listing being written: the trace, what its builder pushed, and where things are.
struct Listing<'a, 'j, 's> {
    b: &'a TraceBuilder<'j, 's>,
    trace: &'a Trace,
    cold: &'a [Option<u64>],
    code: &'a [u8],
    base: u64,
    data_base: u64,
    offsets: &'a [u32],
    out: String,
}

impl Listing<'_, '_, '_> {
    /// A jump target as an address, and the instance it is when it is one.
    fn target(&self, t: Target) -> String {
        match t {
            Target::Address(a) => format!("{a:#x}"),
            Target::Instance(id) => match self.offsets.get(id.index()) {
                Some(&o) => format!("{:#x} (instance {})", self.base + o as u64, id.index()),
                None => format!("instance {} (missing)", id.index()),
            },
            Target::Label(l) => format!("{l:?} (unbound)"),
        }
    }

    /// Instance `i` (after any padding from `end`, where the previous one ended) and its
    /// holes; `data_end` is where the data of the instances so far ends. Returns where its
    /// hot code ends.
    fn instance(&mut self, i: usize, end: usize, data_end: &mut usize) -> usize {
        let inst = &self.b.instances[i];
        let s = &self.b.jit.set.stencils[inst.stencil as usize];
        let at = self.offsets[i] as usize;
        if at > end {
            let _ = writeln!(self.out, "  padding");
            hex(&mut self.out, self.base, end, &self.code[end..at]);
        }
        let data_at = if s.data_len == 0 {
            *data_end
        } else {
            let d = round_up(*data_end, s.data_align as usize);
            *data_end = d + s.data_len as usize;
            d
        };
        let hot_len = s.hot_len();
        let _ = writeln!(
            self.out,
            "[{i}] {} at {:#x} (+{at:#x}, {} bytes{}{})",
            s.name,
            self.base + at as u64,
            hot_len,
            if s.data_len == 0 {
                String::new()
            } else {
                format!(", data at {:#x}", self.data_base + data_at as u64)
            },
            match self.cold[i] {
                Some(c) => format!(", cold part at {:#x}, {} bytes", self.base + c, s.cold_len),
                None => String::new(),
            }
        );
        hex(&mut self.out, self.base, at, &self.code[at..at + hot_len]);
        for h in s.holes {
            let (what, value) = self.hole_value(i, at, data_at, h.value);
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
                self.out,
                "    hole {section}+{offset:#x} {}: {what} = {value}{addend}",
                h.kind
            );
        }
        at + hot_len
    }

    /// What a hole of instance `i` (at `at`, its data at `data_at`) refers to, and the
    /// value it was patched with.
    fn hole_value(
        &self,
        i: usize,
        at: usize,
        data_at: usize,
        value: HoleValue,
    ) -> (String, String) {
        let (b, s) = (
            self.b,
            &self.b.jit.set.stencils[self.b.instances[i].stencil as usize],
        );
        let inst = &b.instances[i];
        match value {
            HoleValue::Operand(k) | HoleValue::OperandHigh(k) | HoleValue::OperandLow(k) => {
                let (_, part) = value.operand().expect("an operand value");
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
                self.target(b.targets[inst.targets as usize + k as usize]),
            ),
            HoleValue::Symbol(k) => (
                b.jit.set.symbols[k as usize].to_string(),
                match b.jit.symbol(k) {
                    Some(a) => format!("{a:#x}"),
                    None => "unresolved".into(),
                },
            ),
            HoleValue::Continue => (
                "continue".into(),
                match self.offsets.get(i + 1) {
                    Some(_) => self.target(Target::Instance(crate::InstanceId::from_index(i + 1))),
                    None => b.continuation.map_or("none".into(), |t| self.target(t)),
                },
            ),
            HoleValue::Code => ("own code".into(), format!("{:#x}", self.base + at as u64)),
            HoleValue::Cold => (
                "own cold part".into(),
                self.cold[i].map_or("none".into(), |c| format!("{:#x}", self.base + c)),
            ),
            HoleValue::Data => (
                "own data".into(),
                format!("{:#x}", self.data_base + data_at as u64),
            ),
        }
    }

    /// What follows the last instance's hot code (from `end`): the tail jump, the cold
    /// parts and padding, the veneers.
    fn tail(&mut self, mut end: usize) {
        let (b, trace, code, base) = (self.b, self.trace, self.code, self.base);
        if end >= code.len() {
            return;
        }
        let veneers = trace.veneers() * crate::patch::VENEER_SIZE;
        let tail_end = code.len() - veneers;
        if let Some(continuation) = b.continuation {
            let tail = end + b.jit.facts.tail_jump.len();
            let _ = writeln!(self.out, "tail jump to {}", self.target(continuation));
            hex(&mut self.out, base, end, &code[end..tail]);
            end = tail;
        }
        if end < tail_end {
            let cold_parts = self.cold.iter().any(Option::is_some);
            let _ = writeln!(
                self.out,
                "  {}",
                if cold_parts {
                    "cold parts, padding"
                } else {
                    "padding"
                }
            );
            hex(&mut self.out, base, end, &code[end..tail_end]);
        }
        if veneers > 0 {
            let _ = writeln!(self.out, "veneers ({})", trace.veneers());
            hex(&mut self.out, base, tail_end, &code[tail_end..]);
        }
    }
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
