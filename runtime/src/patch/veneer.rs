//! Veneers: 16-byte stubs that reach any 64-bit address, for direct branches whose target
//! is out of range. The assembler places one within range of the branch and patches the
//! branch to the veneer instead.
//!
//! Both use only what a branch at a call boundary may clobber: x86-64 jumps through memory
//! (no register at all); AArch64 uses `x16`, an intra-procedure-call scratch register that
//! the procedure-call standard reserves for exactly this (CPython's veneer used `x8`, which
//! may still hold a live argument: GH-157510).

/// Size in bytes of either veneer.
pub const VENEER_SIZE: usize = 16;

/// `jmp *0(%rip)` (`ff 25 00 00 00 00`), the 8-byte target, then two `int3` as padding.
pub fn x86_64_veneer(target: u64) -> [u8; VENEER_SIZE] {
    let mut v = [0xcc; VENEER_SIZE];
    v[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    v[6..14].copy_from_slice(&target.to_le_bytes());
    v
}

/// `ldr x16, #8` (`0x58000050`), `br x16` (`0xd61f0200`), then the 8-byte target (which
/// is 8-aligned when the veneer is).
pub fn aarch64_veneer(target: u64) -> [u8; VENEER_SIZE] {
    let mut v = [0; VENEER_SIZE];
    v[..4].copy_from_slice(&0x5800_0050u32.to_le_bytes());
    v[4..8].copy_from_slice(&0xd61f_0200u32.to_le_bytes());
    v[8..].copy_from_slice(&target.to_le_bytes());
    v
}
