//! What compiling needs to know before the first push: which eBPF registers to pin (the
//! most used, a use under k backward jumps weighing 16^k), how many local calls there are
//! (the instances after the program are numbered from them), and where they go. Counted by the verifier as it checks each instruction ([`Scan::add`]:
//! one pass for both, a table read per instruction), or by [`Scan::of`] for a program
//! verified elsewhere; a second pass, for the loop depths, only if the program jumps
//! backwards.

use crate::insn::INSN_SIZE;
use crate::shape::{Action, Shape, SHAPES};
use crate::table::PINS;

/// The weight of a use under k backward jumps, k = 0..=8.
const LOOP_WEIGHT: [u64; 9] = [
    1,
    1 << 4,
    1 << 8,
    1 << 12,
    1 << 16,
    1 << 20,
    1 << 24,
    1 << 28,
    1 << 32,
];

/// What the scan finds for the compiler ([`Scan::finish`]); small, so that an `EbpfVm`
/// holding it moves without a `memcpy` call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    /// The eBPF registers to pin, most used first ([`Scan::pins`]).
    pub pins: [u8; PINS],
    pub pin_count: u8,
    /// Whether it calls a helper (the compiler then pins r1..r3 where a C call takes them).
    pub helper_calls: bool,
    /// How many local calls (one `op_ret_case` each).
    pub calls: usize,
    /// The instructions local calls go to (empty without local calls).
    pub call_targets: Vec<usize>,
    /// Whether a jump goes backwards (only then does the compiler look for loops to guard,
    /// `emit/loops.rs`).
    pub backward: bool,
}

/// The scan as it goes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scan {
    /// Uses of r0..r10 (r11..r14 unused; r15 counts the roles without a register).
    pub uses: [u64; 16],
    /// What it finds besides the pins.
    plan: Plan,
    /// Whether a jump goes backwards (then [`Scan::weigh`] counts the uses again).
    backward: bool,
}

/// The program's instructions, eight bytes each (a pass indexes them below their count,
/// with no bounds check left to make).
#[inline(always)]
pub(crate) fn words(prog: &[u8]) -> &[[u8; INSN_SIZE]] {
    prog.as_chunks().0
}

/// Instruction `i`'s eight bytes as one little-endian word.
#[inline(always)]
pub(crate) fn word(prog: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(words(prog)[i])
}

impl Scan {
    /// Scans a verified program.
    pub fn of(prog: &[u8]) -> Plan {
        let mut scan = Scan::default();
        let words = words(prog);
        let mut i = 0;
        while i < words.len() {
            let w = u64::from_le_bytes(words[i]);
            i += scan.add(i, w, &SHAPES[w as usize & 255]);
        }
        scan.finish(prog)
    }

    /// What the scan of `prog` found, after its last instruction: the uses weighed by
    /// loop depth ([`Scan::weigh`]) and the registers to pin.
    // (By reference: the scan, its uses included, is too large to move without a `memcpy`
    // call.)
    pub fn finish(&mut self, prog: &[u8]) -> Plan {
        self.weigh(prog);
        let (pins, len) = self.pins();
        Plan {
            pins,
            pin_count: len as u8,
            backward: self.backward,
            ..std::mem::take(&mut self.plan)
        }
    }

    /// Counts instruction `i` (word `w` of shape `shape`); returns how many instruction
    /// slots it takes (2 for LD_DW). After the last, [`Scan::finish`].
    #[inline(always)]
    pub fn add(&mut self, i: usize, w: u64, shape: &Shape) -> usize {
        self.count_uses(w, shape);
        if shape.action == Action::Plain {
            return 1;
        }
        self.add_special(i, w, shape)
    }

    /// Counts the uses of instruction word `w`'s registers (of shape `shape`).
    #[inline(always)]
    pub fn count_uses(&mut self, w: u64, shape: &Shape) {
        let (d, s) = shape.regs.of(w);
        // At most 2^20 instructions: no overflow.
        self.uses[d] += 1;
        self.uses[s] += 1;
    }

    /// [`Scan::add`] of an instruction whose action is not `Plain`, its uses counted.
    #[inline(always)]
    pub fn add_special(&mut self, i: usize, w: u64, shape: &Shape) -> usize {
        match shape.action {
            Action::Jump => self.backward |= ((w >> 16) as i16) < 0,
            // The second half is no instruction of its own.
            Action::LdDw => return 2,
            Action::Call if (w >> 12) & 15 == 1 => self.local_call(i, w),
            Action::Call => self.plan.helper_calls = true,
            _ => {}
        }
        1
    }

    #[cold]
    fn local_call(&mut self, i: usize, w: u64) {
        self.plan.calls += 1;
        let imm = (w >> 32) as i32;
        self.plan
            .call_targets
            .push((i as i64 + 1 + i64::from(imm)) as usize);
    }

    /// If the program jumps backwards, counts the uses again, each weighted by its loop
    /// depth: a difference array over the ranges of backward jumps.
    fn weigh(&mut self, prog: &[u8]) {
        if !self.backward {
            return;
        }
        let n = prog.len() / INSN_SIZE;
        let mut delta = vec![0i32; n + 1];
        for i in 0..n {
            let w = word(prog, i);
            let off = (w >> 16) as i16;
            if off < 0 && SHAPES[w as usize & 255].action == Action::Jump {
                delta[(i as i64 + 1 + i64::from(off)).max(0) as usize] += 1;
                delta[i + 1] -= 1;
            }
        }
        self.uses = [0; 16];
        let (mut depth, mut i) = (0, 0);
        while i < n {
            depth += delta[i];
            let w = word(prog, i);
            let shape = &SHAPES[w as usize & 255];
            // At most 16^8 per instruction and 2^20 instructions: no overflow.
            let k = LOOP_WEIGHT[depth.clamp(0, 8) as usize];
            let (d, s) = shape.regs.of(w);
            self.uses[d] += k;
            self.uses[s] += k;
            if shape.action == Action::LdDw {
                depth += delta[i + 1];
                i += 1;
            }
            i += 1;
        }
    }

    /// The eBPF registers to pin, most used first (ties: the lower number).
    fn pins(&self) -> ([u8; PINS], usize) {
        // One pass keeping the best five keys in order, a key being the uses above the
        // register's rank (uses are below 2^54: twice 16^8 per instruction, 2^20 instructions; a
        // lower number ranks higher among equal uses). Five passes picking the best
        // register left cost 5 x 11 compares, as much as scanning a short program.
        let mut best = [0u64; PINS];
        for r in 0..11u8 {
            let uses = self.uses[usize::from(r)];
            if uses == 0 {
                continue;
            }
            let mut key = (uses << 4) | u64::from(15 - r);
            for b in best.iter_mut() {
                if key > *b {
                    std::mem::swap(&mut key, b);
                }
            }
        }
        let len = best.iter().take_while(|&&k| k != 0).count();
        (best.map(|k| 15 - (k & 15) as u8), len)
    }
}
