//! The patch functions against an independent implementation: for every relocation in the
//! fixtures (`fixtures/patch/`, made by `gen.sh` with llvm-mc-19 and ld.lld-19 (x86-64,
//! AArch64, RISC-V), lld-link-19, ld64.lld-19), patching the assembler's unrelocated bytes must give exactly the linker's
//! bytes. The COFF and Mach-O fixtures list raw relocations: the test folds their implicit
//! addends out of the bytes and clears the fields first (`fixtures/patch/fold.rs`), as the
//! toolchain's object readers do, so the runtime only ever sees explicit addends.

#[path = "fixtures/patch/fold.rs"]
mod fold;

use cpjit_runtime::model::HoleKind;
use cpjit_runtime::patch::{
    aarch64_veneer, in_range, patch, relax_aarch64_got_pair, relax_x86_got_load,
    relax_x86_got_load_constant, riscv64_veneer, x86_64_veneer,
};
use std::collections::BTreeSet;

struct Case {
    name: &'static str,
    orig: &'static [u8],
    linked: &'static [u8],
    holes: &'static str,
}

macro_rules! case {
    ($name:literal) => {
        Case {
            name: $name,
            orig: include_bytes!(concat!("fixtures/patch/", $name, ".orig.bin")),
            linked: include_bytes!(concat!("fixtures/patch/", $name, ".linked.bin")),
            holes: include_str!(concat!("fixtures/patch/", $name, ".holes")),
        }
    };
}

fn cases() -> [Case; 13] {
    [
        case!("elf_x86_64"),
        case!("elf_x86_64_abs32"),
        case!("elf_x86_64_relax"),
        case!("x86_const"),
        case!("elf_aarch64"),
        case!("elf_aarch64_relax"),
        case!("a64_const"),
        case!("elf_riscv64"),
        case!("elf_riscv64_relax"),
        case!("coff_x86_64"),
        case!("coff_aarch64"),
        case!("macho_x86_64"),
        case!("macho_aarch64"),
    ]
}

/// One line of a `.holes` file.
enum Op {
    Patch(HoleKind, usize, u64, u64),
    RelaxX86Got(usize, u64, u64, bool),
    RelaxX86Const(HoleKind, usize, u64, bool),
    RelaxA64Got(usize, usize, u64, u64, bool),
}

fn num(field: &str) -> u64 {
    u64::from_str_radix(field.trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("bad hex number {field:?}"))
}

fn flag(field: &str) -> bool {
    match field {
        "true" => true,
        "false" => false,
        _ => panic!("bad flag {field:?}"),
    }
}

/// A relocation line of a COFF or Mach-O fixture (see `gen.sh`).
struct RawReloc<'a> {
    rtype: &'a str,
    offset: usize,
    place: u64,
    symbol: &'a str,
    /// Where `symbol` is (the GOT slot for GOT relocations), or the `ARM64_RELOC_ADDEND`
    /// payload.
    address: u64,
    relaxed: bool,
}

/// The operations of `case` and the bytes they start from: the unrelocated bytes, with the
/// field of every raw relocation cleared after its implicit addend was folded out.
fn ops(case: &Case) -> (Vec<u8>, Vec<Op>) {
    let mut start = case.orig.to_vec();
    let mut ops = Vec::new();
    let mut addend = None; // a pending ARM64_RELOC_ADDEND: (offset, payload)
    let mut relaxed_adrp = None; // a relaxed GOT_LOAD_PAGE21 awaiting its PAGEOFF12
    for line in case
        .holes
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some(raw) = raw_reloc(line) else {
            ops.push(parse_line(line));
            continue;
        };
        if raw.rtype == "ARM64_RELOC_ADDEND" {
            addend = Some((raw.offset, raw.address as i64));
            continue;
        }
        let explicit = match addend.take() {
            Some((at, payload)) if at == raw.offset => payload,
            Some((at, _)) => panic!(
                "{}: ARM64_RELOC_ADDEND at {at:#x} not followed by its pair",
                case.name
            ),
            None => 0,
        };
        let folded = fold::fold(raw.rtype, case.orig, raw.offset, raw.symbol, explicit);
        fold::clear_field(folded.kind, &mut start, raw.offset);
        let value = raw.address.wrapping_add(folded.addend as u64);
        let op = match (raw.relaxed, folded.kind) {
            (false, kind) => Op::Patch(kind, raw.offset, raw.place, value),
            (true, kind) if kind.is_relaxable_x86_got() => {
                Op::RelaxX86Got(raw.offset, raw.place, value, true)
            }
            (true, HoleKind::Aarch64AdrGotPage21) => {
                assert_eq!(
                    folded.addend, 0,
                    "{}: relaxed GOT load with an addend",
                    case.name
                );
                relaxed_adrp = Some((raw.symbol, raw.offset, raw.place));
                continue;
            }
            (true, HoleKind::Aarch64Ld64GotLo12) => {
                let Some((symbol, adrp, place)) = relaxed_adrp.take() else {
                    panic!(
                        "{}: relaxed GOT_LOAD_PAGEOFF12 at {:#x} without its PAGE21",
                        case.name, raw.offset
                    )
                };
                assert_eq!(
                    symbol, raw.symbol,
                    "{}: relaxed GOT pair of two symbols",
                    case.name
                );
                Op::RelaxA64Got(adrp, raw.offset, place, value, true)
            }
            (true, kind) => panic!(
                "{}: {kind} at {:#x} cannot be relaxed",
                case.name, raw.offset
            ),
        };
        ops.push(op);
    }
    assert!(
        addend.is_none() && relaxed_adrp.is_none(),
        "{}: unpaired relocation at the end",
        case.name
    );
    (start, ops)
}

fn raw_reloc(line: &str) -> Option<RawReloc<'_>> {
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        [tag @ ("reloc" | "reloc-relaxed"), rtype, off, place, symbol, address] => Some(RawReloc {
            rtype,
            offset: num(off) as usize,
            place: num(place),
            symbol,
            address: num(address),
            relaxed: *tag == "reloc-relaxed",
        }),
        _ => None,
    }
}

/// An operation line of an ELF or relaxation fixture.
fn parse_line(line: &str) -> Op {
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        ["patch", kind, off, place, value] => Op::Patch(
            HoleKind::from_name(kind).unwrap_or_else(|| panic!("kind {kind}")),
            num(off) as usize,
            num(place),
            num(value),
        ),
        ["relax-x86-got", off, place, value, expected] => {
            Op::RelaxX86Got(num(off) as usize, num(place), num(value), flag(expected))
        }
        ["relax-x86-const", kind, off, constant, expected] => Op::RelaxX86Const(
            HoleKind::from_name(kind).unwrap_or_else(|| panic!("kind {kind}")),
            num(off) as usize,
            num(constant),
            flag(expected),
        ),
        ["relax-a64-got", adrp, ldr, place, slot, expected] => Op::RelaxA64Got(
            num(adrp) as usize,
            num(ldr) as usize,
            num(place),
            num(slot),
            flag(expected),
        ),
        _ => panic!("bad line {line:?}"),
    }
}

/// Applies `ops` of `case` to `code`; returns the patched kinds.
fn apply(case: &Case, ops: Vec<Op>, code: &mut [u8], scramble_first: bool) -> BTreeSet<HoleKind> {
    let mut kinds = BTreeSet::new();
    for op in ops {
        match op {
            Op::Patch(kind, off, place, value) => {
                if scramble_first {
                    // Patch another in-range value first: re-patching must clear the field.
                    let other = [
                        value ^ 0x5550,
                        value ^ 0x55_5550,
                        value ^ 0x5555_5550,
                        place,
                    ]
                    .into_iter()
                    .find(|&v| v != value && in_range(kind, place, v));
                    if let Some(other) = other {
                        patch(kind, code, off, place, other)
                            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                    }
                }
                assert!(
                    in_range(kind, place, value),
                    "{}: {kind} at {off:#x}",
                    case.name
                );
                patch(kind, code, off, place, value)
                    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                kinds.insert(kind);
            }
            Op::RelaxX86Got(off, place, value, expected) => {
                let got = relax_x86_got_load(code, off, place, value);
                assert_eq!(got, Ok(expected), "{}: relax at {off:#x}", case.name);
            }
            Op::RelaxX86Const(kind, off, constant, expected) => {
                let got = relax_x86_got_load_constant(kind, code, off, constant);
                assert_eq!(got, Ok(expected), "{}: relax at {off:#x}", case.name);
            }
            Op::RelaxA64Got(adrp, ldr, place, slot, expected) => {
                let got = relax_aarch64_got_pair(code, adrp, ldr, place, slot);
                assert_eq!(got, Ok(expected), "{}: relax at {adrp:#x}", case.name);
            }
        }
    }
    kinds
}

fn check_case(case: &Case, scramble_first: bool) -> BTreeSet<HoleKind> {
    assert_eq!(case.orig.len(), case.linked.len(), "{}", case.name);
    let (mut code, ops) = ops(case);
    let kinds = apply(case, ops, &mut code, scramble_first);
    if code != case.linked {
        let first = code.iter().zip(case.linked).position(|(a, b)| a != b);
        panic!(
            "{}: first difference at {first:x?}\n ours:   {:02x?}\n linker: {:02x?}",
            case.name, code, case.linked
        );
    }
    kinds
}

#[test]
fn patched_bytes_equal_the_linkers() {
    for case in cases() {
        check_case(&case, false);
    }
}

#[test]
fn repatching_gives_the_same_bytes() {
    for case in cases() {
        check_case(&case, true);
    }
}

#[test]
fn fixtures_cover_every_hole_kind() {
    let covered: BTreeSet<HoleKind> = cases().iter().flat_map(|c| check_case(c, false)).collect();
    // Operand checks and the entry-parameters marker write nothing and have no relocation:
    // `patch_ranges.rs` tests them.
    let missing: Vec<HoleKind> = HoleKind::ALL
        .into_iter()
        .filter(|k| {
            !covered.contains(k) && k.operand_check().is_none() && *k != HoleKind::EntryParameters
        })
        .collect();
    assert!(missing.is_empty(), "no fixture for {missing:?}");
}

#[test]
fn fixtures_cover_every_relaxation_outcome() {
    let ops: Vec<Op> = cases().iter().flat_map(|c| ops(c).1).collect();
    for expected in [true, false] {
        assert!(ops
            .iter()
            .any(|op| matches!(op, Op::RelaxX86Const(.., e) if *e == expected)));
        assert!(ops
            .iter()
            .any(|op| matches!(op, Op::RelaxA64Got(.., e) if *e == expected)));
    }
    assert!(ops.iter().any(|op| matches!(op, Op::RelaxX86Got(.., true))));
}

/// The RISC-V relaxation fixture holds what lld decided at each edge of a `jal`'s reach:
/// calls and jumps at +0xffffe, -0x100000 and a `jal t0` relaxed (`jal` + the `nop` the
/// fixture puts where lld deleted the `jalr`), +0x100000 and -0x100002 kept as pairs.
#[test]
fn riscv_relaxation_fixture_has_both_outcomes_at_each_edge() {
    let case = case!("elf_riscv64_relax");
    let relaxed: Vec<bool> = case
        .linked
        .chunks(8)
        .map(|site| site[0] & 0x7f == 0x6f && site[4..] == [0x13, 0, 0, 0])
        .collect();
    assert_eq!(relaxed, [true, false, true, false, true]);
}

#[test]
fn veneers_equal_the_assemblers() {
    let target = 0x1122_3344_5566_7788;
    assert_eq!(
        x86_64_veneer(target),
        *include_bytes!("fixtures/patch/veneer_x86_64.bin")
    );
    assert_eq!(
        aarch64_veneer(target),
        *include_bytes!("fixtures/patch/veneer_aarch64.bin")
    );
    assert_eq!(
        riscv64_veneer(target),
        *include_bytes!("fixtures/patch/veneer_riscv64.bin")
    );
}

#[test]
fn foreign_fixtures_cover_every_relocation_type() {
    let types: BTreeSet<&str> = cases()
        .iter()
        .flat_map(|c| c.holes.lines().filter_map(raw_reloc).map(|r| r.rtype))
        .collect();
    let expected = [
        "IMAGE_REL_AMD64_REL32",
        "IMAGE_REL_AMD64_REL32_1",
        "IMAGE_REL_AMD64_REL32_2",
        "IMAGE_REL_AMD64_REL32_3",
        "IMAGE_REL_AMD64_REL32_4",
        "IMAGE_REL_AMD64_REL32_5",
        "IMAGE_REL_AMD64_ADDR64",
        "IMAGE_REL_ARM64_BRANCH26",
        "IMAGE_REL_ARM64_BRANCH19",
        "IMAGE_REL_ARM64_BRANCH14",
        "IMAGE_REL_ARM64_PAGEBASE_REL21",
        "IMAGE_REL_ARM64_PAGEOFFSET_12A",
        "IMAGE_REL_ARM64_PAGEOFFSET_12L",
        "IMAGE_REL_ARM64_ADDR64",
        "X86_64_RELOC_BRANCH",
        "X86_64_RELOC_SIGNED",
        "X86_64_RELOC_SIGNED_1",
        "X86_64_RELOC_SIGNED_2",
        "X86_64_RELOC_SIGNED_4",
        "X86_64_RELOC_GOT_LOAD",
        "X86_64_RELOC_GOT",
        "X86_64_RELOC_UNSIGNED",
        "X86_64_RELOC_UNSIGNED:4",
        "ARM64_RELOC_BRANCH26",
        "ARM64_RELOC_PAGE21",
        "ARM64_RELOC_PAGEOFF12",
        "ARM64_RELOC_GOT_LOAD_PAGE21",
        "ARM64_RELOC_GOT_LOAD_PAGEOFF12",
        "ARM64_RELOC_UNSIGNED",
        "ARM64_RELOC_ADDEND",
    ];
    let missing: Vec<&str> = expected
        .into_iter()
        .filter(|t| !types.contains(t))
        .collect();
    assert!(missing.is_empty(), "no fixture for {missing:?}");
}

/// Each COFF/Mach-O case alone must cover the hole kinds its format produces for its
/// architecture, so that a regenerated fixture cannot silently lose one.
#[test]
fn foreign_fixtures_cover_their_kinds() {
    use HoleKind::*;
    let x86 = [Abs64, X86Pc32, X86Branch32, X86GotPc32];
    // COFF cannot say whether a REX prefix exists; Mach-O's GOT_LOAD is only on `movq`.
    let a64_branches = [Aarch64Branch26, Aarch64Branch19, Aarch64Branch14];
    let a64_data = [
        Abs64,
        Aarch64AdrPage21,
        Aarch64AdrGotPage21,
        Aarch64AddLo12,
        Aarch64LdSt8Lo12,
        Aarch64LdSt16Lo12,
        Aarch64LdSt32Lo12,
        Aarch64LdSt64Lo12,
        Aarch64LdSt128Lo12,
        Aarch64Ld64GotLo12,
    ];
    for case in cases() {
        let expected: Vec<HoleKind> = match case.name {
            "coff_x86_64" => [&x86[..], &[X86GotPc32Relaxable]].concat(),
            "macho_x86_64" => [&x86[..], &[X86RexGotPc32Relaxable]].concat(),
            "coff_aarch64" => [&a64_branches[..], &a64_data[..]].concat(),
            // Mach-O ARM64 has no BRANCH19/BRANCH14 relocations.
            "macho_aarch64" => [&[Aarch64Branch26][..], &a64_data[..]].concat(),
            _ => continue,
        };
        let kinds = check_case(&case, false);
        let missing: Vec<&HoleKind> = expected.iter().filter(|k| !kinds.contains(k)).collect();
        assert!(
            missing.is_empty(),
            "{}: no hole of kind {missing:?}",
            case.name
        );
    }
}
