//! RISC-V call pairs relaxed to `jal` + `nop` within a `jal`'s reach, and patched again:
//! the reach's edges, a relaxed site moved out of reach and back (the bytes on every host;
//! the code run under riscv64, where the matrix runs it under qemu), and a site that is
//! neither form refused. `patch_fixtures.rs` compares the relaxed bytes with ld.lld-19's.

use cpjit_runtime::model::HoleKind;
use cpjit_runtime::patch::{patch, Problem};

/// `auipc ra, 0` + `jalr ra, 0(ra)` (`call`) and `auipc t1, 0` + `jr t1` (`tail`), fields
/// zero, as llvm-mc-19 assembles them (`elf_riscv64_relax.orig.bin`).
const CALL: [u8; 8] = [0x97, 0, 0, 0, 0xe7, 0x80, 0, 0];
const TAIL: [u8; 8] = [0x17, 0x03, 0, 0, 0x67, 0, 0x03, 0];
const NOP: u32 = 0x0000_0013;
const PLACE: u64 = 0x4000_1000;

fn words(site: &[u8]) -> [u32; 2] {
    let w = |i: usize| u32::from_le_bytes(site[i..i + 4].try_into().unwrap());
    [w(0), w(4)]
}

fn patched(site: [u8; 8], place: u64, value: u64) -> [u8; 8] {
    let mut code = site;
    patch(HoleKind::RiscvCall, &mut code, 0, place, value).unwrap();
    code
}

fn is_relaxed(site: &[u8]) -> bool {
    let [first, second] = words(site);
    first & 0x7f == 0x6f && second == NOP
}

#[test]
fn relaxation_stops_exactly_at_the_jal_reach() {
    for site in [CALL, TAIL] {
        for (distance, relaxed) in [
            (0xffffei64, true),
            (0x10_0000, false),
            (-0x10_0000, true),
            (-0x10_0002, false),
            (0, true),
        ] {
            let value = PLACE.wrapping_add(distance as u64);
            let code = patched(site, PLACE, value);
            assert_eq!(is_relaxed(&code), relaxed, "{site:02x?} {distance:#x}");
        }
    }
    // `jal ra, 0xffffe` and `j -0x100000` as llvm-mc-19 encodes them.
    let call = patched(CALL, PLACE, PLACE + 0xffffe);
    assert_eq!(words(&call), [0x7fff_f0ef, NOP]);
    let tail = patched(TAIL, PLACE, PLACE - 0x10_0000);
    assert_eq!(words(&tail), [0x8000_006f, NOP]);
}

/// A relaxed site patched out of reach is the pair the stencil's bytes give for that value
/// (the call's `auipc ra`, the jump's `auipc t1`), and patched back it is relaxed again.
#[test]
fn a_relaxed_site_is_patched_out_of_reach_and_back() {
    let near = PLACE + 0x8_0000;
    for site in [CALL, TAIL] {
        for far in [PLACE + 0x10_0000, PLACE - 0x3000_0000, PLACE + 0x7fff_0000] {
            let mut code = patched(site, PLACE, near);
            assert!(is_relaxed(&code));
            patch(HoleKind::RiscvCall, &mut code, 0, PLACE, far).unwrap();
            assert_eq!(code, patched(site, PLACE, far), "{site:02x?} to {far:#x}");
            assert!(!is_relaxed(&code));
            patch(HoleKind::RiscvCall, &mut code, 0, PLACE, near).unwrap();
            assert_eq!(code, patched(site, PLACE, near));
        }
    }
    // Out of even the pair's reach: refused, the relaxed bytes kept.
    let mut code = patched(CALL, PLACE, near);
    let before = code;
    let error = patch(HoleKind::RiscvCall, &mut code, 0, PLACE, PLACE + (1 << 32)).unwrap_err();
    assert!(
        matches!(error.problem, Problem::OutOfRange { .. }),
        "{error}"
    );
    assert_eq!(code, before);
}

/// `jal` followed by anything but a `nop` is neither a call pair nor a relaxed one.
#[test]
fn a_jal_without_its_nop_is_refused() {
    let mut code = patched(TAIL, PLACE, PLACE + 0x100);
    code[4..].copy_from_slice(&0x0000_8067u32.to_le_bytes()); // ret
    let before = code;
    let error = patch(HoleKind::RiscvCall, &mut code, 0, PLACE, PLACE + 0x200).unwrap_err();
    assert!(
        matches!(error.problem, Problem::UnexpectedInstruction { .. }),
        "{error}"
    );
    assert_eq!(code, before);
}

/// The sites run: a call and a jump, each relaxed to a target 4 KiB away, patched to one
/// 2 MiB away (out of reach) and back, and executed after each patch.
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
#[test]
fn relaxed_sites_run_when_patched_out_of_reach_and_back() {
    const SIZE: usize = 4 << 20;
    const NEAR: usize = 0x1000;
    const FAR: usize = 0x20_0000;
    // SAFETY: a fresh private anonymous mapping, unmapped at the end.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    // SAFETY: the mapping is SIZE bytes, readable and writable until protected below.
    let code = unsafe { std::slice::from_raw_parts_mut(base.cast::<u8>(), SIZE) };
    let put = |code: &mut [u8], at: usize, insns: &[u32]| {
        for (i, w) in insns.iter().enumerate() {
            code[at + 4 * i..at + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
    };
    // At 0, a function calling the site at 8 and adding 100; at 0x40, the jump site alone
    // (its target returns to this function's caller); `li a0, 1; ret` and `li a0, 2; ret`.
    let (addi_sp, sd_ra, add_100) = (0xff01_0113, 0x0011_3423, 0x0645_0513);
    let (ld_ra, free_sp, ret) = (0x0081_3083, 0x0101_0113, 0x0000_8067);
    put(
        code,
        0,
        &[addi_sp, sd_ra, 0, 0, add_100, ld_ra, free_sp, ret],
    );
    code[8..16].copy_from_slice(&CALL);
    code[0x40..0x48].copy_from_slice(&TAIL);
    put(code, NEAR, &[0x0010_0513, ret]);
    put(code, FAR, &[0x0020_0513, ret]);
    let start = base as u64;
    let protect = |prot| {
        // SAFETY: the mapping's own range.
        assert_eq!(unsafe { libc::mprotect(base, SIZE, prot) }, 0);
    };
    let run = |at: usize| -> i64 {
        protect(libc::PROT_READ | libc::PROT_EXEC);
        const SYS_RISCV_FLUSH_ICACHE: libc::c_long = 259;
        let end = start + SIZE as u64;
        // SAFETY: fetches of the written range synchronized on every hart of the process.
        let flushed = unsafe { libc::syscall(SYS_RISCV_FLUSH_ICACHE, start, end, 0usize) };
        assert_eq!(flushed, 0);
        // SAFETY: `at` starts a function of the code written above (C ABI, no argument).
        let f: extern "C" fn() -> i64 = unsafe { std::mem::transmute(start + at as u64) };
        let result = f();
        protect(libc::PROT_READ | libc::PROT_WRITE);
        result
    };
    for (site, at, add) in [(8, 0, 100), (0x40, 0x40, 0)] {
        for (target, expected, relaxed) in [(NEAR, 1, true), (FAR, 2, false), (NEAR, 1, true)] {
            let place = start + site as u64;
            let value = start + target as u64;
            patch(HoleKind::RiscvCall, code, site, place, value).unwrap();
            assert_eq!(is_relaxed(&code[site..site + 8]), relaxed, "{site:#x}");
            assert_eq!(run(at), expected + add, "site {site:#x} to {target:#x}");
        }
    }
    // SAFETY: the mapping made above; nothing refers to it any more.
    assert_eq!(unsafe { libc::munmap(base, SIZE) }, 0);
}
