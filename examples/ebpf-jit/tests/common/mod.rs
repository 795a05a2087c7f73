//! The differential harness: a program runs through rbpf 0.4's interpreter, this crate's
//! JIT and this crate's interpreter; r0, the memory afterwards and the error kind (with
//! the faulting instruction's index) must agree.
#![allow(dead_code)]

use ebpf_jit::{encode_kind, AluOp, Compiler, Cond, EbpfVm, ErrorKind, Insn, Kind, Width};
use std::sync::OnceLock;

/// Helpers both sides register. None reads r1, which holds a pointer (whose value differs
/// between the two VMs' memory).
pub fn helper_mix(_: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    b.wrapping_mul(3) ^ c.rotate_left(7) ^ d.wrapping_add(e)
}
pub fn helper_popcount(_: u64, b: u64, _: u64, _: u64, _: u64) -> u64 {
    u64::from(b.count_ones()) + 1000
}
pub fn helper_sub(_: u64, b: u64, c: u64, _: u64, _: u64) -> u64 {
    b.wrapping_sub(c)
}
/// rbpf's helper type (this crate's `register_helper` takes these and closures).
pub type HelperFn = fn(u64, u64, u64, u64, u64) -> u64;
pub const HELPERS: [(u32, HelperFn); 3] =
    [(1, helper_mix), (2, helper_popcount), (0x10000, helper_sub)];
/// An id neither side registers.
pub const UNKNOWN_HELPER: u32 = 99;

/// One compiler for the whole test binary (traces share its executable memory).
pub fn compiler() -> &'static Compiler {
    static C: OnceLock<Compiler> = OnceLock::new();
    C.get_or_init(|| Compiler::new().unwrap())
}

/// What a run produced, in terms both VMs share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub result: Result<u64, (ErrorKind, Option<usize>)>,
    pub mem: Vec<u8>,
    pub mbuff: Vec<u8>,
}

/// rbpf's error message → (kind, instruction index).
fn classify(msg: &str) -> (ErrorKind, Option<usize>) {
    let index = msg.rfind("insn #").and_then(|p| {
        let digits: String = msg[p + 6..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse::<usize>().ok()
    });
    if msg.starts_with("[Verifier]") {
        (ErrorKind::Verifier, index)
    } else if msg.contains("out of bounds memory load") {
        // rbpf names the instruction after the faulting one.
        (ErrorKind::OutOfBoundsLoad, index.map(|i| i - 1))
    } else if msg.contains("out of bounds memory store") {
        (ErrorKind::OutOfBoundsStore, index.map(|i| i - 1))
    } else if msg.contains("unknown helper function") {
        (ErrorKind::UnknownHelper, None)
    } else if msg.contains("too many nested calls") {
        (ErrorKind::CallDepth, None)
    } else {
        panic!("unexpected rbpf error: {msg}")
    }
}

/// Bytes of zeros on each side of every region a test hands an engine: more than an
/// access near a region's edge can reach (an `i16` offset from a masked pointer).
const GUARD: usize = 1 << 16;

/// A copy of a memory region in the middle of a zeroed buffer [`GUARD`] bytes larger on
/// each side, so that an access a little outside the region lands in no other region, for
/// every engine alike. With plain copies, where the allocator happened to put another
/// region decided whether such an access was in bounds, and the engines could disagree.
struct Guarded {
    buffer: Vec<u8>,
    len: usize,
}

impl Guarded {
    fn new(bytes: &[u8]) -> Guarded {
        let mut buffer = vec![0; bytes.len() + 2 * GUARD];
        buffer[GUARD..GUARD + bytes.len()].copy_from_slice(bytes);
        Guarded {
            buffer,
            len: bytes.len(),
        }
    }

    fn region(&mut self) -> &mut [u8] {
        &mut self.buffer[GUARD..GUARD + self.len]
    }

    fn into_bytes(self) -> Vec<u8> {
        self.buffer[GUARD..GUARD + self.len].to_vec()
    }
}

/// Runs `prog` with rbpf's interpreter: `EbpfVmRaw` without `mbuff`, `EbpfVmMbuff` with.
pub fn run_rbpf(prog: &[u8], mem: &[u8], mbuff: Option<&[u8]>) -> Outcome {
    let (mut mem_guarded, mut mb_guarded) = (Guarded::new(mem), Guarded::new(mbuff.unwrap_or(&[])));
    let mem = mem_guarded.region();
    let mb = mb_guarded.region();
    let result = match mbuff {
        None => rbpf::EbpfVmRaw::new(Some(prog)).and_then(|mut vm| {
            for (id, h) in HELPERS {
                vm.register_helper(id, h)?;
            }
            vm.execute_program(mem)
        }),
        Some(_) => rbpf::EbpfVmMbuff::new(Some(prog)).and_then(|mut vm| {
            for (id, h) in HELPERS {
                vm.register_helper(id, h)?;
            }
            // rbpf takes both as shared slices and writes through them.
            vm.execute_program(mem, mb)
        }),
    };
    let result = result.map_err(|e| classify(&e.to_string()));
    Outcome {
        result,
        mem: mem_guarded.into_bytes(),
        mbuff: mb_guarded.into_bytes(),
    }
}

/// Runs `prog` with this crate: the JIT (`jit = true`) or the interpreter.
pub fn run_ours(prog: &[u8], mem: &[u8], mbuff: Option<&[u8]>, jit: bool) -> Outcome {
    let (mut mem_guarded, mut mb_guarded) = (Guarded::new(mem), Guarded::new(mbuff.unwrap_or(&[])));
    let (mem, mb) = (mem_guarded.region(), mb_guarded.region());
    let result = EbpfVm::new(prog).and_then(|mut vm| {
        for (id, h) in HELPERS {
            vm.register_helper(id, h);
        }
        if jit {
            vm.jit_compile_with(compiler())?;
            vm.execute_jit_mbuff(mem, mb)
        } else {
            vm.interpret_mbuff(mem, mb)
        }
    });
    Outcome {
        result: result.map_err(|e| (e.kind(), e.insn())),
        mem: mem_guarded.into_bytes(),
        mbuff: mb_guarded.into_bytes(),
    }
}

/// Runs `prog` with the JIT keeping `pins` in machine registers (the others in the frame).
pub fn run_pinned(prog: &[u8], mem: &[u8], mbuff: Option<&[u8]>, pins: &[u8]) -> Outcome {
    let (mut mem_guarded, mut mb_guarded) = (Guarded::new(mem), Guarded::new(mbuff.unwrap_or(&[])));
    let (mem, mb) = (mem_guarded.region(), mb_guarded.region());
    let helpers = HELPERS
        .iter()
        .map(|&(id, h)| (id, ebpf_jit::Helper::new(h)))
        .collect();
    let result = ebpf_jit::verify(prog)
        .and_then(|()| compiler().compile_pinned(prog, &helpers, pins))
        .and_then(|c| c.run(mem, mb));
    Outcome {
        result: result.map_err(|e| (e.kind(), e.insn())),
        mem: mem_guarded.into_bytes(),
        mbuff: mb_guarded.into_bytes(),
    }
}

/// Runs a compiled program (e.g. one compiled in a batch) with `mem` and `mbuff`:
/// `run(mem, mbuff)` with guarded copies of both.
pub fn run_with(
    mem: &[u8],
    mbuff: Option<&[u8]>,
    run: impl FnOnce(&mut [u8], &mut [u8]) -> Result<u64, ebpf_jit::Error>,
) -> Outcome {
    let (mut mem_guarded, mut mb_guarded) = (Guarded::new(mem), Guarded::new(mbuff.unwrap_or(&[])));
    let result = run(mem_guarded.region(), mb_guarded.region());
    Outcome {
        result: result.map_err(|e| (e.kind(), e.insn())),
        mem: mem_guarded.into_bytes(),
        mbuff: mb_guarded.into_bytes(),
    }
}

/// Whether two outcomes agree: r0 and memory exactly, errors by kind and by instruction
/// where rbpf names one.
pub fn agree(ours: &Outcome, reference: &Outcome) -> bool {
    let results = match (&ours.result, &reference.result) {
        (Ok(a), Ok(b)) => a == b,
        (Err((ka, ia)), Err((kb, ib))) => ka == kb && (ib.is_none() || ia == ib),
        _ => false,
    };
    results && ours.mem == reference.mem && ours.mbuff == reference.mbuff
}

thread_local! {
    /// Programs `check` ran on this thread (each test runs on a thread of its own).
    pub static CHECKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs all three and panics unless they agree; returns rbpf's outcome.
pub fn check(prog: &[u8], mem: &[u8], mbuff: Option<&[u8]>) -> Outcome {
    CHECKED.with(|c| c.set(c.get() + 1));
    let reference = run_rbpf(prog, mem, mbuff);
    let jit = run_ours(prog, mem, mbuff, true);
    let interp = run_ours(prog, mem, mbuff, false);
    if !agree(&jit, &reference) || !agree(&interp, &reference) {
        panic!(
            "VMs disagree on\n{}\nmem {mem:02x?} mbuff {mbuff:02x?}\nrbpf:   {reference:?}\njit:    {jit:?}\ninterp: {interp:?}",
            disasm(prog)
        );
    }
    // The JIT again with other registers pinned: none, and (when the program is short) r2
    // alone, r3 alone, r3, r0, r2, and five in two orders (every slot: 0, 1, 3, 4, 2 by
    // rank), so that every op runs with its registers in the frame, pinned in different
    // slots, and mixed.
    let mut variants: Vec<&[u8]> = vec![&[]];
    if prog.len() <= 8 * 16 {
        variants.extend([
            &[2][..],
            &[3],
            &[3, 0, 2],
            &[1, 3, 4, 0, 2],
            &[0, 2, 1, 4, 3],
        ]);
    }
    for pins in variants {
        let other = run_pinned(prog, mem, mbuff, pins);
        if !agree(&other, &reference) {
            panic!(
                "the JIT with {pins:?} pinned disagrees on\n{}\nmem {mem:02x?} mbuff {mbuff:02x?}\nrbpf: {reference:?}\njit:  {other:?}",
                disasm(prog)
            );
        }
    }
    reference
}

/// Runs the JIT and this crate's interpreter only (for what rbpf's interpreter panics on).
pub fn check_ours(prog: &[u8], mem: &[u8]) -> Outcome {
    let jit = run_ours(prog, mem, None, true);
    let interp = run_ours(prog, mem, None, false);
    assert_eq!(
        jit,
        interp,
        "JIT and interpreter disagree on\n{}",
        disasm(prog)
    );
    jit
}

/// One line per instruction, for failure messages.
pub fn disasm(prog: &[u8]) -> String {
    let mut s = String::new();
    for i in 0..prog.len() / 8 {
        let ins = ebpf_jit::insn(prog, i);
        s += &format!(
            "  #{i:<3} {:02x} {:?} dst=r{} src=r{} off={} imm={:#x}\n",
            ins.opc,
            ebpf_jit::decode(ins.opc),
            ins.dst,
            ins.src,
            ins.off,
            ins.imm
        );
    }
    s
}

/// A tiny assembler.
#[derive(Clone, Default)]
pub struct Asm {
    pub insns: Vec<Insn>,
}

pub fn raw(opc: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        opc,
        dst,
        src,
        off,
        imm,
    }
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }
    pub fn len(&self) -> usize {
        self.insns.len()
    }
    pub fn raw(&mut self, opc: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(raw(opc, dst, src, off, imm));
        self
    }
    pub fn kind(&mut self, kind: Kind, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.raw(encode_kind(kind), dst, src, off, imm)
    }
    pub fn alu(&mut self, op: AluOp, wide: bool, dst: u8, src: Src) -> &mut Asm {
        match src {
            Src::Imm(imm) => self.kind(
                Kind::Alu {
                    op,
                    wide,
                    reg: false,
                },
                dst,
                0,
                0,
                imm,
            ),
            Src::Reg(r) => self.kind(
                Kind::Alu {
                    op,
                    wide,
                    reg: true,
                },
                dst,
                r,
                0,
                0,
            ),
        }
    }
    pub fn mov64(&mut self, dst: u8, src: Src) -> &mut Asm {
        self.alu(AluOp::Mov, true, dst, src)
    }
    pub fn jmp(&mut self, cond: Cond, wide: bool, dst: u8, src: Src, off: i16) -> &mut Asm {
        match src {
            Src::Imm(imm) => self.kind(
                Kind::Jmp {
                    cond,
                    wide,
                    reg: false,
                },
                dst,
                0,
                off,
                imm,
            ),
            Src::Reg(r) => self.kind(
                Kind::Jmp {
                    cond,
                    wide,
                    reg: true,
                },
                dst,
                r,
                off,
                0,
            ),
        }
    }
    pub fn ja(&mut self, off: i16) -> &mut Asm {
        self.kind(Kind::Ja, 0, 0, off, 0)
    }
    pub fn lddw(&mut self, dst: u8, v: u64) -> &mut Asm {
        self.raw(0x18, dst, 0, 0, v as u32 as i32);
        self.raw(0, 0, 0, 0, (v >> 32) as u32 as i32)
    }
    pub fn ldx(&mut self, w: Width, dst: u8, src: u8, off: i16) -> &mut Asm {
        self.kind(Kind::Ldx(w), dst, src, off, 0)
    }
    pub fn st(&mut self, w: Width, dst: u8, off: i16, imm: i32) -> &mut Asm {
        self.kind(Kind::St(w), dst, 0, off, imm)
    }
    pub fn stx(&mut self, w: Width, dst: u8, src: u8, off: i16) -> &mut Asm {
        self.kind(Kind::Stx(w), dst, src, off, 0)
    }
    pub fn call(&mut self, id: u32) -> &mut Asm {
        self.kind(Kind::Call, 0, 0, 0, id as i32)
    }
    pub fn call_local(&mut self, rel: i32) -> &mut Asm {
        self.kind(Kind::Call, 0, 1, 0, rel)
    }
    pub fn exit(&mut self) -> &mut Asm {
        self.kind(Kind::Exit, 0, 0, 0, 0)
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.insns.iter().flat_map(|i| i.encode()).collect()
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Src {
    Imm(i32),
    Reg(u8),
}

/// SplitMix64: a seeded, deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Values at the edges of the operations.
pub const EDGE64: [u64; 22] = [
    0,
    1,
    2,
    7,
    31,
    32,
    33,
    63,
    64,
    65,
    0x7f,
    0xff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_fffe,
    u64::MAX,
    0x0123_4567_89ab_cdef,
    0xfedc_ba98_7654_3210,
];
pub const EDGE32: [i32; 16] = [
    0,
    1,
    2,
    -1,
    -2,
    7,
    31,
    32,
    33,
    63,
    64,
    0x7fff_ffff,
    i32::MIN,
    0x1234_5678,
    -0x1234_5678,
    0xff,
];

pub const ALU_OPS: [AluOp; 12] = [
    AluOp::Add,
    AluOp::Sub,
    AluOp::Mul,
    AluOp::Div,
    AluOp::Or,
    AluOp::And,
    AluOp::Lsh,
    AluOp::Rsh,
    AluOp::Mod,
    AluOp::Xor,
    AluOp::Mov,
    AluOp::Arsh,
];
pub const CONDS: [Cond; 11] = [
    Cond::Eq,
    Cond::Gt,
    Cond::Ge,
    Cond::Set,
    Cond::Ne,
    Cond::Sgt,
    Cond::Sge,
    Cond::Lt,
    Cond::Le,
    Cond::Slt,
    Cond::Sle,
];
pub const WIDTHS: [Width; 4] = [Width::B, Width::H, Width::W, Width::Dw];
