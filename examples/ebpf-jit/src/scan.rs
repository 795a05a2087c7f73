//! What compiling needs to know before the first push: which eBPF registers to pin (the
//! most used, a use under k backward jumps weighing 16^k), how many local calls and memory
//! accesses there are (the instances after the program are numbered from them), and where
//! local calls go. One pass over the instructions, reading the compiler's opcode table; a
//! second, for the loop depths, only if the program jumps backwards.

use crate::insn::INSN_SIZE;
use crate::table::{Action, Row, PINS};

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

/// What the scan finds.
pub(crate) struct Scan {
    /// Uses of r0..r10 (r11..r14 unused; r15 counts the roles without a register).
    pub uses: [u64; 16],
    /// How many local calls (one `op_ret_case` each).
    pub calls: usize,
    /// Whether it calls a helper (the compiler then pins r1..r3 where a C call takes them).
    pub helper_calls: bool,
    /// How many LDX, ST and STX (one fault exit each).
    pub accesses: usize,
    /// The instructions local calls go to (empty without local calls).
    pub call_targets: Vec<usize>,
}

/// Instruction `i`'s eight bytes as one little-endian word.
#[inline(always)]
pub(crate) fn word(prog: &[u8], i: usize) -> u64 {
    let bytes: [u8; INSN_SIZE] = prog[i * INSN_SIZE..(i + 1) * INSN_SIZE]
        .try_into()
        .expect("8 bytes");
    u64::from_le_bytes(bytes)
}

impl Scan {
    /// Scans a verified program with the opcode table `rows`.
    pub fn of(prog: &[u8], rows: &[Row; 256]) -> Scan {
        let mut scan = Scan {
            uses: [0; 16],
            calls: 0,
            helper_calls: false,
            accesses: 0,
            call_targets: Vec::new(),
        };
        let backward = scan.count(prog, rows, |_| 1, true);
        if backward {
            // The loop depth of each instruction as a difference array over the ranges of
            // backward jumps, then the uses again, weighted.
            let n = prog.len() / INSN_SIZE;
            let mut delta = vec![0i32; n + 1];
            for i in 0..n {
                let w = word(prog, i);
                let off = (w >> 16) as i16;
                if off < 0 && rows[w as usize & 255].action == Action::Jump {
                    delta[(i as i64 + 1 + i64::from(off)).max(0) as usize] += 1;
                    delta[i + 1] -= 1;
                }
            }
            let mut depth = 0;
            let weights: Vec<u64> = delta[..n]
                .iter()
                .map(|d| {
                    depth += d;
                    LOOP_WEIGHT[depth.clamp(0, 8) as usize]
                })
                .collect();
            scan.uses = [0; 16];
            scan.count(prog, rows, |i| weights[i], false);
        }
        scan
    }

    /// Adds every instruction's uses at `weight(i)`; with `first`, also counts calls and
    /// accesses. Returns whether any jump goes backwards.
    #[inline(always)]
    fn count(
        &mut self,
        prog: &[u8],
        rows: &[Row; 256],
        weight: impl Fn(usize) -> u64,
        first: bool,
    ) -> bool {
        let n = prog.len() / INSN_SIZE;
        let mut backward = false;
        let mut i = 0;
        while i < n {
            let w = word(prog, i);
            let row = &rows[w as usize & 255];
            // At most 16^8 per instruction and 2^20 instructions: no overflow.
            let k = weight(i);
            self.uses[row.d.of(w)] += k;
            self.uses[row.s.of(w)] += k;
            match row.action {
                Action::Jump => backward |= ((w >> 16) as i16) < 0,
                Action::Load | Action::Store => self.accesses += usize::from(first),
                // The second half is no instruction of its own.
                Action::LdDw => i += 1,
                Action::Call if first && (w >> 12) & 15 == 1 => {
                    self.calls += 1;
                    let imm = (w >> 32) as i32;
                    self.call_targets
                        .push((i as i64 + 1 + i64::from(imm)) as usize);
                }
                Action::Call if (w >> 12) & 15 == 0 => self.helper_calls = true,
                _ => {}
            }
            i += 1;
        }
        backward
    }

    /// The eBPF registers to pin, most used first (ties: the lower number).
    pub fn pins(&self) -> ([u8; PINS], usize) {
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
