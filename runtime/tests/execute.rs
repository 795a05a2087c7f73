//! Runs traces of the hand-written stencils natively (x86-64 System V / Microsoft x64) or
//! under qemu-aarch64, and checks every way a hole gets its value.

use crate::common;
use common::{exit_address, resolve, run, Frame, SET};
use cpjit_runtime::model::{StencilSet, ZeroFill, ZeroFillUse};
use cpjit_runtime::{InstanceId, Jit, JitOptions, Target, Trace};

const VALUES: [u64; 7] = [
    0,
    5,
    0x7fff_ffff,
    0x8000_0000,
    u64::MAX,
    0xffff_ffff_8000_0000,
    0x1234_5678_9abc_def0,
];

fn load_and_return(jit: &Jit<'_>, op: &str, value: u64) -> (Trace, InstanceId) {
    common::returning_trace(jit, &[(op, &[value])])
}

#[test]
fn operands_reach_the_code_through_got_abs64_and_data() {
    let jit = Jit::new(SET, resolve).unwrap();
    for op in ["op_load_got", "op_load_abs", "op_load_data_abs"] {
        for v in VALUES {
            let (trace, shim) = load_and_return(&jit, op, v);
            assert_eq!(
                run(&trace, shim, &mut Frame::default()) as u64,
                v,
                "{op} {v:#x}"
            );
        }
    }
}

#[test]
fn got_slots_are_deduplicated_per_trace() {
    let jit = Jit::new(SET, resolve).unwrap();
    let (trace, shim) = common::returning_trace(
        &jit,
        &[
            ("op_load_got", &[1]),
            ("op_add_got", &[5, 5]),
            ("op_add_got", &[5, 7]),
        ],
    );
    // Small constants become immediates where the instruction allows it (every load on
    // AArch64, `mov` loads on x86-64): at most the two values the x86 `add`s load. RISC-V's
    // GOT loads (auipc + ld) are not relaxed: one slot per distinct value (1, 5, 7).
    if cfg!(target_arch = "riscv64") {
        assert_eq!(trace.got_slots(), 3, "{trace:?}");
    } else {
        assert!(trace.got_slots() <= 2, "{trace:?}");
    }
    // No instance data: the instances' code offsets (`u32`s), then the GOT slots.
    let offsets = (4 * trace.instance_offsets().len()).next_multiple_of(8);
    assert_eq!(trace.data_range().len(), offsets + trace.got_slots() * 8);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 1 + 10 + 12);

    // Constants too large for an immediate and far from any code: one slot per value,
    // shared between a relaxable load and the other ops' loads.
    const BIG: u64 = 0x7654_3210_fedc_ba98;
    const BIG2: u64 = 0x6543_2100_0000_0008;
    let (trace, shim) = common::returning_trace(
        &jit,
        &[
            ("op_load_got", &[BIG]),
            ("op_add_got", &[BIG2, BIG2]),
            ("op_add_got", &[BIG, BIG2]),
        ],
    );
    assert_eq!(trace.got_slots(), 2, "slots for BIG and BIG2");
    let offsets = (4 * trace.instance_offsets().len()).next_multiple_of(8);
    assert_eq!(trace.data_range().len(), offsets + 2 * 8);
    let expected = BIG.wrapping_mul(2).wrapping_add(BIG2.wrapping_mul(3));
    assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, expected);
}

#[test]
fn helpers_are_called_directly_and_through_the_got() {
    let jit = Jit::new(SET, resolve).unwrap();
    let (trace, shim) = common::returning_trace(
        &jit,
        &[
            ("op_load_got", &[7]),
            ("op_call_helper", &[]),
            ("op_call_got", &[]),
        ],
    );
    let mut frame = Frame::default();
    assert_eq!(run(&trace, shim, &mut frame), 2007);
    assert_eq!(frame.helper_calls, 2);
    // The arena sits near this binary, so the helper is in direct reach: no veneer, and on
    // x86-64 `call [rip+G]` was relaxed to `addr32 call` (67 e8).
    assert_eq!(trace.veneers(), 0);
    if cfg!(target_arch = "x86_64") {
        assert!(trace.code_bytes().windows(2).any(|w| w == [0x67, 0xe8]));
    }
}

#[test]
fn jump_targets_make_loops() {
    let jit = Jit::new(SET, resolve).unwrap();
    assert_eq!(count_down(&jit, false), 35);
}

/// Runs `load 0; body: add 3 + 4; decrement the counter, jump to body unless 0; return`
/// with the counter at 5, its jump to the body's instance or (`label`) to a label placed
/// before it; returns what the trace returns, after checking the counter reached 0.
fn count_down(jit: &Jit<'_>, label: bool) -> i64 {
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_load_got", &[0], &[]).unwrap();
    let head = label.then(|| t.label().unwrap());
    if let Some(head) = head {
        t.place(head).unwrap();
    }
    let body = t.push_named("op_add_got", &[3, 4], &[]).unwrap();
    let target = head.map_or(Target::Instance(body), Target::Label);
    t.push_named("op_dec_jump_nz", &[], &[target]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    let mut frame = Frame {
        counter: 5,
        ..Frame::default()
    };
    let result = run(&trace, shim, &mut frame);
    assert_eq!(frame.counter, 0);
    result
}

/// A client that pushes members itself (`push`, not `push_op`) jumps to labels too: a
/// loop head placed before its body, and a forward label placed after the jump to it.
#[test]
fn plain_pushes_jump_to_labels() {
    let jit = Jit::new(SET, resolve).unwrap();
    assert_eq!(count_down(&jit, true), 35);
    // Forward, in the second trace of a batch (labels are per trace): the jump is taken
    // while the counter stays nonzero, skipping the 100.
    let mut batch = jit.batch();
    load_and_return_in(batch.trace(), "op_load_got", 1);
    let t = batch.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[0], &[]).unwrap();
    let skip = t.label().unwrap();
    t.push_named("op_dec_jump_nz", &[], &[Target::Label(skip)])
        .unwrap();
    t.push_named("op_add_got", &[100, 0], &[]).unwrap();
    t.place(skip).unwrap();
    t.push_named("op_add_got", &[3, 4], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let traces = batch.finish().unwrap();
    let shim = InstanceId::from_index(0);
    for (counter, sum) in [(2, 7), (1, 107)] {
        let mut frame = Frame {
            counter,
            ..Frame::default()
        };
        assert_eq!(run(&traces[1], shim, &mut frame), sum, "counter {counter}");
    }
}

/// A trace may continue at a label (`continue_at`), resolved by `finish` like a jump's:
/// here the last instance, reached by a jump, continues at a label placed earlier.
#[test]
fn a_trace_continues_at_a_label() {
    let jit = Jit::new(SET, resolve).unwrap();
    let (mut t, last) = (jit.trace(), Target::Instance(InstanceId::from_index(5)));
    let shim = t.push_shim().unwrap();
    t.push_named("op_load_got", &[0], &[]).unwrap();
    let again = t.label().unwrap();
    t.place(again).unwrap();
    t.push_named("op_add_got", &[3, 4], &[]).unwrap();
    t.push_named("op_dec_jump_nz", &[], &[last]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    t.push_named("op_add_got", &[100, 0], &[]).unwrap();
    t.continue_at(Target::Label(again));
    let trace = t.finish().unwrap();
    let mut frame = Frame {
        counter: 2,
        ..Frame::default()
    };
    // 7, the jump to the last instance (100), back at the label (7), then the return.
    assert_eq!(run(&trace, shim, &mut frame), 114);
    assert_eq!(frame.counter, 0);
}

/// Label mistakes of a plain-pushing client: placed twice, another trace's, never placed.
#[test]
fn plain_label_mistakes_are_refused() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let l = t.label().unwrap();
    t.place(l).unwrap();
    let e = t.place(l).unwrap_err().to_string();
    assert!(e.contains("label 0 is bound twice"), "{e}");
    let never = t.label().unwrap();
    t.push_named("op_dec_jump_nz", &[], &[Target::Label(never)])
        .unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let e = t.finish().unwrap_err().to_string();
    assert!(e.contains("1 jump(s) go to labels never bound"), "{e}");
    // A label of another builder (this one made none).
    let mut other = jit.trace();
    let e = other.place(l).unwrap_err().to_string();
    assert!(e.contains("is not a label of this trace (0 made)"), "{e}");
}

/// Pushes the shim, `op` with `value` and `op_return` into `t`.
fn load_and_return_in(t: &mut cpjit_runtime::TraceBuilder<'_, '_>, op: &str, value: u64) {
    t.push_shim().unwrap();
    t.push_named(op, &[value], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
}

/// A trace of two `op_data_counter` instances, then `op_return`.
fn two_counters(jit: &Jit<'_>) -> (Trace, InstanceId) {
    common::returning_trace(jit, &[("op_data_counter", &[]), ("op_data_counter", &[])])
}

#[test]
fn each_instance_has_its_own_data() {
    let jit = Jit::new(SET, resolve).unwrap();
    let build = || two_counters(&jit);
    let (a, shim_a) = build();
    let mut frame = Frame::default();
    run(&a, shim_a, &mut frame);
    assert_eq!(
        frame.data, 101,
        "the second instance counts in its own copy"
    );
    run(&a, shim_a, &mut frame);
    assert_eq!(frame.data, 102, "data is writable and persists across runs");
    let (b, shim_b) = build();
    run(&b, shim_b, &mut frame);
    assert_eq!(
        frame.data, 101,
        "a new trace starts from the stencil's initial data"
    );
}

/// Zero-fill is described once in the set and written as zeros per instance: a stencil whose
/// data holds a 4 KiB zero-fill section gets it zeroed in every instance, also in memory a
/// dropped trace left dirty, and its initialized bytes keep working.
#[test]
fn zero_fill_is_written_as_zeros_in_every_instance() {
    const ZERO_FILL: u32 = 4096;
    static TABLE: [ZeroFill<'static>; 1] = [ZeroFill {
        name: "test.s:.bss.op_data_counter",
        size: ZERO_FILL,
        align: 8,
    }];
    static USES: [ZeroFillUse; 1] = [ZeroFillUse {
        section: 0,
        offset: 8,
    }];
    let mut stencils = SET.stencils.to_vec();
    let counter = SET.index_of("op_data_counter").unwrap();
    assert_eq!(stencils[counter].init_data.len(), 8);
    stencils[counter].data_len = 8 + ZERO_FILL;
    stencils[counter].zero_fill = &USES;
    let set: &'static StencilSet<'static> = Box::leak(Box::new(StencilSet {
        stencils: Box::leak(stencils.into_boxed_slice()),
        zero_fill: &TABLE,
        ..*SET
    }));
    let jit = Jit::new(set, resolve).unwrap();
    let build = || two_counters(&jit);
    let instance_data = 2 * (8 + ZERO_FILL as usize);
    let (dirty, _) = build();
    let range = dirty.data_range();
    assert!(range.len() >= instance_data, "{range:?}");
    // SAFETY: the trace's data is mapped read-write and no code of it runs.
    unsafe { std::ptr::write_bytes(range.start as *mut u8, 0xa5, range.len()) };
    drop(dirty);

    let (trace, shim) = build();
    assert_eq!(
        trace.data_range().start,
        range.start,
        "the arena reuses the dirty block, so the test sees written zeros"
    );
    let mut frame = Frame::default();
    run(&trace, shim, &mut frame);
    assert_eq!(frame.data, 101, "each instance counts in its own copy");
    // SAFETY: as above; the trace is not running.
    let data =
        unsafe { std::slice::from_raw_parts(trace.data_range().start as *const u8, instance_data) };
    for (i, instance) in data.chunks(8 + ZERO_FILL as usize).enumerate() {
        assert_eq!(instance[..8], 101u64.to_le_bytes(), "instance {i}");
        assert!(
            instance[8..].iter().all(|&b| b == 0),
            "instance {i}: zero-fill not zero"
        );
    }
}

/// A zero-fill use that the set's table does not describe is refused by `Jit::new`.
#[test]
fn an_undescribed_zero_fill_section_is_rejected() {
    static USES: [ZeroFillUse; 1] = [ZeroFillUse {
        section: 0,
        offset: 8,
    }];
    let mut stencils = SET.stencils.to_vec();
    let counter = SET.index_of("op_data_counter").unwrap();
    stencils[counter].data_len = 16;
    stencils[counter].zero_fill = &USES;
    let set: &'static StencilSet<'static> = Box::leak(Box::new(StencilSet {
        stencils: Box::leak(stencils.into_boxed_slice()),
        ..*SET
    }));
    let text = Jit::new(set, resolve).err().unwrap().to_string();
    assert!(
        text.contains("op_data_counter") && text.contains("zero-fill"),
        "{text}"
    );
}

#[test]
fn conditional_continue_and_fall_through_chain() {
    let jit = Jit::new(SET, resolve).unwrap();
    for v in [0u64, 9] {
        let (trace, shim) = common::returning_trace(
            &jit,
            &[
                ("op_load_got", &[v]),
                ("op_skip_if_zero", &[]),
                ("op_skip_if_zero", &[]),
            ],
        );
        let mut frame = Frame::default();
        assert_eq!(run(&trace, shim, &mut frame) as u64, v);
        assert_eq!(frame.nonzero, if v == 0 { 0 } else { 2 });
    }
}

#[cfg(target_arch = "aarch64")]
#[test]
fn test_bit_branches_continue() {
    let jit = Jit::new(SET, resolve).unwrap();
    for (v, expected) in [(4u64, 4i64), (5, 6)] {
        let (trace, shim) = load_and_return_with(&jit, v, "op_skip_if_even");
        assert_eq!(run(&trace, shim, &mut Frame::default()), expected);
    }
}

#[cfg(target_arch = "aarch64")]
fn load_and_return_with(jit: &Jit<'_>, v: u64, op: &str) -> (Trace, InstanceId) {
    common::returning_trace(jit, &[("op_load_got", &[v]), (op, &[])])
}

#[test]
fn a_target_address_leaves_the_trace() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_load_got", &[21], &[]).unwrap();
    t.push_named("op_exit_to", &[], &[Target::Address(exit_address())])
        .unwrap();
    let trace = t.finish().unwrap();
    assert_eq!(run(&trace, shim, &mut Frame::default()), 42);
}

#[test]
fn the_last_instance_continues_where_the_caller_says() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let ret = t.push_named("op_return", &[], &[]).unwrap();
    let tail = t.finish().unwrap();
    for v in [0u64, 3] {
        let mut t = jit.trace();
        let shim = t.push_shim().unwrap();
        t.push_named("op_load_got", &[v], &[]).unwrap();
        t.push_named("op_skip_if_zero", &[], &[]).unwrap();
        t.continue_at(Target::Address(tail.entry(ret) as u64));
        let trace = t.finish().unwrap();
        let mut frame = Frame::default();
        // Both the taken `je CONTINUE` and the fall-through reach the other trace's return.
        assert_eq!(run(&trace, shim, &mut frame) as u64, v);
        assert_eq!(frame.nonzero, (v != 0) as i64);
    }
}

/// Placing the arena 80 TiB away from this binary forces every call to a helper and every
/// jump to a native address through a veneer (and keeps `call [rip+G]` unrelaxed).
#[test]
fn far_placement_uses_veneers() {
    let options = JitOptions {
        near: Some(0x5000_0000_0000),
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_load_got", &[4], &[]).unwrap();
    t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_call_got", &[], &[]).unwrap();
    t.push_named("op_exit_to", &[], &[Target::Address(exit_address())])
        .unwrap();
    let trace = t.finish().unwrap();
    let distance = (trace.code_range().start as u64).abs_diff(exit_address());
    assert!(
        distance > 1 << 32,
        "arena not placed far away: {distance:#x}"
    );
    assert_eq!(
        trace.veneers(),
        2,
        "one veneer per distinct destination: helper and exit"
    );
    let mut frame = Frame::default();
    assert_eq!(run(&trace, shim, &mut frame), 2 * 3004);
    assert_eq!(frame.helper_calls, 3);
}

/// An adjacent `adrp` + `ldr` GOT load of an operand is rewritten into instructions that
/// materialize the value (no memory load); a value that cannot be materialized that way
/// keeps the GOT load. Both must compute the same result.
#[cfg(target_arch = "aarch64")]
#[test]
fn adjacent_got_pairs_are_relaxed_to_immediates() {
    let jit = Jit::new(SET, resolve).unwrap();
    let word = |trace: &Trace, at: usize| {
        u32::from_le_bytes(trace.code_bytes()[at..at + 4].try_into().unwrap())
    };
    for (v, first, second) in [
        (5u64, 0xd280_00a8, 0xd503_201f),        // movz x8, #5; nop
        (0x1234_5678, 0xd28a_cf08, 0xf2a2_4688), // movz x8, #0x5678; movk x8, #0x1234, lsl #16
    ] {
        let (trace, shim) = load_and_return_with(&jit, v, "op_return");
        let at = trace.instance_offsets()[1] as usize;
        assert_eq!(
            (word(&trace, at), word(&trace, at + 4)),
            (first, second),
            "{v:#x}"
        );
        assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, v);
    }
    // Far from the code and wider than 32 bits: stays a GOT load (adrp + ldr).
    let v = 0x8000_0000_0000_0001u64;
    let (trace, shim) = load_and_return_with(&jit, v, "op_return");
    let at = trace.instance_offsets()[1] as usize;
    assert_eq!(word(&trace, at) & 0x9f00_0000, 0x9000_0000, "adrp");
    assert_eq!(
        word(&trace, at + 4) & 0xffc0_0000,
        0xf940_0000,
        "ldr x, [x, #imm]"
    );
    assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, v);
}

/// Builders reuse the vectors of earlier builders on the same thread (finished, dropped
/// unfinished, or failed): each new builder starts empty, and traces built after others
/// compute the same as the first.
#[test]
fn a_builder_starts_empty_whatever_the_previous_one_left() {
    let jit = Jit::new(SET, resolve).unwrap();
    let (first, shim) = load_and_return(&jit, "op_load_got", 41);
    // Left unfinished, with operands and a target pushed.
    let mut abandoned = jit.trace();
    abandoned.push_shim().unwrap();
    let body = abandoned.push_named("op_add_got", &[1, 2], &[]).unwrap();
    abandoned
        .push_named("op_dec_jump_nz", &[], &[Target::Instance(body)])
        .unwrap();
    drop(abandoned);
    // Failed: a wrong operand count is refused and changes nothing.
    let mut failed = jit.trace();
    failed.push_shim().unwrap();
    assert!(failed.push_named("op_load_got", &[1, 2], &[]).is_err());
    assert_eq!(failed.len(), 1);
    assert!(
        failed.finish().is_err(),
        "ends in the shim, which continues"
    );
    for round in 0..3 {
        let t = jit.trace();
        assert!(t.is_empty(), "round {round}");
        drop(t);
        let (again, shim2) = load_and_return(&jit, "op_load_got", 41);
        assert_eq!(again.instance_offsets(), first.instance_offsets());
        assert_eq!(run(&again, shim2, &mut Frame::default()), 41);
    }
    assert_eq!(run(&first, shim, &mut Frame::default()), 41);
}
