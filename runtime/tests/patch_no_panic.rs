//! Property test: no patch function panics on any input, an error never writes, and a
//! success writes only the hole (or, for relaxations, the instruction it belongs to).

use cpjit_runtime::model::HoleKind;
use cpjit_runtime::patch::{
    in_range, patch, relax_aarch64_got_pair, relax_x86_got_load, relax_x86_got_load_constant,
    Problem,
};

/// Seeded, so a failure reproduces; with the draws the patch inputs need.
struct Rng(fastrand::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }

    /// Mostly small distances around `base` (where the range limits are), sometimes anything.
    fn value_near(&mut self, base: u64) -> u64 {
        match self.below(4) {
            0 => self.next(),
            1 => base.wrapping_add(self.next() >> (self.below(64) as u32)),
            2 => base.wrapping_sub(self.next() >> (self.below(64) as u32)),
            _ => base.wrapping_add(self.below(64) << 12) & !3,
        }
    }

    /// Random bytes, seeded with opcodes the checks look for so that they pass sometimes.
    fn code(&mut self) -> Vec<u8> {
        const INTERESTING: [u8; 12] = [
            0x05, 0x15, 0x25, 0x48, 0x4c, 0x8b, 0x0f, 0x85, 0xe8, 0xe9, 0xff, 0x90,
        ];
        let len = self.below(24) as usize;
        (0..len)
            .map(|_| match self.below(3) {
                0 => INTERESTING[self.below(INTERESTING.len() as u64) as usize],
                _ => self.next() as u8,
            })
            .collect()
    }
}

/// Bytes outside `allowed` are unchanged.
fn only_changed(before: &[u8], after: &[u8], allowed: std::ops::Range<usize>, what: &str) {
    assert_eq!(before.len(), after.len());
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        assert!(b == a || allowed.contains(&i), "{what}: byte {i} changed");
    }
}

#[test]
fn random_inputs_never_panic_and_errors_never_write() {
    let mut rng = Rng(fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15));
    // Successes per function: the generator must reach the write paths, not only the errors.
    let mut successes = [0u32; 4];
    for _ in 0..200_000 {
        let kind = HoleKind::ALL[rng.below(HoleKind::ALL.len() as u64) as usize];
        let mut code = rng.code();
        // AArch64 words get a real opcode often enough to reach the range checks.
        if kind.arch() == Some(cpjit_runtime::model::Arch::Aarch64) && code.len() >= 4 {
            const OPCODES: [u32; 9] = [
                0x9400_0000,
                0x5400_0000,
                0x3400_0000,
                0x3600_0000,
                0x9000_0000,
                0x9100_0000,
                0xf940_0000,
                0x3dc0_0000,
                0xf280_0000,
            ];
            let op = OPCODES[rng.below(OPCODES.len() as u64) as usize] | (rng.next() as u32 & 0x1f);
            code[..4].copy_from_slice(&op.to_le_bytes());
        }
        let offset = match rng.below(8) {
            0 => usize::MAX - rng.below(8) as usize,
            _ => rng.below(code.len() as u64 + 2) as usize,
        };
        // Sometimes plant a relaxable GOT form: x86 `mov r64, [rip+G]` before the hole, or
        // an AArch64 `adrp xN` + `ldr xN, [xN]` pair at the hole.
        if rng.below(4) == 0 && offset >= 3 && offset < code.len() {
            let reg = rng.below(32) as u8;
            code[offset - 3] = 0x48 | (reg >> 3 & 1) << 2;
            code[offset - 2] = 0x8b;
            code[offset - 1] = 0x05 | (reg & 7) << 3;
        }
        let mut ldr_offset = rng.below(code.len() as u64 + 4) as usize;
        if rng.below(3) == 0 && offset.saturating_add(8) <= code.len() {
            let reg = rng.below(32) as u32;
            ldr_offset = offset + 4;
            code[offset..offset + 4].copy_from_slice(&(0x9000_0000 | reg).to_le_bytes());
            let ldr = 0xf940_0000 | reg << 5 | reg;
            code[ldr_offset..ldr_offset + 4].copy_from_slice(&ldr.to_le_bytes());
        }
        let place = rng.next() & !3;
        let value = match rng.below(4) {
            0 => rng.next() >> rng.below(64),
            _ => rng.value_near(place),
        };
        let before = code.clone();

        match patch(kind, &mut code, offset, place, value) {
            Ok(()) => {
                successes[0] += 1;
                assert!(in_range(kind, place, value), "{kind}");
                only_changed(&before, &code, offset..offset + kind.width(), kind.name());
                // Patching again with the same value changes nothing.
                let once = code.clone();
                patch(kind, &mut code, offset, place, value).unwrap();
                assert_eq!(code, once, "{kind}: re-patch");
            }
            Err(e) => {
                assert_eq!(code, before, "{kind}: {e}");
                if matches!(
                    e.problem,
                    Problem::OutOfRange { .. } | Problem::Misaligned { .. }
                ) {
                    assert!(!in_range(kind, place, value), "{e}");
                }
                let _ = e.to_string();
            }
        }

        let mut code = before.clone();
        let around = offset.saturating_sub(3)..offset.saturating_add(4);
        match relax_x86_got_load(&mut code, offset, place, value) {
            Ok(true) => {
                successes[1] += 1;
                only_changed(&before, &code, around.clone(), "relax_x86_got_load")
            }
            Ok(false) | Err(_) => assert_eq!(code, before),
        }
        let mut code = before.clone();
        match relax_x86_got_load_constant(
            HoleKind::X86RexGotPc32Relaxable,
            &mut code,
            offset,
            value,
        ) {
            Ok(true) => {
                successes[2] += 1;
                only_changed(&before, &code, around, "relax_x86_got_load_constant")
            }
            Ok(false) | Err(_) => assert_eq!(code, before),
        }
        let mut code = before.clone();
        match relax_aarch64_got_pair(&mut code, offset, ldr_offset, place, value) {
            Ok(true) => {
                successes[3] += 1;
                for (i, (b, a)) in before.iter().zip(&code).enumerate() {
                    let in_adrp = (offset..offset + 4).contains(&i);
                    let in_ldr = (ldr_offset..ldr_offset + 4).contains(&i);
                    assert!(
                        b == a || in_adrp || in_ldr,
                        "relax_aarch64_got_pair: byte {i}"
                    );
                }
            }
            Ok(false) | Err(_) => assert_eq!(code, before),
        }
    }
    assert!(
        successes.iter().all(|&n| n >= 50),
        "successes: {successes:?}"
    );
}
