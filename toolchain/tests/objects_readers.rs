//! Reader tests on the committed fixtures (`tests/golden/obj`): each feature the readers
//! normalize is checked by its meaning (addends point at the right data, fields are zero,
//! jumps are elided), one test per error class, and robustness against bad bytes
//! (every truncation, deterministic random byte flips: `Err` or `Ok`, never a panic).

#![allow(clippy::result_large_err)] // ObjectError carries its full context by value

use std::fs;
use std::path::{Path, PathBuf};

use cpjit_model::{Arch, HoleKind, HoleValue, ObjectFormat, Section};
use cpjit_toolchain::object::{ObjectError, ObjectErrorKind};
use cpjit_toolchain::stencil::StencilBuf;

use crate::common;

/// The triples of the committed fixtures: one directory per target under
/// `tests/golden/obj/` (fixtures are where triples are written).
fn fixture_triples() -> Vec<String> {
    common::fixture_triples()
}

/// The triple of the target file with `arch` and `format`.
fn t(arch: Arch, format: ObjectFormat) -> String {
    common::target(arch, format)
}

fn fixture_path(triple: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/obj")
        .join(triple)
        .join(format!("{name}.o"))
}

fn fixture(triple: &str, name: &str) -> Vec<u8> {
    fs::read(fixture_path(triple, name)).unwrap()
}

fn read(triple: &str, bytes: &[u8]) -> Result<Vec<StencilBuf>, ObjectError> {
    common::read_fixture(triple, "test.c", bytes)
}

fn ops(triple: &str) -> Vec<StencilBuf> {
    read(triple, &fixture(triple, "ops")).unwrap_or_else(|e| panic!("{e}"))
}

fn stencil<'a>(stencils: &'a [StencilBuf], name: &str) -> &'a StencilBuf {
    stencils
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stencil {name}"))
}

fn data_u64(s: &StencilBuf, offset: i64) -> u64 {
    let o = usize::try_from(offset).unwrap();
    u64::from_le_bytes(s.init_data[o..o + 8].try_into().unwrap())
}

/// The data offset a code hole refers to: PC-relative x86 addends carry the −4 bias of the
/// field's end, everything else is the plain offset.
fn data_target(hole: &cpjit_model::Hole) -> i64 {
    match hole.kind {
        HoleKind::X86Pc32 => hole.addend + 4,
        _ => hole.addend,
    }
}

/// The distinct data offsets (sorted) that `s`'s data-valued holes picked by `pick` point
/// at, RISC-V lo12 holes left out ([`is_riscv_lo12`]).
fn data_targets(s: &StencilBuf, pick: impl Fn(&cpjit_model::Hole) -> bool) -> Vec<i64> {
    let mut targets: Vec<i64> = s
        .holes
        .iter()
        .filter(|h| h.value == HoleValue::Data && pick(h))
        .filter(|h| !is_riscv_lo12(h))
        .map(data_target)
        .collect();
    targets.sort();
    targets.dedup();
    targets
}

/// A RISC-V lo12 hole: its addend also holds the distance back to its `auipc`, so it is
/// checked against its HI20 (`riscv_lo12_holes_carry_their_hi20_value_and_distance`), and
/// the HI20 stands for the pair in the data-target checks.
fn is_riscv_lo12(hole: &&cpjit_model::Hole) -> bool {
    matches!(
        hole.kind,
        HoleKind::RiscvPcrelLo12I | HoleKind::RiscvPcrelLo12S | HoleKind::RiscvGotLo12I
    )
}

#[test]
fn every_triple_reads_all_ops_with_sorted_names() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        let names: Vec<&str> = stencils.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "op_addr_addend",
                "op_call_helper",
                "op_count",
                "op_jump_nz",
                "op_load_const",
                "op_mix",
                "op_return",
                "op_table"
            ],
            "{triple}"
        );
        for s in &stencils {
            assert!(s
                .holes
                .windows(2)
                .all(|w| (w[0].section, w[0].offset) < (w[1].section, w[1].offset)));
            assert!(s.code_align.is_power_of_two() && s.data_align.is_power_of_two());
        }
    }
}

#[test]
fn trailing_continuation_jump_is_elided_on_every_triple() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        for name in [
            "op_load_const",
            "op_call_helper",
            "op_table",
            "op_count",
            "op_addr_addend",
        ] {
            let s = stencil(&stencils, name);
            assert!(s.elided_continue, "{triple} {name}");
            assert!(
                !s.holes.iter().any(|h| h.value == HoleValue::Continue),
                "{triple} {name}: the only continuation was the trailing jump"
            );
            let end = s.code.len() as u32;
            assert!(s
                .holes
                .iter()
                .all(|h| h.section == Section::Data || h.offset + 4 <= end));
        }
        // Returning ops have no continuation; ops with helpers fall through too: the
        // helpers are in the cold part, which the runtime lays after the trace's hot code.
        assert!(!stencil(&stencils, "op_return").elided_continue, "{triple}");
        let mix = stencil(&stencils, "op_mix");
        assert!(mix.elided_continue && mix.cold_len > 0, "{triple}");
        let shim = read(triple, &fixture(triple, "shim")).unwrap();
        assert_eq!(shim.len(), 1);
        if triple.starts_with("riscv64") {
            // RISC-V stencils use the C convention (no preserve_none), so the shim's call
            // is a plain tail call: elided, the shim is empty and falls into the first op.
            assert!(shim[0].elided_continue && shim[0].code.is_empty());
            continue;
        }
        // The shim calls its continuation (not a tail call): never elided.
        assert!(!shim[0].elided_continue);
        assert!(shim[0]
            .holes
            .iter()
            .any(|h| h.value == HoleValue::Continue && h.kind.is_branch()));
    }
}

#[test]
fn hole_fields_are_zeroed() {
    for triple in &fixture_triples() {
        for name in ["ops", "shim"] {
            for s in read(triple, &fixture(triple, name)).unwrap() {
                for h in &s.holes {
                    let bytes = if h.section == Section::Code {
                        &s.code
                    } else {
                        &s.init_data
                    };
                    let field = &bytes[h.offset as usize..h.offset as usize + h.kind.width()];
                    match h.kind.arch() {
                        Some(Arch::Riscv64) => {
                            // Clearing the fields again must change nothing.
                            let mut cleared = field.to_vec();
                            cpjit_isa::riscv64::clear_fields(h.kind, &mut cleared).unwrap();
                            assert_eq!(cleared, field, "{triple} {} {}", s.name, s.hole_text(h));
                        }
                        Some(Arch::Aarch64) => {
                            let insn = u32::from_le_bytes(field.try_into().unwrap());
                            assert_eq!(
                                insn & cpjit_isa::aarch64::field_mask(h.kind),
                                0,
                                "{triple} {} {}",
                                s.name,
                                s.hole_text(h)
                            );
                        }
                        _ => assert!(
                            field.iter().all(|&b| b == 0),
                            "{triple} {} {}",
                            s.name,
                            s.hole_text(h)
                        ),
                    }
                }
            }
        }
    }
}

/// `&scratch[2]` must point at the value 3 and `table[...]` at the table on every triple:
/// this checks explicit (ELF), implicit (COFF, Mach-O x86-64 SIGNED with its −4 bias) and
/// ADDEND-pair (Mach-O arm64) addends by their meaning.
#[test]
fn addends_point_at_the_referenced_data() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        let s = stencil(&stencils, "op_addr_addend");
        // Code refers to two places: &scratch[2] (the value 3) and pointers[] (whose first
        // slot is a data hole).
        let code_targets = data_targets(s, |h| h.section == Section::Code);
        assert_eq!(code_targets.len(), 2, "{triple}: {code_targets:?}");
        assert!(
            code_targets.iter().any(|&t| data_u64(s, t) == 3),
            "{triple}: &scratch[2]"
        );
        assert!(
            code_targets.iter().any(|&t| s
                .holes
                .iter()
                .any(|h| h.section == Section::Data && i64::from(h.offset) == t)),
            "{triple}: pointers[]"
        );
        // Data → data: pointers[] = { &scratch[1], &table[3] }.
        let pointers: Vec<_> = s
            .holes
            .iter()
            .filter(|h| h.section == Section::Data)
            .collect();
        assert_eq!(pointers.len(), 2, "{triple}");
        assert!(pointers
            .iter()
            .all(|h| h.kind == HoleKind::Abs64 && h.value == HoleValue::Data));
        let mut targets: Vec<u64> = pointers.iter().map(|h| data_u64(s, h.addend)).collect();
        targets.sort();
        assert_eq!(targets, [2, 11], "{triple}: scratch[1] and table[3]");

        let t = stencil(&stencils, "op_table");
        let hole = t.holes.iter().find(|h| h.section == Section::Code).unwrap();
        assert_eq!(data_u64(t, data_target(hole)), 3, "{triple}: table[0]");
        assert_eq!(
            data_u64(t, data_target(hole) + 56),
            23,
            "{triple}: table[7]"
        );
    }
}

#[test]
fn macho_arm64_addend_pairs_are_applied() {
    let s = ops(&t(Arch::Aarch64, ObjectFormat::MachO));
    let addr = stencil(&s, "op_addr_addend");
    let page = addr
        .holes
        .iter()
        .find(|h| h.kind == HoleKind::Aarch64AdrPage21)
        .unwrap();
    let lo = addr
        .holes
        .iter()
        .find(|h| h.kind == HoleKind::Aarch64AddLo12)
        .unwrap();
    assert_eq!(
        page.addend, lo.addend,
        "both halves carry the ADDEND payload"
    );
    assert_eq!(data_u64(addr, page.addend), 3);
}

#[test]
fn zero_fill_is_laid_out_after_initialized_data() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        let count = stencil(&stencils, "op_count");
        // counters (zero-fill, 32 bytes) and scratch (writable, {1, 2, 3, 4}).
        let offsets = data_targets(count, |_| true);
        assert_eq!(offsets.len(), 2, "{triple}");
        let scratch = offsets
            .iter()
            .copied()
            .find(|&o| data_u64(count, o) == 1)
            .expect("scratch[0]");
        let counters = offsets.iter().copied().find(|&o| o != scratch).unwrap();
        assert!(
            counters > scratch,
            "{triple}: zero-fill after writable data"
        );
        // The zero-fill is described, not stored: the initialized bytes end before it.
        assert_eq!(count.zero_fill.len(), 1, "{triple}: {:?}", count.zero_fill);
        let z = &count.zero_fill[0];
        assert_eq!((z.offset, z.size), (counters as u64, 32), "{triple}");
        assert!(count.init_data.len() as u64 <= z.offset, "{triple}");
        assert_eq!(count.data_len, z.offset + z.size, "{triple}");
    }
}

#[test]
fn dllimport_operands_use_got_holes() {
    let x64 = ops(&t(Arch::X86_64, ObjectFormat::Coff));
    let load = stencil(&x64, "op_load_const");
    assert_eq!(load.operands, ["OPERAND0"]);
    assert_eq!(load.holes[0].kind, HoleKind::X86GotPc32Relaxable);
    assert_eq!(load.holes[0].value, HoleValue::Operand(0));
    assert_eq!(load.holes[0].addend, -4);

    let a64 = ops(&t(Arch::Aarch64, ObjectFormat::Coff));
    let load = stencil(&a64, "op_load_const");
    let kinds: Vec<HoleKind> = load.holes.iter().map(|h| h.kind).collect();
    assert_eq!(
        kinds,
        [HoleKind::Aarch64AdrGotPage21, HoleKind::Aarch64Ld64GotLo12]
    );
    assert!(load
        .holes
        .iter()
        .all(|h| h.value == HoleValue::Operand(0) && h.addend == 0));
    assert!(
        load.symbols.is_empty(),
        "`__imp_` must not leak as a symbol"
    );
}

#[test]
fn coff_comdat_sections_give_the_same_code() {
    for triple in [
        &t(Arch::X86_64, ObjectFormat::Coff),
        &t(Arch::Aarch64, ObjectFormat::Coff),
    ] {
        let single = ops(triple);
        let comdat = read(triple, &fixture(triple, "ops_function_sections")).unwrap();
        assert_eq!(single.len(), comdat.len());
        for (a, b) in single.iter().zip(&comdat) {
            assert_eq!(a.name, b.name);
            if a.name != "op_mix" {
                // (op_mix: the padding before its copied helper differs: the object's own
                // alignment nops in one .text, the reader's nops between COMDAT sections.)
                assert_eq!(a.code, b.code, "{triple} {}", a.name);
            }
            assert_eq!(a.elided_continue, b.elided_continue);
            let kinds = |s: &StencilBuf| {
                s.holes
                    .iter()
                    .filter(|h| h.section == Section::Code)
                    .map(|h| (h.offset, h.kind))
                    .collect::<Vec<_>>()
            };
            assert_eq!(kinds(a), kinds(b), "{triple} {}", a.name);
        }
    }
}

#[test]
fn macho_text_is_split_by_symbols_and_padding_after_a_jump_is_dropped() {
    let stencils = ops(&t(Arch::X86_64, ObjectFormat::MachO));
    // op_jump_nz ends `pop %rbp; jmp _JIT_CONTINUE; nop` in the object: the nop is padding
    // before the next symbol, the jump is elided, and the code ends with `pop %rbp`.
    let jump = stencil(&stencils, "op_jump_nz");
    assert!(jump.elided_continue);
    assert_eq!(jump.code.last(), Some(&0x5d));
    // No stencil contains another function's prologue (`push %rbp; mov %rsp, %rbp`).
    for s in &stencils {
        let prologues = s
            .code
            .windows(4)
            .filter(|w| *w == [0x55, 0x48, 0x89, 0xe5])
            .count();
        let expected = if s.name == "op_mix" { 2 } else { 1 };
        assert_eq!(prologues, expected, "{}", s.name);
    }
    let arm = ops(&t(Arch::Aarch64, ObjectFormat::MachO));
    assert!(
        stencil(&arm, "op_return").code.len() <= 8,
        "ends at the next symbol"
    );
}

#[test]
fn local_helpers_are_copied_after_the_function() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        let mix = stencil(&stencils, "op_mix");
        let call = mix
            .holes
            .iter()
            .find(|h| h.value == HoleValue::Cold)
            .expect("call to the copied helper, in the cold part");
        assert!(call.kind.is_branch(), "{triple}");
        let helper_at = match call.kind {
            HoleKind::X86Branch32 => call.addend + 4,
            _ => call.addend,
        };
        // The hot part calls it; it lies in the cold part (an offset into it).
        let hot_len = mix.code.len() - mix.cold_len as usize;
        assert!((call.offset as usize) < hot_len, "{triple}");
        assert!(
            helper_at >= 0 && (helper_at as u32) < mix.cold_len,
            "{triple}"
        );
        assert_eq!(
            helper_at % i64::from(mix.code_align.min(16)),
            0,
            "{triple}: helper aligned"
        );
    }
}

#[test]
fn jump_targets_and_operands_are_named() {
    for triple in &fixture_triples() {
        let stencils = ops(triple);
        let jump = stencil(&stencils, "op_jump_nz");
        assert_eq!(jump.targets, ["JUMP_TARGET"], "{triple}");
        assert!(jump
            .holes
            .iter()
            .any(|h| h.value == HoleValue::Target(0) && h.kind.is_branch()));
        let call = stencil(&stencils, "op_call_helper");
        assert_eq!(call.operands, ["OPERAND0", "OPERAND1"], "{triple}");
        assert_eq!(call.symbols, ["cpjit_helper_mul_add"], "{triple}");
    }
}

fn error_of(triple: &str, bytes: &[u8]) -> ObjectError {
    match read(triple, bytes) {
        Ok(_) => panic!("{triple}: expected an error"),
        Err(e) => e,
    }
}

#[test]
fn unknown_relocation_is_an_error_with_a_hint() {
    let e = error_of(
        &t(Arch::X86_64, ObjectFormat::Elf),
        &fixture(&t(Arch::X86_64, ObjectFormat::Elf), "absolute32"),
    );
    assert_eq!(e.kind, ObjectErrorKind::UnknownRelocation);
    assert_eq!(e.relocation.as_deref(), Some("R_X86_64_32S"));
    assert_eq!(e.stencil.as_deref(), Some("op_table32"));
    let text = e.to_string();
    for part in [
        &t(Arch::X86_64, ObjectFormat::Elf),
        "test.c",
        "op_table32",
        ".text",
        "0xb",
        "R_X86_64_32S",
        "-fpic",
    ] {
        assert!(text.contains(part), "{text} lacks {part}");
    }

    // A raw type outside every table: patch the first relocation of the x86-64 ELF object.
    let mut bytes = fixture(&t(Arch::X86_64, ObjectFormat::Elf), "ops");
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let rela = elf
        .section_headers
        .iter()
        .find(|s| s.sh_type == goblin::elf::section_header::SHT_RELA)
        .unwrap();
    let at = rela.sh_offset as usize + 8; // r_info; the type is its low 32 bits
    drop(elf);
    bytes[at..at + 4].copy_from_slice(&200u32.to_le_bytes());
    let e = error_of(&t(Arch::X86_64, ObjectFormat::Elf), &bytes);
    assert_eq!(e.kind, ObjectErrorKind::UnknownRelocation);
    assert_eq!(e.relocation.as_deref(), Some("#200"));
    assert!(e.symbol.is_some() && e.offset.is_some() && e.section.is_some());
}

#[test]
fn thread_locals_are_rejected_on_every_triple() {
    for triple in &fixture_triples() {
        let e = error_of(triple, &fixture(triple, "tls"));
        assert_eq!(e.kind, ObjectErrorKind::ThreadLocal, "{triple}: {e}");
        assert!(e.section.is_some(), "{e}");
    }
}

#[test]
fn stack_protector_is_rejected_on_every_triple() {
    for triple in &fixture_triples() {
        let e = error_of(triple, &fixture(triple, "stack_protector"));
        assert_eq!(e.kind, ObjectErrorKind::StackProtector, "{triple}: {e}");
        assert_eq!(e.stencil.as_deref(), Some("op_buffer"));
        assert!(e.to_string().contains("-fno-stack-protector"));
    }
}

#[test]
fn unsupported_section_is_named() {
    // Turn the x86-64 ELF `.rodata.*` section into an SHT_INIT_ARRAY.
    let mut bytes = fixture(&t(Arch::X86_64, ObjectFormat::Elf), "ops");
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let (index, _) = elf
        .section_headers
        .iter()
        .enumerate()
        .find(|(_, s)| {
            elf.shdr_strtab
                .get_at(s.sh_name)
                .is_some_and(|n| n.starts_with(".rodata"))
        })
        .unwrap();
    let at = elf.header.e_shoff as usize + index * elf.header.e_shentsize as usize + 4; // sh_type
    drop(elf);
    bytes[at..at + 4].copy_from_slice(&goblin::elf::section_header::SHT_INIT_ARRAY.to_le_bytes());
    let e = error_of(&t(Arch::X86_64, ObjectFormat::Elf), &bytes);
    assert_eq!(e.kind, ObjectErrorKind::UnsupportedSection);
    assert!(
        e.section
            .as_deref()
            .is_some_and(|s| s.starts_with(".rodata")),
        "{e}"
    );
}

#[test]
fn riscv_lo12_holes_carry_their_hi20_value_and_distance() {
    let triple = &t(Arch::Riscv64, ObjectFormat::Elf);
    let mut pairs = 0;
    for s in ops(triple) {
        for lo in s.holes.iter().filter(|h| {
            matches!(
                h.kind,
                HoleKind::RiscvPcrelLo12I | HoleKind::RiscvPcrelLo12S | HoleKind::RiscvGotLo12I
            )
        }) {
            let hi_kind = if lo.kind == HoleKind::RiscvGotLo12I {
                HoleKind::RiscvGotHi20
            } else {
                HoleKind::RiscvPcrelHi20
            };
            // value - place at the lo12 equals value - place at its auipc.
            let paired = s.holes.iter().any(|hi| {
                hi.kind == hi_kind
                    && hi.value == lo.value
                    && hi.offset < lo.offset
                    && lo.addend - hi.addend == i64::from(lo.offset - hi.offset)
            });
            assert!(paired, "{}: {lo:?} has no matching HI20", s.name);
            pairs += 1;
        }
    }
    assert!(pairs >= 4, "only {pairs} lo12 holes in the RISC-V ops");
}

#[test]
fn riscv_relaxation_and_absolute_addresses_are_rejected() {
    let triple = &t(Arch::Riscv64, ObjectFormat::Elf);
    let e = error_of(triple, &fixture(triple, "relax"));
    assert_eq!(e.kind, ObjectErrorKind::Unsupported);
    assert_eq!(e.relocation.as_deref(), Some("R_RISCV_RELAX"));
    assert!(e.to_string().contains("-mno-relax"), "{e}");
    let e = error_of(triple, &fixture(triple, "absolute32"));
    assert_eq!(e.kind, ObjectErrorKind::UnknownRelocation);
    assert_eq!(e.relocation.as_deref(), Some("R_RISCV_HI20"));
    assert!(e.to_string().contains("-fpic"), "{e}");
}

#[test]
fn elf_local_helper_in_a_shared_section_is_rejected() {
    for triple in [
        &t(Arch::X86_64, ObjectFormat::Elf),
        &t(Arch::Aarch64, ObjectFormat::Elf),
        &t(Arch::Riscv64, ObjectFormat::Elf),
    ] {
        let e = error_of(triple, &fixture(triple, "ops_shared_text"));
        assert_eq!(e.kind, ObjectErrorKind::Unsupported);
        assert!(
            e.message.contains("`mix`") && e.message.contains("-ffunction-sections"),
            "{e}"
        );
    }
}

/// (file offset of the relocation table, count) of the arm64 Mach-O `__text`.
fn macho_text_relocations(bytes: &[u8]) -> (usize, usize) {
    let macho = goblin::mach::MachO::parse(bytes, 0).unwrap();
    for segment in macho.segments.iter() {
        for (section, _) in segment.sections().unwrap() {
            if section.name().unwrap() == "__text" {
                return (section.reloff as usize, section.nreloc as usize);
            }
        }
    }
    panic!("no __text");
}

#[test]
fn dangling_addend_is_rejected() {
    let mut bytes = fixture(&t(Arch::Aarch64, ObjectFormat::MachO), "ops");
    let (start, count) = macho_text_relocations(&bytes);
    let info = |b: &[u8], i: usize| {
        u32::from_le_bytes(b[start + i * 8 + 4..start + i * 8 + 8].try_into().unwrap())
    };
    let addend = (0..count)
        .find(|&i| info(&bytes, i) >> 28 == 10)
        .expect("an ADDEND record");
    // Retype the relocation the ADDEND modifies into a GOT_LOAD_PAGE21 (5), which takes none.
    let next = start + (addend + 1) * 8 + 4;
    let patched = (info(&bytes, addend + 1) & 0x0fff_ffff) | (5 << 28);
    bytes[next..next + 4].copy_from_slice(&patched.to_le_bytes());
    let e = error_of(&t(Arch::Aarch64, ObjectFormat::MachO), &bytes);
    assert_eq!(e.kind, ObjectErrorKind::DanglingAddend, "{e}");
    assert_eq!(e.section.as_deref(), Some("__TEXT,__text"));

    // An ADDEND as the very last record.
    let mut bytes = fixture(&t(Arch::Aarch64, ObjectFormat::MachO), "ops");
    let last = start + (count - 1) * 8 + 4;
    let patched = (info(&bytes, count - 1) & 0x0fff_ffff) | (10 << 28);
    bytes[last..last + 4].copy_from_slice(&patched.to_le_bytes());
    assert_eq!(
        error_of(&t(Arch::Aarch64, ObjectFormat::MachO), &bytes).kind,
        ObjectErrorKind::DanglingAddend
    );
}

#[test]
fn bad_symbol_index_is_a_missing_symbol() {
    let mut bytes = fixture(&t(Arch::X86_64, ObjectFormat::Coff), "ops");
    let coff = goblin::pe::Coff::parse(&bytes).unwrap();
    let at = coff.sections[0].pointer_to_relocations as usize + 4;
    drop(coff);
    bytes[at..at + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    let e = error_of(&t(Arch::X86_64, ObjectFormat::Coff), &bytes);
    assert_eq!(e.kind, ObjectErrorKind::MissingSymbol, "{e}");
    assert_eq!(e.offset, Some(3));
}

#[test]
fn wrong_format_or_architecture_is_corrupt() {
    let elf = fixture(&t(Arch::X86_64, ObjectFormat::Elf), "ops");
    assert!(matches!(
        error_of(&t(Arch::Aarch64, ObjectFormat::Elf), &elf).kind,
        ObjectErrorKind::Corrupt
    ));
    assert!(matches!(
        error_of(&t(Arch::X86_64, ObjectFormat::MachO), &elf).kind,
        ObjectErrorKind::Corrupt | ObjectErrorKind::Truncated
    ));
    assert!(read(&t(Arch::X86_64, ObjectFormat::Coff), &elf).is_err());
    assert!(read(&t(Arch::X86_64, ObjectFormat::Coff), &[]).is_err());
}

fn all_fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out = vec![];
    for triple in &fixture_triples() {
        let dir = fixture_path(triple, "ops").parent().unwrap().to_path_buf();
        let mut paths: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for p in paths {
            out.push((triple.clone(), fs::read(p).unwrap()));
        }
    }
    out
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for (triple, bytes) in &all_fixtures() {
        for len in 0..bytes.len() {
            // Ok is possible only if nothing the readers use lies past `len`.
            let _ = read(triple, &bytes[..len]);
        }
        assert!(
            read(triple, &bytes[..bytes.len() / 2]).is_err(),
            "{triple}: half an object"
        );
    }
}

#[test]
fn random_byte_flips_never_panic() {
    // Seeded, so a failure reproduces.
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    let mut total = 0;
    for (triple, original) in &all_fixtures() {
        for _ in 0..300 {
            let mut bytes = original.clone();
            for _ in 0..rng.usize(1..=4) {
                let at = rng.usize(..bytes.len());
                bytes[at] ^= 1 << rng.u32(..8);
            }
            total += 1;
            errors += usize::from(read(triple, &bytes).is_err());
        }
    }
    // Most flips land in code or data bytes and are harmless; some must be caught.
    assert!(
        errors > total / 50,
        "{errors} of {total} mutations rejected"
    );
}
/// A longer run of the same mutation test for manual use:
/// `CPJIT_FUZZ_ROUNDS=5000 cargo test -p cpjit-toolchain --test integration -- --ignored objects_readers`.
#[test]
#[ignore]
fn many_random_byte_flips_never_panic() {
    let rounds: usize = std::env::var("CPJIT_FUZZ_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3000);
    let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
    for (triple, original) in &all_fixtures() {
        for _ in 0..rounds {
            let mut bytes = original.clone();
            for _ in 0..rng.usize(1..=8) {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
            let _ = read(triple, &bytes);
        }
    }
}

/// The file offsets of the `Elf64_Rela` entries of `bytes` whose type is `r_type`.
fn elf_relas_of_type(bytes: &[u8], r_type: u32) -> Vec<usize> {
    let elf = goblin::elf::Elf::parse(bytes).unwrap();
    let mut out = vec![];
    for s in elf.section_headers.iter() {
        if s.sh_type == goblin::elf::section_header::SHT_RELA {
            for i in 0..(s.sh_size / 24) as usize {
                let at = s.sh_offset as usize + 24 * i;
                let info = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
                if info as u32 == r_type {
                    out.push(at);
                }
            }
        }
    }
    out
}

#[test]
fn riscv_lo12_must_name_a_hi20_label_without_addend() {
    const PCREL_LO12_I: u32 = 24;
    const PCREL_HI20: u32 = 23;
    let triple = &t(Arch::Riscv64, ObjectFormat::Elf);
    let original = fixture(triple, "ops");
    // An addend on the LO12 (the HI20 carries it): an error naming the relocation.
    let mut bytes = original.clone();
    let at = elf_relas_of_type(&bytes, PCREL_LO12_I)[0];
    bytes[at + 16..at + 24].copy_from_slice(&4i64.to_le_bytes());
    let e = error_of(triple, &bytes);
    assert_eq!(e.relocation.as_deref(), Some("R_RISCV_PCREL_LO12_I"));
    assert!(e.to_string().contains("addend 4 on a PCREL_LO12"), "{e}");
    // The auipc's own relocation turned into a PCREL_LO12_I: it names the data symbol, not
    // an auipc label, and says so (never patched as if it were paired).
    let mut bytes = original;
    let at = elf_relas_of_type(&bytes, PCREL_HI20)[0];
    bytes[at + 8..at + 12].copy_from_slice(&PCREL_LO12_I.to_le_bytes());
    let e = error_of(triple, &bytes);
    assert_eq!(e.relocation.as_deref(), Some("R_RISCV_PCREL_LO12_I"));
    assert!(e.to_string().contains("must name an auipc label"), "{e}");
}

#[test]
fn medium_code_model_addresses_are_movabs_imm64_holes() {
    const R_X86_64_64: u32 = 1;
    let triple = &t(Arch::X86_64, ObjectFormat::Elf);
    let original = fixture(triple, "medium");
    let stencils = read(triple, &original).unwrap();
    let mut operands = 0;
    for s in &stencils {
        for h in &s.holes {
            assert!(
                !h.kind.uses_got(),
                "{}: {:?} under the medium model",
                s.name,
                h
            );
            if h.kind == HoleKind::X86Imm64 {
                assert_eq!(h.section, Section::Code, "{}: {h:?}", s.name);
                assert!(
                    cpjit_isa::x86_64::is_movabs_imm64(&s.code, h.offset as usize),
                    "{}: {h:?}",
                    s.name
                );
                operands += usize::from(matches!(h.value, HoleValue::Operand(_)));
            }
        }
    }
    assert!(operands >= 3, "only {operands} operand imm64 holes");
    // The opcode before one of them damaged (b8+r -> nop): not a movabs, named as such.
    let elf = goblin::elf::Elf::parse(&original).unwrap();
    let rela = elf_relas_of_type(&original, R_X86_64_64)[0];
    let r_offset = u64::from_le_bytes(original[rela..rela + 8].try_into().unwrap());
    let section = elf
        .section_headers
        .iter()
        .find(|s| {
            s.sh_type == goblin::elf::section_header::SHT_RELA
                && (s.sh_offset as usize..(s.sh_offset + s.sh_size) as usize).contains(&rela)
        })
        .map(|s| &elf.section_headers[s.sh_info as usize])
        .unwrap();
    let mut bytes = original.clone();
    bytes[(section.sh_offset + r_offset) as usize - 1] = 0x90;
    let e = error_of(triple, &bytes);
    assert_eq!(e.kind, ObjectErrorKind::UnexpectedInstruction);
    assert_eq!(e.relocation.as_deref(), Some("R_X86_64_64"));
    assert!(e.to_string().contains("movabs"), "{e}");
}
