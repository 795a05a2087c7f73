//! Per-thread write windows with memory protection keys (x86-64 Linux with `pku`/`ospke`).
//!
//! The process allocates one protection key, once, the first time a JIT asks for it; every
//! arena that writes with keys maps its code object a second time read-write (never
//! executable) and tags that alias with the key (`pkey_mprotect`). A thread may write
//! through the alias only while its own PKRU register grants the key, and it grants it only
//! inside a *write window* ([`WriteAccess`]): opened when a [`CodeWriter`](super::CodeWriter)
//! is opened, closed when it is dropped, on every path (publish, error, unwinding). Outside
//! windows every thread's PKRU denies the key:
//!
//! - threads that existed before the key, and every signal handler, run with Linux's initial
//!   PKRU (`init_pkru`), which denies access to every key but 0;
//! - the thread that allocates the key denies it to itself (`pkey_alloc`'s initial rights);
//! - new threads inherit their creator's PKRU, and no thread creates one inside a window:
//!   the only caller code a window runs is the JIT's symbol resolver, and the window is
//!   closed around it ([`closed_while`]);
//! - a window that closes always *sets* the key's two bits (access and write disabled), so
//!   a thread leaves any window with the key denied, whatever it held before.
//!
//! (What no code of the kit can rule out: a thread that writes PKRU itself, or one whose
//! PKRU granted this key's number for a key it had freed before the kit allocated it.)
//!
//! The executable view of the code keeps key 0, which every thread and signal handler may
//! read: debuggers, profilers, unwinders and disassemblers read code bytes there, from any
//! thread, as before. Code executes whatever the key: keys do not apply to instruction
//! fetches. And no mapping is ever writable and executable: the keyed alias is `rw-`.
//!
//! Opening and closing a window is a `rdpkru` and a `wrpkru` each (tens of cycles), against
//! a `pwrite` per trace (0.3–0.5 µs) without keys.

use std::cell::Cell;
use std::io;

/// The environment variable that turns protection keys off for every JIT of the process
/// (any value but empty or `0`): code is then written as where keys are missing.
pub(crate) const NO_KEYS_VARIABLE: &str = "CPJIT_NO_PROTECTION_KEYS";

/// `pkey_alloc`'s initial rights: access and writes disabled for the calling thread.
const PKEY_DISABLE_ACCESS: libc::c_ulong = 0x1;
const PKEY_DISABLE_WRITE: libc::c_ulong = 0x2;

/// The key that guards code writes in this process, if keys are to be used: `None` when
/// [`NO_KEYS_VARIABLE`] is set, or when the processor or kernel has no protection keys
/// (`pkey_alloc` fails: `ENOSYS`, `EINVAL` without `ospke`, `ENOSPC` with all 15 in use).
pub(crate) fn write_key() -> Option<u32> {
    let off = std::env::var_os(NO_KEYS_VARIABLE).is_some_and(|v| !v.is_empty() && v != "0");
    if off {
        return None;
    }
    process_key()
}

/// The process's one key, allocated on first use and never freed: a freed key's number
/// could be handed to other code while some thread's PKRU still grants it. `None` also
/// when a page cannot be tagged with it (a kernel or policy that refuses `pkey_mprotect`):
/// then the key is given back and code is written without keys.
fn process_key() -> Option<u32> {
    static KEY: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        // SAFETY: pkey_alloc takes flags (0) and initial rights and has no memory effects.
        let key = unsafe {
            libc::syscall(
                libc::SYS_pkey_alloc,
                0 as libc::c_ulong,
                PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE,
            )
        };
        let key = u32::try_from(key).ok()?;
        if tags_a_page(key) {
            return Some(key);
        }
        // SAFETY: the key was allocated above and nothing uses it.
        unsafe { libc::syscall(libc::SYS_pkey_free, key as libc::c_int) };
        None
    })
}

/// Whether a fresh anonymous page can be tagged with `key` (unmapped after).
fn tags_a_page(key: u32) -> bool {
    let page = super::page_size();
    // SAFETY: a fresh private mapping, placed by the kernel, unmapped below.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANON,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return false;
    }
    let tagged = protect(at as usize, page, key).is_ok();
    // SAFETY: our own mapping from above; nothing refers to it.
    unsafe { libc::munmap(at, page) };
    tagged
}

/// Tags `len` bytes at `at` (page-aligned, mapped) readable and writable under `key`, so
/// that only threads whose PKRU grants the key can write them.
pub(crate) fn protect(at: usize, len: usize, key: u32) -> io::Result<()> {
    // SAFETY: changes the protection of pages the caller owns (a region's alias).
    let done = unsafe {
        libc::syscall(
            libc::SYS_pkey_mprotect,
            at as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            key as libc::c_int,
        )
    };
    if done != 0 {
        return Err(super::os_error(&format!(
            "pkey_mprotect (the code's keyed alias, key {key}; {NO_KEYS_VARIABLE}=1 writes \
             code without keys)"
        )));
    }
    Ok(())
}

thread_local! {
    /// How many write windows this thread has open (a batch's writer and a freed trace's
    /// may nest): the key is granted while this is above 0.
    static OPEN: Cell<u32> = const { Cell::new(0) };
}

/// This thread's write window on code guarded by a key: the key is granted from
/// [`open`](WriteAccess::open) until the last open window of the thread is dropped.
pub(crate) struct WriteAccess {
    key: u32,
    /// PKRU is per thread: the window must close on the thread that opened it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl WriteAccess {
    /// Grants `key` (one of [`write_key`]'s) to this thread until the window is dropped.
    pub(crate) fn open(key: u32) -> WriteAccess {
        let depth = OPEN.get();
        if depth == 0 {
            set_denied(key, false);
        }
        OPEN.set(depth + 1);
        WriteAccess {
            key,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for WriteAccess {
    fn drop(&mut self) {
        let depth = OPEN.get() - 1;
        OPEN.set(depth);
        if depth == 0 {
            set_denied(self.key, true);
        }
    }
}

/// Runs `f` with this thread's write window closed, if one is open, and opens it again
/// after: for caller code that a write window would otherwise run inside (the symbol
/// resolver), so that neither it nor a thread it creates can write code.
pub(crate) fn closed_while<R>(f: impl FnOnce() -> R) -> R {
    let key = match OPEN.get() {
        0 => return f(),
        // Inside a window, a key was granted: the process's one.
        _ => process_key().expect("a write window is open without a key"),
    };
    set_denied(key, true);
    let result = f();
    set_denied(key, false);
    result
}

/// Sets (`denied`) or clears the access- and write-disable bits of `key` in this thread's
/// PKRU.
fn set_denied(key: u32, denied: bool) {
    let bits = 0b11 << (2 * key);
    let pkru = read_pkru();
    write_pkru(if denied { pkru | bits } else { pkru & !bits });
}

/// This thread's PKRU. Only called once a key was allocated, which proves `ospke`.
#[cfg(target_arch = "x86_64")]
pub(crate) fn read_pkru() -> u32 {
    let pkru: u32;
    // SAFETY: rdpkru (ecx = 0) reads the register into eax and clears edx; `ospke` is on.
    unsafe {
        std::arch::asm!("rdpkru", in("ecx") 0, out("eax") pkru, out("edx") _,
            options(nomem, nostack, preserves_flags))
    };
    pkru
}

/// Writes this thread's PKRU (see [`read_pkru`]).
#[cfg(target_arch = "x86_64")]
fn write_pkru(pkru: u32) {
    // SAFETY: wrpkru (ecx = edx = 0) changes only this thread's rights to keyed pages; it
    // orders memory accesses around it, so no write of the window moves past its close.
    unsafe {
        std::arch::asm!("wrpkru", in("eax") pkru, in("ecx") 0, in("edx") 0,
            options(nostack, preserves_flags))
    };
}

// Without x86-64 no key is ever allocated, so no window is ever opened.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn read_pkru() -> u32 {
    unreachable!("protection keys are used on x86-64 only")
}

#[cfg(not(target_arch = "x86_64"))]
fn write_pkru(_pkru: u32) {
    unreachable!("protection keys are used on x86-64 only")
}
