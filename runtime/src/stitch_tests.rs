//! Unit tests that need the crate's internals: the icache flush covers exactly the code
//! that was written, veneers included (qemu-user cannot detect a missing flush, so this is
//! observed through the [`FlushIcache`] hook rather than by running code).

use crate::icache::{FlushIcache, Hardware};
use crate::{Jit, JitOptions};
use cpjit_model::{
    Abi, Arch, Hole, HoleKind, HoleValue, Host, ObjectFormat, Section, Stencil, StencilSet,
};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Recorder {
    ranges: Mutex<Vec<(usize, usize)>>,
}

impl FlushIcache for Recorder {
    fn flush(&self, start: usize, len: usize) {
        self.ranges.lock().unwrap().push((start, len));
        Hardware.flush(start, len);
    }
}

#[cfg(target_arch = "x86_64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::X86_64;
    pub const NOP: &[u8] = &[0x90];
    /// `call far` (e8 rel32), then falls through.
    pub const CALL: &[u8] = &[0xe8, 0, 0, 0, 0];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 1,
        kind: HoleKind::X86Branch32,
        value: HoleValue::Symbol(0),
        addend: -4,
    };
    /// `nop; nop; ret`
    pub const RET: &[u8] = &[0x90, 0x90, 0xc3];
}

#[cfg(target_arch = "aarch64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::Aarch64;
    pub const NOP: &[u8] = &[0x1f, 0x20, 0x03, 0xd5];
    /// `bl far`
    pub const CALL: &[u8] = &[0x00, 0x00, 0x00, 0x94];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 0,
        kind: HoleKind::Aarch64Branch26,
        value: HoleValue::Symbol(0),
        addend: 0,
    };
    /// `nop; ret`
    pub const RET: &[u8] = &[0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6];
}

#[cfg(target_arch = "riscv64")]
mod host {
    use super::*;
    pub const ARCH: Arch = Arch::Riscv64;
    pub const NOP: &[u8] = &[0x13, 0x00, 0x00, 0x00];
    /// `auipc ra, 0; jalr ra, 0(ra)` (`call far`)
    pub const CALL: &[u8] = &[0x97, 0x00, 0x00, 0x00, 0xe7, 0x80, 0x00, 0x00];
    pub const CALL_HOLE: Hole = Hole {
        section: Section::Code,
        offset: 0,
        kind: HoleKind::RiscvCall,
        value: HoleValue::Symbol(0),
        addend: 0,
    };
    /// `nop; ret`
    pub const RET: &[u8] = &[0x13, 0x00, 0x00, 0x00, 0x67, 0x80, 0x00, 0x00];
}

static HOLES: [Hole; 1] = [host::CALL_HOLE];
static STENCILS: [Stencil<'static>; 2] = [
    Stencil {
        name: "call_far",
        code: host::CALL,
        code_align: 4,
        init_data: &[],
        data_len: 0,
        data_align: 1,
        zero_fill: &[],
        holes: &HOLES,
        operands: &[],
        targets: &[],
        symbols: &[0],
        falls_through: true,
    },
    Stencil {
        name: "ret",
        code: host::RET,
        code_align: 4,
        init_data: &[],
        data_len: 0,
        data_align: 1,
        zero_fill: &[],
        holes: &[],
        operands: &[],
        targets: &[],
        symbols: &[],
        falls_through: false,
    },
];
static SET: StencilSet<'static> = StencilSet {
    target: "host",
    arch: host::ARCH,
    format: ObjectFormat::Elf,
    // Whatever this process is: the set must pass `Jit::new`'s host check.
    abi: match Host::current() {
        Some(h) => h.abi(),
        None => Abi::SysV64,
    },
    // The stencils touch no register any OS reserves.
    reserved_registers: match Host::current() {
        Some(h) => h.reserved_registers(),
        None => &[],
    },
    nop: host::NOP,
    shim: None,
    stencils: &STENCILS,
    symbols: &["far"],
    zero_fill: &[],
    digest: "",
};

fn jit(recorder: &Arc<Recorder>) -> Jit<'static> {
    // Address 0x10 is out of direct reach of any arena, so the call needs a veneer.
    let resolve = Box::new(|name: &str| (name == "far").then_some(0x10));
    Jit::with_flusher(&SET, resolve, JitOptions::default(), recorder.clone()).unwrap()
}

#[test]
fn flush_covers_exactly_the_written_code_including_veneers() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    assert!(recorder.ranges.lock().unwrap().is_empty());

    let mut t = jit.trace();
    t.push(0, &[], &[]).unwrap();
    t.push(1, &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert_eq!(trace.veneers(), 1);
    let code_len = host::CALL.len().next_multiple_of(4) + host::RET.len(); // call, pad, ret
    let expected_len = code_len.next_multiple_of(16) + crate::patch::veneer_size(host::ARCH);
    assert_eq!(trace.code_range().len(), expected_len);
    assert_eq!(
        *recorder.ranges.lock().unwrap(),
        [(trace.code_range().start, expected_len)]
    );

    // Without a veneer: exactly the instances' bytes, not the rounded-up block.
    let mut t = jit.trace();
    t.push(1, &[], &[]).unwrap();
    t.push(1, &[], &[]).unwrap();
    let plain = t.finish().unwrap();
    let len = (host::RET.len().next_multiple_of(4)) + host::RET.len();
    assert_eq!(plain.code_range().len(), len);
    assert_eq!(
        recorder.ranges.lock().unwrap()[1],
        (plain.code_range().start, len)
    );

    // Freeing writes traps but makes nothing executable: no flush.
    drop(trace);
    drop(plain);
    assert_eq!(recorder.ranges.lock().unwrap().len(), 2);
}

#[test]
fn a_batch_is_flushed_once_over_all_its_traces() {
    let recorder = Arc::new(Recorder::default());
    let jit = jit(&recorder);
    let mut batch = jit.batch();
    for k in 0..5 {
        let t = batch.trace();
        // Traces with and without a veneer, one after another in one block.
        if k % 2 == 0 {
            t.push(0, &[], &[]).unwrap();
        }
        t.push(1, &[], &[]).unwrap();
    }
    let traces = batch.finish().unwrap();
    let ranges = recorder.ranges.lock().unwrap().clone();
    assert_eq!(ranges.len(), 1, "one flush for the batch: {ranges:x?}");
    let (start, len) = ranges[0];
    for (k, t) in traces.iter().enumerate() {
        assert_eq!(t.veneers(), usize::from(k % 2 == 0), "trace {k}");
        let code = t.code_range();
        assert!(
            start <= code.start && code.end <= start + len,
            "trace {k} at {code:x?} is outside the flushed {start:#x}+{len:#x}"
        );
    }
    assert_eq!(start, traces[0].code_range().start);
}
