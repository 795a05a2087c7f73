//! Unit tests of per-thread write windows (x86-64 Linux with protection keys): outside a
//! window no thread can write code, inside one only the thread that opened it; a signal
//! handler inside a window cannot write code and does not close or keep open the window;
//! windows nest and close in any order; the symbol resolver runs with the window closed.
//!
//! Each write is a probe: a SIGSEGV it causes is caught and the probe reports the fault's
//! `si_code` and key (a fault anywhere else still kills the process). Where the processor
//! has no keys the tests have nothing to check and return, unless
//! `CPJIT_EXPECT_PROTECTION_KEYS` is set (as in the QEMU row whose CPU has keys): then a
//! missing key fails them.

use super::pkey::{self, read_pkru, WriteAccess};
use super::{granularity, imp, CodeObject, Region};
use std::cell::Cell;
use std::sync::Once;

/// `si_code` of a write denied by the page's protection, and by its key's rights.
const SEGV_ACCERR: i32 = 2;
const SEGV_PKUERR: i32 = 4;

thread_local! {
    /// Where a probe on this thread resumes after its write faults (0: no probe running).
    static RESUME: Cell<usize> = const { Cell::new(0) };
    /// The last probe's fault on this thread: `si_code` and the key (0 if none).
    static FAULT: Cell<(i32, u32)> = const { Cell::new((0, 0)) };
}

/// The SIGSEGV handler of the probes: a fault of a running probe resumes after its write;
/// any other restores the default action and returns, so the fault repeats and kills.
extern "C" fn on_fault(_: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let resume = RESUME.with(|r| r.replace(0));
    if resume == 0 {
        // SAFETY: resetting a signal's action is async-signal-safe.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        return;
    }
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler;
    // for SEGV_PKUERR the key is the u32 after si_addr and si_addr_lsb (offset 32).
    unsafe {
        let code = (*info).si_code;
        let key = *((info as *const u8).add(32) as *const u32);
        FAULT.with(|f| f.set((code, if code == SEGV_PKUERR { key } else { 0 })));
        let context = &mut *(context as *mut libc::ucontext_t);
        context.uc_mcontext.gregs[libc::REG_RIP as usize] = resume as i64;
    }
}

/// Writes `byte` at `at`; `None` if the write was done, else its fault (`si_code`, key).
fn probe_write(at: usize, byte: u8) -> Option<(i32, u32)> {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler, SA_SIGINFO, and no blocked signals.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fault as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            assert_eq!(
                libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()),
                0
            );
        }
    });
    FAULT.with(|f| f.set((0, 0)));
    let resume = RESUME.with(|r| r.as_ptr());
    // SAFETY: stores the address after the write as this thread's resume point, then
    // writes one byte; if the write faults the handler resumes there.
    unsafe {
        std::arch::asm!(
            "lea {t}, [rip + 3f]",
            "mov [{resume}], {t}",
            "mov byte ptr [{at}], {byte}",
            "3:",
            t = out(reg) _,
            resume = in(reg) resume,
            at = in(reg) at,
            byte = in(reg_byte) byte,
        )
    };
    RESUME.with(|r| r.set(0));
    let fault = FAULT.with(|f| f.get());
    (fault.0 != 0).then_some(fault)
}

/// The process's key, or `None` (and the test returns) where there are no keys.
fn key_or_skip() -> Option<u32> {
    let key = pkey::write_key();
    if key.is_none() && std::env::var_os("CPJIT_EXPECT_PROTECTION_KEYS").is_some() {
        panic!("CPJIT_EXPECT_PROTECTION_KEYS is set, but no protection key was allocated");
    }
    key
}

/// A keyed region with its first page committed: (region, its keyed alias's address).
fn keyed_region(key: u32) -> (Region, usize) {
    let g = granularity();
    let mut region = Region::map(g, g, None, &CodeObject::keyed(key)).unwrap();
    region.commit(g, 0).unwrap();
    let alias = imp::object_of(&region).2;
    assert_ne!(alias, 0, "a keyed region has an alias");
    (region, alias)
}

fn code_byte(region: &Region, at: usize) -> u8 {
    // SAFETY: the first page of the RX view is committed; reading it needs no key.
    unsafe { std::ptr::read_volatile((region.code_rx + at) as *const u8) }
}

/// Whether this thread's PKRU denies writes under `key`: its access-disable bit (Linux's
/// initial PKRU, which signal handlers get, sets that one) or its write-disable bit.
fn denied(key: u32) -> bool {
    (read_pkru() >> (2 * key)) & 0b11 != 0
}

#[test]
fn only_the_thread_inside_a_window_writes_code_and_only_until_it_closes() {
    let Some(key) = key_or_skip() else { return };
    let (region, alias) = keyed_region(key);
    let pkey_fault = Some((SEGV_PKUERR, key));
    let rx_fault = Some((SEGV_ACCERR, 0));
    // A thread that exists before the window is opened, and probes while it is open.
    let (to_old, from_main) = std::sync::mpsc::channel::<()>();
    let old = std::thread::spawn(move || {
        from_main.recv().unwrap();
        (probe_write(alias + 512, 1), probe_write(alias + 520, 2))
    });
    assert!(denied(key), "PKRU before any window: {:#x}", read_pkru());
    assert_eq!(
        probe_write(alias, 0x11),
        pkey_fault,
        "the alias outside a window"
    );
    assert_eq!(probe_write(region.code_rx, 0x11), rx_fault, "the RX view");

    let mut writer = region.code_source().open(0, 256).unwrap();
    writer.bytes().fill(0xaa);
    assert!(!denied(key), "PKRU inside the window: {:#x}", read_pkru());
    assert_eq!(probe_write(alias + 300, 0xbb), None, "the opener writes");
    to_old.send(()).unwrap();
    assert_eq!(
        old.join().unwrap(),
        (pkey_fault, pkey_fault),
        "an older thread"
    );
    // A thread that caller code inside the window (the resolver) starts: new threads
    // inherit their creator's PKRU, and caller code runs with the window closed.
    let young = super::closed_while(|| {
        std::thread::spawn(move || (probe_write(alias + 128, 3), denied(key)))
    });
    let (alias_fault, young_denied) = young.join().unwrap();
    assert_eq!(alias_fault, pkey_fault, "a thread the resolver starts");
    assert!(
        young_denied,
        "a thread the resolver starts has the key denied"
    );
    writer.publish().unwrap();

    assert!(denied(key), "PKRU after the window: {:#x}", read_pkru());
    assert_eq!(probe_write(alias + 1, 0x22), pkey_fault, "after publish");
    assert_eq!(code_byte(&region, 0), 0xaa, "the window's write is code");
    assert_eq!(
        code_byte(&region, 1),
        0xaa,
        "the probe after it did not write"
    );
    assert_eq!(code_byte(&region, 300), 0xbb);
    assert_eq!(code_byte(&region, 512), 0, "the older thread did not write");
    assert_eq!(code_byte(&region, 520), 0, "the older thread did not write");
}

thread_local! {
    /// What the SIGUSR1 handler saw: (its PKRU denied the key, its write's fault).
    static IN_HANDLER: Cell<(bool, Option<(i32, u32)>)> = const { Cell::new((false, None)) };
}

static HANDLER_TARGET: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static HANDLER_KEY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn on_usr1(_: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    let key = HANDLER_KEY.load(SeqCst);
    let was_denied = denied(key);
    let fault = probe_write(HANDLER_TARGET.load(SeqCst), 0x5a);
    IN_HANDLER.with(|h| h.set((was_denied, fault)));
}

#[test]
fn a_signal_inside_a_window_neither_writes_code_nor_leaves_the_window_open() {
    use std::sync::atomic::Ordering::SeqCst;
    let Some(key) = key_or_skip() else { return };
    let (region, alias) = keyed_region(key);
    HANDLER_TARGET.store(alias + 8, SeqCst);
    HANDLER_KEY.store(key, SeqCst);
    // SAFETY: installs a handler for SIGUSR1, which nothing else in this process uses.
    unsafe { libc::signal(libc::SIGUSR1, on_usr1 as *const () as usize) };

    let mut writer = region.code_source().open(0, 32).unwrap();
    writer.bytes().fill(0xcc);
    // SAFETY: raise delivers the signal to this thread before it returns.
    assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
    let (handler_denied, handler_fault) = IN_HANDLER.with(|h| h.get());
    assert!(handler_denied, "the handler ran with the key denied");
    assert_eq!(
        handler_fault,
        Some((SEGV_PKUERR, key)),
        "the handler's write"
    );
    // Back from the handler the window is as it was: still open to its writer.
    assert!(
        !denied(key),
        "the window after the handler: {:#x}",
        read_pkru()
    );
    writer.bytes()[16..].fill(0xdd);
    writer.publish().unwrap();
    assert!(denied(key), "closed after publish: {:#x}", read_pkru());
    // The handler's byte (at 8) was not written; the writer's were.
    let bytes: Vec<u8> = (0..32).map(|i| code_byte(&region, i)).collect();
    assert_eq!(&bytes[..16], &[0xcc; 16], "{bytes:x?}");
    assert_eq!(&bytes[16..], &[0xdd; 16], "{bytes:x?}");
    // SAFETY: restores SIGUSR1's default action.
    unsafe { libc::signal(libc::SIGUSR1, libc::SIG_DFL) };
}

#[test]
fn windows_nest_close_in_any_order_and_close_around_caller_code() {
    let Some(key) = key_or_skip() else { return };
    let (_region, alias) = keyed_region(key);
    let first = WriteAccess::open(key);
    let second = WriteAccess::open(key);
    drop(first);
    assert_eq!(
        probe_write(alias, 1),
        None,
        "the second window is still open"
    );
    let inside = super::closed_while(|| (denied(key), probe_write(alias, 2)));
    assert_eq!(
        inside,
        (true, Some((SEGV_PKUERR, key))),
        "caller code runs closed"
    );
    assert_eq!(
        probe_write(alias, 3),
        None,
        "and the window opens again after it"
    );
    drop(second);
    assert!(denied(key));
    assert_eq!(probe_write(alias, 4), Some((SEGV_PKUERR, key)));
    // Outside any window, caller code runs as it is.
    assert!(super::closed_while(|| denied(key)));
}

#[test]
fn an_error_or_a_panic_inside_a_window_closes_it() {
    let Some(key) = key_or_skip() else { return };
    let (region, _alias) = keyed_region(key);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut writer = region.code_source().open(0, 16).unwrap();
        writer.bytes()[0] = 0x90;
        panic!("in the window");
    }));
    assert!(panicked.is_err());
    assert!(denied(key), "after a panic: {:#x}", read_pkru());
    // Dropped without publishing (an error of the write stage): closed too.
    let writer = region.code_source().open(0, 16).unwrap();
    drop(writer);
    assert!(denied(key), "after a dropped writer: {:#x}", read_pkru());
}
