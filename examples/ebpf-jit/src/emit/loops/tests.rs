//! The loop recognisers' unit tests: the shapes guarded, with their extents and bounds,
//! and the near misses a guard cannot prove (each refused for the reason it names).

use super::*;

type Raw = (u8, u8, u8, i16, i32);

/// The loops found in `prog` with instruction `k` replaced by `insn`.
fn find_changed(prog: &[Raw], k: usize, insn: Raw) -> Vec<Loop> {
    let mut p = prog.to_vec();
    p[k] = insn;
    find(&asm(&p))
}

/// The bytecode of (opcode, dst, src, off, imm) tuples.
fn asm(insns: &[Raw]) -> Vec<u8> {
    let insn = |&(opc, dst, src, off, imm)| crate::Insn {
        opc,
        dst,
        src,
        off,
        imm,
    };
    insns.iter().flat_map(|i| insn(i).encode()).collect()
}

/// The checksum loop of benches/compare.rs, with a second load past the `add`.
const CHECKSUM: [Raw; 7] = [
    (0xbf, 2, 1, 0, 0),  // mov r2, r1
    (0x69, 4, 2, 0, 0),  // loop: ldxh r4, [r2]
    (0x0f, 0, 4, 0, 0),  // add r0, r4
    (0x07, 2, 0, 0, 2),  // add r2, 2
    (0x71, 5, 2, -3, 0), // ldxb r5, [r2 - 3]
    (0xad, 2, 3, -5, 0), // jlt r2, r3, loop
    (0x95, 0, 0, 0, 0),  // exit
];

#[test]
fn a_pointer_loop_is_guarded_with_its_accesses_extent() {
    let loops = find(&asm(&CHECKSUM));
    // Accesses at p + 0 (2 bytes) and p + 2 - 3 (1 byte): [p - 1, p + 2).
    assert_eq!(
        loops,
        [Loop {
            head: 1,
            end: 5,
            p: 2,
            bound: Bound::Pointer { q: 3, step: 2 },
            lo: -1,
            span: 3,
            copy_at: 0,
            split: None,
        }]
    );
    let mut swapped = CHECKSUM;
    swapped[5] = (0x2d, 3, 2, -5, 0); // jgt r3, r2, loop
    assert_eq!(find(&asm(&swapped)), loops);
}

#[test]
fn loops_a_guard_cannot_prove_are_not_guarded() {
    for (k, insn, why) in [
        (3, (0x07, 2, 0, 0, 0), "a step of 0"),
        (3, (0x07, 2, 0, 0, -2), "a negative step"),
        (3, (0x04, 2, 0, 0, 2), "a 32-bit add"),
        (2, (0x0f, 3, 4, 0, 0), "q written"),
        (2, (0x0f, 2, 4, 0, 0), "p written twice"),
        (1, (0x69, 4, 1, 0, 0), "an access at another base"),
        (1, (0x69, 2, 2, 0, 0), "p loaded"),
        (2, (0x55, 4, 0, 1, 0), "a jump in the body"),
        (2, (0x85, 0, 0, 0, 1), "a call in the body"),
        (5, (0xad, 2, 2, -5, 0), "p compared with itself"),
        (5, (0xa5, 2, 0, -5, 9), "a bound that is an immediate"),
        (5, (0xcd, 2, 3, -5, 0), "a signed compare"),
    ] {
        assert_eq!(find_changed(&CHECKSUM, k, insn), [], "{why}");
    }
    // No `add` at all.
    let mut p = CHECKSUM.to_vec();
    p.remove(3);
    p[4].3 = -4;
    assert_eq!(find(&asm(&p)), [], "no add");
}

/// The sieve's inner loop of benches/compare.rs, with a load past the store.
const SIEVE: [Raw; 9] = [
    (0xbf, 5, 2, 0, 0),     // mov r5, r2
    (0x35, 5, 0, 6, 16384), // inner: jge r5, N, next
    (0xbf, 3, 1, 0, 0),     // mov r3, r1
    (0x0f, 3, 5, 0, 0),     // add r3, r5
    (0x72, 3, 0, 0, 1),     // stb [r3], 1
    (0x0f, 5, 2, 0, 0),     // add r5, r2
    (0x61, 4, 3, -2, 0),    // ldxw r4, [r3 - 2]
    (0x05, 0, 0, -7, 0),    // ja inner
    (0x95, 0, 0, 0, 0),     // next: exit
];

#[test]
fn an_index_loop_is_guarded_with_its_base_and_bound() {
    // Accesses at r1 + r5 + 0 (1 byte) and - 2 (4 bytes): [b + i - 2, b + i + 2).
    assert_eq!(
        find(&asm(&SIEVE)),
        [Loop {
            head: 1,
            end: 7,
            p: 1,
            bound: Bound::Index { n: 16384 },
            lo: -2,
            span: 4,
            copy_at: 0,
            split: None,
        }]
    );
    let mut swapped = SIEVE;
    swapped[3] = (0x0f, 3, 1, 0, 0); // mov r3, r5; add r3, r1
    swapped[2] = (0xbf, 3, 5, 0, 0);
    assert_eq!(find(&asm(&swapped)).len(), 1);
}

#[test]
fn index_loops_a_guard_cannot_prove_are_not_guarded() {
    for (k, insn, why) in [
        (5, (0x0f, 1, 2, 0, 0), "the base written"),
        (2, (0xbf, 3, 4, 0, 0), "a base the loop writes (r4, loaded)"),
        (3, (0x07, 3, 0, 0, 1), "no index added"),
        (3, (0x1f, 3, 5, 0, 0), "the index subtracted"),
        (2, (0x07, 5, 0, 0, 1), "the index moved before the address"),
        (1, (0x3d, 5, 2, 6, 0), "a bound in a register"),
        (1, (0x35, 5, 0, 1, 16384), "an exit inside the loop"),
        (1, (0x75, 5, 0, 6, 16384), "a signed bound"),
        (6, (0x71, 4, 10, -2, 0), "an access at another base"),
        (6, (0x55, 4, 0, 0, 0), "a jump in the body"),
    ] {
        assert_eq!(find_changed(&SIEVE, k, insn), [], "{why}");
    }
}

/// The sieve of benches/compare.rs: a nest holding an index loop.
const NEST: [Raw; 18] = [
    (0xb7, 0, 0, 0, 0),       // mov r0, 0
    (0xb7, 2, 0, 0, 2),       // mov r2, 2
    (0xbf, 3, 1, 0, 0),       // outer: mov r3, r1
    (0x0f, 3, 2, 0, 0),       // add r3, r2
    (0x71, 4, 3, 0, 0),       // ldxb r4, [r3]
    (0x55, 4, 0, 9, 0),       // jne r4, 0, next
    (0x07, 0, 0, 0, 1),       // add r0, 1
    (0xbf, 5, 2, 0, 0),       // mov r5, r2
    (0x2f, 5, 2, 0, 0),       // mul r5, r2
    (0x35, 5, 0, 5, 16384),   // inner: jge r5, N, next
    (0xbf, 3, 1, 0, 0),       // mov r3, r1
    (0x0f, 3, 5, 0, 0),       // add r3, r5
    (0x72, 3, 0, 0, 1),       // stb [r3], 1
    (0x0f, 5, 2, 0, 0),       // add r5, r2
    (0x05, 0, 0, -6, 0),      // ja inner
    (0x07, 2, 0, 0, 1),       // next: add r2, 1
    (0xa5, 2, 0, -15, 16384), // jlt r2, N, outer
    (0x95, 0, 0, 0, 0),       // exit
];

#[test]
fn a_nest_is_guarded_with_its_index_loops_bounds() {
    // The block of the JNE at 5 (to 15) holds the inner loop: laid out of line.
    let nest = |n, most| Loop {
        head: 2,
        end: 16,
        p: 1,
        bound: Bound::Nest { i: 2, n, most },
        lo: 0,
        span: 1,
        copy_at: 0,
        split: Some(Split { from: 5, to: 15 }),
    };
    let inner = |n| Loop {
        bound: Bound::Index { n },
        copy_at: 18,
        ..SIEVE_INNER
    };
    assert_eq!(find(&asm(&NEST)), [nest(16384, 16384), inner(16384)]);
    // The guard takes the larger bound, the copy's test the nest's own.
    let wider = find_changed(&NEST, 9, (0x35, 5, 0, 5, 20000));
    assert_eq!(wider, [nest(16384, 20000), inner(20000)]);
    let narrower = find_changed(&NEST, 16, (0xa5, 2, 0, -15, 20000));
    assert_eq!(narrower, [nest(20000, 20000), inner(16384)]);
}

#[test]
fn nests_a_guard_cannot_prove_are_not_guarded() {
    let inner_only = [SIEVE_INNER];
    for (k, insn, why) in [
        (5, (0x55, 4, 0, 12, 0), "a jump out of the nest"),
        (5, (0x55, 4, 0, -4, 0), "a backward jump in the body"),
        (3, (0x0f, 3, 4, 0, 0), "an access not at b + i"),
        (6, (0x07, 1, 0, 0, 1), "the base written"),
        (6, (0x85, 0, 0, 0, 1), "a call in the body"),
        (16, (0xc5, 2, 0, -15, 16384), "a signed bound"),
    ] {
        assert_eq!(find_changed(&NEST, k, insn), inner_only, "{why}");
    }
    // The inner loop at another base, or writing i: only the inner loop guarded.
    let other = find_changed(&NEST, 10, (0xbf, 3, 10, 0, 0));
    assert_eq!((other.len(), other[0].p), (1, 10), "another base");
    let writes_i = find_changed(&NEST, 13, (0x0f, 2, 5, 0, 0));
    assert_eq!(writes_i.len(), 1, "the inner loop writes i");
    // i written before the access (its control: r0 written there instead).
    let mut p = NEST;
    p[2] = (0x07, 0, 0, 0, 1); // add r0, 1
    p[3] = (0xbf, 3, 1, 0, 0); // mov r3, r1
    p[4] = (0x0f, 3, 2, 0, 0); // add r3, r2
    p[5] = (0x71, 4, 3, 0, 0); // ldxb r4, [r3]
    p[6] = (0x55, 4, 0, 8, 0); // jne r4, 0, next
    assert_eq!(find(&asm(&p)).len(), 2, "i written after the access");
    p[2] = (0x07, 2, 0, 0, 1); // add r2, 1
    assert_eq!(find(&asm(&p)), inner_only, "i written before the access");
    // r3 is b + i on one path to the access, r6 on the other (the jump skips the add).
    let mut p = NEST;
    p[2] = (0xbf, 3, 6, 0, 0); // mov r3, r6
    p[3] = (0x15, 4, 0, 2, 0); // jeq r4, 0, +2
    p[4] = (0xbf, 3, 1, 0, 0); // mov r3, r1
    p[5] = (0x0f, 3, 2, 0, 0); // add r3, r2
    p[6] = (0x71, 4, 3, 0, 0); // ldxb r4, [r3]
    assert_eq!(
        find(&asm(&p)),
        inner_only,
        "an address that depends on the path"
    );
}

#[test]
fn a_nest_lays_the_block_holding_its_index_loop_out_of_line() {
    let nest = find(&asm(&NEST))[0];
    // Its copy: 2..=5 (the JNE inverted), 15..=16, the JA out, the block 6..=14, the JA
    // back to 15.
    let order: Vec<usize> = (2..=16).map(|t| nest.copy_offset(t)).collect();
    assert_eq!(order, [0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15, 4, 5]);
    assert_eq!(nest.copy_len(), 1 + 15 + 1 + 1);
    // Any condition with an inverse, JMP32's too; JSET has none.
    for opc in [
        0x15, 0x25, 0x35, 0xa5, 0xb5, 0x65, 0x75, 0xc5, 0xd5, 0x5d, 0x56,
    ] {
        let changed = find_changed(&NEST, 5, (opc, 4, 0, 9, 0));
        assert_eq!(changed[0].split, nest.split, "{opc:#x}");
    }
    let jset = find_changed(&NEST, 5, (0x45, 4, 0, 9, 1));
    assert_eq!((jset.len(), jset[0].split), (2, None), "JSET");
    // A skipped block without the index loop: nothing laid out of line.
    let short = find_changed(&NEST, 5, (0x55, 4, 0, 2, 0));
    assert_eq!(
        (short.len(), short[0].split),
        (2, None),
        "a block without a loop"
    );
}

/// [`NEST`]'s inner loop guarded on its own.
const SIEVE_INNER: Loop = Loop {
    head: 9,
    end: 14,
    p: 1,
    bound: Bound::Index { n: 16384 },
    lo: 0,
    span: 1,
    copy_at: 0,
    split: None,
};

#[test]
fn copies_follow_each_other() {
    let mut p = CHECKSUM.to_vec();
    p.pop();
    p.extend_from_slice(&CHECKSUM);
    let loops = find(&asm(&p));
    assert_eq!(loops.len(), 2);
    assert_eq!((loops[1].head, loops[1].copy_at), (7, 6));
}

#[test]
fn unchecked_indices_cover_every_access_opcode_once() {
    let mut seen = [false; UNCHECKED];
    for opc in [
        0x61, 0x69, 0x71, 0x79, 0x62, 0x6a, 0x72, 0x7a, 0x63, 0x6b, 0x73, 0x7b,
    ] {
        let k = unchecked_index(opc);
        assert!(!seen[k], "{opc:#x}");
        seen[k] = true;
    }
}
