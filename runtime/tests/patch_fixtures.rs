//! The patch functions against an independent implementation: for every relocation in the
//! fixtures (`fixtures/patch/`, made by `gen.sh` with llvm-mc-19 and ld.lld-19), patching the
//! assembler's unrelocated bytes must give exactly the linker's bytes.

use cpjit_runtime::model::HoleKind;
use cpjit_runtime::patch::{
    aarch64_veneer, in_range, patch, relax_aarch64_got_pair, relax_x86_got_load,
    relax_x86_got_load_constant, x86_64_veneer,
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

fn cases() -> [Case; 6] {
    [
        case!("elf_x86_64"),
        case!("elf_x86_64_relax"),
        case!("x86_const"),
        case!("elf_aarch64"),
        case!("elf_aarch64_relax"),
        case!("a64_const"),
    ]
}

/// One line of a `.holes` file.
enum Op {
    Patch(HoleKind, usize, u64, u64),
    RelaxX86Got(usize, u64, u64, bool),
    RelaxX86Const(usize, u64, bool),
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

fn parse(holes: &str) -> Vec<Op> {
    let mut ops = Vec::new();
    for line in holes
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let op = match f.as_slice() {
            ["patch", kind, off, place, value] => Op::Patch(
                HoleKind::from_name(kind).unwrap_or_else(|| panic!("kind {kind}")),
                num(off) as usize,
                num(place),
                num(value),
            ),
            ["relax-x86-got", off, place, value, expected] => {
                Op::RelaxX86Got(num(off) as usize, num(place), num(value), flag(expected))
            }
            ["relax-x86-const", off, constant, expected] => {
                Op::RelaxX86Const(num(off) as usize, num(constant), flag(expected))
            }
            ["relax-a64-got", adrp, ldr, place, slot, expected] => Op::RelaxA64Got(
                num(adrp) as usize,
                num(ldr) as usize,
                num(place),
                num(slot),
                flag(expected),
            ),
            _ => panic!("bad line {line:?}"),
        };
        ops.push(op);
    }
    ops
}

/// Applies every operation of `case` to its unrelocated bytes; returns the patched kinds.
fn apply(case: &Case, code: &mut [u8], scramble_first: bool) -> BTreeSet<HoleKind> {
    let mut kinds = BTreeSet::new();
    for op in parse(case.holes) {
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
            Op::RelaxX86Const(off, constant, expected) => {
                let got = relax_x86_got_load_constant(code, off, constant);
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
    let mut code = case.orig.to_vec();
    let kinds = apply(case, &mut code, scramble_first);
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
    let missing: Vec<HoleKind> = HoleKind::ALL
        .into_iter()
        .filter(|k| !covered.contains(k))
        .collect();
    assert!(missing.is_empty(), "no fixture for {missing:?}");
}

#[test]
fn fixtures_cover_every_relaxation_outcome() {
    let ops: Vec<Op> = cases().iter().flat_map(|c| parse(c.holes)).collect();
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
}
