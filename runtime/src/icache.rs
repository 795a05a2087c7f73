//! Instruction-cache coherence after code is written.
//!
//! AArch64 has separate, non-coherent instruction and data caches: code bytes written (by
//! `pwrite` or through a writable view) must be cleaned to the point of unification and the
//! stale instructions invalidated before the RX view executes them. RISC-V needs `fence.i` on every hart that
//! may run the code (the `riscv_flush_icache` system call on Linux). x86-64 keeps the caches coherent in
//! hardware (a new trace is only reachable after `finish` returns, which orders the writes).
//!
//! qemu-user does not model the instruction cache, so a missing flush goes unnoticed when
//! aarch64 tests run under emulation (and qemu ignores `ic ivau`; its own cache of
//! translated code is handled by remapping freed code, see `Region::retire_code`). That is why every flush goes through the
//! [`FlushIcache`] hook: a unit test substitutes a recorder and checks that exactly the
//! written code range is flushed, while the execution tests under qemu run the real
//! instructions below.

/// Makes `len` bytes of freshly written code starting at RX address `start` executable.
pub(crate) trait FlushIcache: Send + Sync {
    fn flush(&self, start: usize, len: usize);
}

/// The platform's real flush.
pub(crate) struct Hardware;

impl FlushIcache for Hardware {
    fn flush(&self, start: usize, len: usize) {
        if len != 0 {
            flush_icache(start, len);
        }
    }
}

/// AArch64 Linux (and other non-Apple, non-Windows unix): the architectural sequence
/// `dc cvau` / `dsb ish` / `ic ivau` / `dsb ish` / `isb`, line sizes from `CTR_EL0`.
#[cfg(all(target_arch = "aarch64", not(target_vendor = "apple"), not(windows)))]
fn flush_icache(start: usize, len: usize) {
    use std::arch::asm;
    let ctr: u64;
    // SAFETY: CTR_EL0 is readable from EL0 on Linux (the kernel traps and emulates it if not).
    unsafe { asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
    let dline = 4usize << ((ctr >> 16) & 0xf);
    let iline = 4usize << (ctr & 0xf);
    let end = start + len;
    // CTR_EL0.IDC: data cleaning to the point of unification is not required.
    if ctr & (1 << 28) == 0 {
        let mut line = start & !(dline - 1);
        while line < end {
            // SAFETY: `line` lies in a readable mapping (the RX view of the written code).
            unsafe { asm!("dc cvau, {}", in(reg) line, options(nostack)) };
            line += dline;
        }
    }
    // SAFETY: barriers and cache maintenance on readable addresses only.
    unsafe { asm!("dsb ish", options(nostack)) };
    // CTR_EL0.DIC: instruction invalidation to the point of unification is not required.
    if ctr & (1 << 29) == 0 {
        let mut line = start & !(iline - 1);
        while line < end {
            // SAFETY: as for `dc cvau`: `line` lies in the readable RX view of the code.
            unsafe { asm!("ic ivau, {}", in(reg) line, options(nostack)) };
            line += iline;
        }
        // SAFETY: a barrier; it touches no memory.
        unsafe { asm!("dsb ish", options(nostack)) };
    }
    // SAFETY: a barrier; it touches no memory.
    unsafe { asm!("isb", options(nostack)) };
}

#[cfg(all(target_arch = "aarch64", target_vendor = "apple"))]
fn flush_icache(start: usize, len: usize) {
    extern "C" {
        fn sys_icache_invalidate(start: *mut std::ffi::c_void, len: usize);
    }
    // SAFETY: `start..start + len` is mapped code.
    unsafe { sys_icache_invalidate(start as *mut _, len) };
}

#[cfg(windows)]
fn flush_icache(start: usize, len: usize) {
    use windows_sys::Win32::System::Diagnostics::Debug::FlushInstructionCache;
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    // SAFETY: `start..start + len` is mapped code of this process.
    unsafe { FlushInstructionCache(GetCurrentProcess(), start as *const _, len) };
}

/// RISC-V Linux: `fence.i` only orders the calling hart's own fetches, and the thread may
/// migrate (or another thread run the trace) on another hart, so ask the kernel
/// (`riscv_flush_icache`, flags 0: every hart of the process).
#[cfg(all(target_arch = "riscv64", target_os = "linux"))]
fn flush_icache(start: usize, len: usize) {
    const SYS_RISCV_FLUSH_ICACHE: libc::c_long = 259;
    // SAFETY: the syscall only synchronizes instruction fetch; the range is mapped code.
    let r = unsafe { libc::syscall(SYS_RISCV_FLUSH_ICACHE, start, start + len, 0usize) };
    if r != 0 {
        // Cannot happen for a valid range and zero flags; keep at least this hart coherent.
        // SAFETY: `fence.i` has no operands and no memory effects beyond fetch ordering.
        unsafe { std::arch::asm!("fence.i", options(nostack)) };
    }
}

#[cfg(all(target_arch = "x86_64", not(windows)))]
fn flush_icache(_start: usize, _len: usize) {
    // Coherent in hardware; only keep the compiler from sinking the code writes past here.
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}
