//! The GDB JIT interface: each registered trace becomes a small in-memory ELF object (its
//! code as `.text` at the trace's address, one function symbol per instance) linked into
//! `__jit_debug_descriptor`'s list, and `__jit_debug_register_code` is called, where GDB
//! keeps a breakpoint, to make it read the object. Dropping the `Registration` unlinks
//! it the same way. All list changes happen under one process-wide mutex, as the protocol
//! requires (the descriptor is a single global that GDB reads while the process is
//! stopped in `__jit_debug_register_code`).
//!
//! GDB finds the two symbols by name in the executable's symbol table: a stripped binary
//! cannot be debugged this way. LLDB reads the same interface (set
//! `plugin.jit-loader.gdb.enable on` on macOS, where it is off by default); it accepts ELF
//! objects, so the same object would do for an aarch64/x86-64 Mach-O process, but this has
//! only been tested with GDB on Linux. Windows debuggers do not read this interface: they
//! walk stitched code through the function tables `JitOptions::unwind` registers with
//! `RtlAddFunctionTable` on x86-64 (see [`super::unwind`]), but WinDbg has no JIT symbol
//! interface (ETW events are the profiler route there).

use super::CodeSymbol;
use crate::trace::Trace;
use cpjit_model::Arch;
use std::io::Write as _;
use std::ptr::{addr_of_mut, null_mut};
use std::sync::Mutex;

#[repr(C)]
struct JitCodeEntry {
    next: *mut JitCodeEntry,
    prev: *mut JitCodeEntry,
    symfile_addr: *const u8,
    symfile_size: u64,
}

/// The descriptor GDB reads (layout fixed by GDB's documentation, "JIT Interface").
#[repr(C)]
pub struct JitDescriptor {
    version: u32,
    action_flag: u32,
    relevant_entry: *mut JitCodeEntry,
    first_entry: *mut JitCodeEntry,
}

const JIT_REGISTER_FN: u32 = 1;
const JIT_UNREGISTER_FN: u32 = 2;

// The two symbols GDB looks up by name. On Linux they are *weak* definitions, so that a
// process which also links LLVM (whose GDB listener defines the same two symbols, for the
// same protocol) links without a duplicate and both JITs share LLVM's copies. Rust has no
// stable weak linkage, hence the assembly; `ret` is the same mnemonic on both
// architectures.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
std::arch::global_asm!(
    ".pushsection .data.__jit_debug_descriptor,\"aw\"",
    ".weak __jit_debug_descriptor",
    ".type __jit_debug_descriptor, %object",
    ".balign 8",
    "__jit_debug_descriptor:",
    ".long 1", // version
    ".long 0", // action_flag
    ".quad 0", // relevant_entry
    ".quad 0", // first_entry
    ".size __jit_debug_descriptor, 24",
    ".popsection",
    ".pushsection .text.__jit_debug_register_code,\"ax\"",
    ".weak __jit_debug_register_code",
    ".type __jit_debug_register_code, %function",
    "__jit_debug_register_code:",
    "ret",
    ".size __jit_debug_register_code, . - __jit_debug_register_code",
    ".popsection",
);

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
extern "C" {
    /// Read by GDB; changed only under `LOCK`.
    static mut __jit_debug_descriptor: JitDescriptor;
    /// GDB puts a breakpoint here and reads the descriptor when it is hit.
    fn __jit_debug_register_code();
}

/// Read by GDB; changed only under `LOCK`.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[no_mangle]
#[used]
pub static mut __jit_debug_descriptor: JitDescriptor = JitDescriptor {
    version: 1,
    action_flag: 0,
    relevant_entry: null_mut(),
    first_entry: null_mut(),
};

/// GDB puts a breakpoint here and reads the descriptor when it is hit. It must not be
/// inlined or folded into another empty function, hence the (empty) assembly.
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
///
/// # Safety
/// None: it does nothing. It is `unsafe` only to match the Linux declaration, an external
/// function.
#[no_mangle]
#[inline(never)]
pub unsafe extern "C" fn __jit_debug_register_code() {
    // SAFETY: an empty instruction sequence.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) };
}

static LOCK: Mutex<()> = Mutex::new(());

/// A trace's entry in GDB's list; dropping it unregisters the trace.
pub(crate) struct Registration {
    entry: *mut JitCodeEntry,
    /// The ELF object the entry points into (kept alive, never moved).
    _object: Box<[u8]>,
}

// SAFETY: the entry is only touched under LOCK.
unsafe impl Send for Registration {}
// SAFETY: as for Send: every access goes through LOCK.
unsafe impl Sync for Registration {}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("object_bytes", &self._object.len())
            .finish()
    }
}

/// Registers `trace` with its `symbols` and, if given, its unwind information (an
/// `.eh_frame` section with absolute addresses).
pub(crate) fn register(
    arch: Arch,
    trace: &Trace,
    symbols: &[CodeSymbol<'_>],
    eh_frame: Option<&[u8]>,
) -> Registration {
    let range = trace.code_range();
    let code = trace.code_bytes();
    let object = elf_object(arch, range.start as u64, code, symbols, eh_frame).into_boxed_slice();
    let entry = Box::into_raw(Box::new(JitCodeEntry {
        next: null_mut(),
        prev: null_mut(),
        symfile_addr: object.as_ptr(),
        symfile_size: object.len() as u64,
    }));
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the descriptor and the entries in its list are only changed under LOCK.
    unsafe {
        let d = addr_of_mut!(__jit_debug_descriptor);
        (*entry).next = (*d).first_entry;
        if !(*d).first_entry.is_null() {
            (*(*d).first_entry).prev = entry;
        }
        (*d).first_entry = entry;
        (*d).relevant_entry = entry;
        (*d).action_flag = JIT_REGISTER_FN;
    }
    // SAFETY: an empty function (ours or LLVM's) that GDB breaks in.
    unsafe { __jit_debug_register_code() };
    Registration {
        entry,
        _object: object,
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: as in `register`; `entry` is in the list until here.
        unsafe {
            let d = addr_of_mut!(__jit_debug_descriptor);
            let e = self.entry;
            if (*e).prev.is_null() {
                (*d).first_entry = (*e).next;
            } else {
                (*(*e).prev).next = (*e).next;
            }
            if !(*e).next.is_null() {
                (*(*e).next).prev = (*e).prev;
            }
            (*d).relevant_entry = e;
            (*d).action_flag = JIT_UNREGISTER_FN;
            __jit_debug_register_code();
            (*d).relevant_entry = null_mut();
            (*d).action_flag = 0;
            drop(Box::from_raw(e));
        }
    }
}

/// Number of trace objects currently registered (for tests).
pub fn registered_objects() -> usize {
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = 0;
    // SAFETY: the list is only changed under LOCK.
    unsafe {
        let mut e = (*addr_of_mut!(__jit_debug_descriptor)).first_entry;
        while !e.is_null() {
            n += 1;
            e = (*e).next;
        }
    }
    n
}

/// ELF constants used by [`elf_object`].
const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const STB_GLOBAL: u8 = 1;
const STT_FUNC: u8 = 2;
const ELF_HEADER: usize = 64;
const SECTION_HEADER: usize = 64;
const SYMBOL: usize = 24;

/// One section header's fields (ELF64).
#[derive(Default)]
struct SectionHeader {
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: usize,
    size: usize,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

impl SectionHeader {
    fn write(&self, o: &mut Vec<u8>) {
        o.extend_from_slice(&self.name.to_le_bytes());
        o.extend_from_slice(&self.kind.to_le_bytes());
        o.extend_from_slice(&self.flags.to_le_bytes());
        o.extend_from_slice(&self.addr.to_le_bytes());
        o.extend_from_slice(&(self.offset as u64).to_le_bytes());
        o.extend_from_slice(&(self.size as u64).to_le_bytes());
        o.extend_from_slice(&self.link.to_le_bytes());
        o.extend_from_slice(&self.info.to_le_bytes());
        o.extend_from_slice(&self.align.to_le_bytes());
        o.extend_from_slice(&self.entsize.to_le_bytes());
    }
}

/// A relocatable ELF64 little-endian object whose `.text` holds `code` at address `base`
/// (sections of a JIT object carry their run-time addresses, as GDB expects) with one
/// global function symbol per entry of `symbols` (at absolute addresses inside `.text`).
///
/// Sections: null, `.text`, `.symtab`, `.strtab`, `.shstrtab`, and `.eh_frame` if given
/// (GDB unwinds with it; its addresses are absolute, so where it lies does not matter).
pub(crate) fn elf_object(
    arch: Arch,
    base: u64,
    code: &[u8],
    symbols: &[CodeSymbol<'_>],
    eh_frame: Option<&[u8]>,
) -> Vec<u8> {
    let machine: u16 = match arch {
        Arch::X86_64 => 62,
        Arch::Aarch64 => 183,
        Arch::Riscv64 => 243, // EM_RISCV
    };
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0.eh_frame\0";
    let eh_frame = eh_frame.unwrap_or_default();
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; SYMBOL]; // the null symbol
    for s in symbols {
        let name = strtab.len() as u32;
        let _ = write!(strtab, "{s}");
        strtab.push(0);
        symtab.extend_from_slice(&name.to_le_bytes());
        symtab.push((STB_GLOBAL << 4) | STT_FUNC);
        symtab.push(0);
        // Section .text (1); in a relocatable object a symbol's value is its offset in
        // its section.
        symtab.extend_from_slice(&1u16.to_le_bytes());
        symtab.extend_from_slice(&(s.start - base).to_le_bytes());
        symtab.extend_from_slice(&s.size.to_le_bytes());
    }
    // Layout: header, .text, .symtab (8-aligned), .strtab, .shstrtab, .eh_frame
    // (8-aligned), section headers.
    let text = SectionHeader {
        name: 1,
        kind: SHT_PROGBITS,
        flags: SHF_ALLOC | SHF_EXECINSTR,
        addr: base,
        offset: ELF_HEADER,
        size: code.len(),
        align: 16,
        ..SectionHeader::default()
    };
    let symtab_header = SectionHeader {
        name: 7,
        kind: SHT_SYMTAB,
        offset: (text.offset + code.len()).next_multiple_of(8),
        size: symtab.len(),
        link: 3,
        info: 1,
        align: 8,
        entsize: SYMBOL as u64,
        ..SectionHeader::default()
    };
    let strtab_header = SectionHeader {
        name: 15,
        kind: SHT_STRTAB,
        offset: symtab_header.offset + symtab.len(),
        size: strtab.len(),
        align: 1,
        ..SectionHeader::default()
    };
    let shstrtab_header = SectionHeader {
        name: 23,
        kind: SHT_STRTAB,
        offset: strtab_header.offset + strtab.len(),
        size: shstrtab.len(),
        align: 1,
        ..SectionHeader::default()
    };
    let eh_frame_header = SectionHeader {
        name: 33,
        kind: SHT_PROGBITS,
        flags: SHF_ALLOC,
        addr: eh_frame.as_ptr() as u64,
        offset: (shstrtab_header.offset + shstrtab.len()).next_multiple_of(8),
        size: eh_frame.len(),
        align: 8,
        ..SectionHeader::default()
    };
    let headers_at = (eh_frame_header.offset + eh_frame.len()).next_multiple_of(8);
    let mut headers = vec![
        SectionHeader::default(),
        text,
        symtab_header,
        strtab_header,
        shstrtab_header,
    ];
    if !eh_frame.is_empty() {
        headers.push(eh_frame_header);
    }

    let mut o = Vec::with_capacity(headers_at + headers.len() * SECTION_HEADER);
    o.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    o.extend_from_slice(&[0; 8]);
    o.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    o.extend_from_slice(&machine.to_le_bytes());
    o.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    o.extend_from_slice(&0u64.to_le_bytes()); // entry
    o.extend_from_slice(&0u64.to_le_bytes()); // phoff
    o.extend_from_slice(&(headers_at as u64).to_le_bytes());
    o.extend_from_slice(&0u32.to_le_bytes()); // flags
    for half in [ELF_HEADER, 0, 0, SECTION_HEADER, headers.len(), 4] {
        o.extend_from_slice(&(half as u16).to_le_bytes());
    }
    for (h, bytes) in headers[1..]
        .iter()
        .zip([code, &symtab, &strtab, shstrtab, eh_frame])
    {
        o.resize(h.offset, 0);
        o.extend_from_slice(bytes);
    }
    o.resize(headers_at, 0);
    for h in &headers {
        h.write(&mut o);
    }
    o
}
