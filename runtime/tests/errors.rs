//! Every bad request is an error (never a panic) that names what was wrong.

use crate::common;
use common::{resolve, SET};
use cpjit_runtime::model::{Arch, HoleValue, Stencil, StencilSet};
use cpjit_runtime::{Error, InstanceId, Jit, JitOptions, Target};

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

/// The test set with `edit` applied to a copy of stencil `name`.
fn edited_set(
    name: &str,
    edit: impl FnOnce(&mut Stencil<'static>),
) -> &'static StencilSet<'static> {
    let mut stencils = SET.stencils.to_vec();
    let i = SET.index_of(name).unwrap();
    edit(&mut stencils[i]);
    leak(StencilSet {
        stencils: Box::leak(stencils.into_boxed_slice()),
        ..*SET
    })
}

fn message(e: Error) -> String {
    let text = e.to_string();
    assert!(!text.is_empty());
    text
}

#[test]
fn bad_pushes_are_rejected() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    let e = t.push(SET.stencils.len(), &[], &[]).unwrap_err();
    assert!(matches!(e, Error::UnknownStencilIndex { .. }), "{e:?}");
    let e = t.push_named("op_nonexistent", &[], &[]).unwrap_err();
    assert!(message(e).contains("`op_nonexistent`"));
    let e = t.push_named("op_add_got", &[1], &[]).unwrap_err();
    assert!(message(e).contains("`op_add_got` takes 2 operand(s), 1 given"));
    let e = t.push_named("op_dec_jump_nz", &[], &[]).unwrap_err();
    assert!(message(e).contains("`op_dec_jump_nz` takes 1 jump target(s), 0 given"));
    assert!(t.is_empty(), "rejected pushes add nothing");
    assert!(matches!(t.finish().unwrap_err(), Error::EmptyTrace));
}

/// A member the manifest pruned (`cached.prune`) is not in the set: asking for it by name
/// says which family pruned it, why, and what to do instead.
#[test]
fn a_pruned_member_asked_for_by_name_names_its_family_and_the_fix() {
    let set = leak(StencilSet {
        pruned: &[("op_stack_add_0_0", "stack"), ("op_stack_add_0_3", "stack")],
        ..*SET
    });
    let jit = Jit::new(set, resolve).unwrap();
    let e = jit.stencil_index("op_stack_add_0_3").unwrap_err();
    assert!(matches!(e, Error::PrunedMember { .. }), "{e:?}");
    let mut t = jit.trace();
    let text = message(t.push_named("op_stack_add_0_0", &[], &[]).unwrap_err());
    for says in [
        "stencil `op_stack_add_0_0` is a member of cached family `stack` that was pruned",
        "`prune = true` in `[family.cached]`",
        "push the op with `TraceBuilder::push_op`",
        "naming it in `cached.keep`",
    ] {
        assert!(text.contains(says), "{text}");
    }
    // A name no family pruned is still just unknown.
    let e = jit.stencil_index("op_stack_add_0_1").unwrap_err();
    assert!(matches!(e, Error::UnknownStencilName { .. }), "{e:?}");
    assert_eq!(
        jit.stencil_index("op_return").unwrap(),
        SET.index_of("op_return").unwrap()
    );
}

#[test]
fn a_jump_to_a_missing_instance_is_an_error() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named(
        "op_dec_jump_nz",
        &[],
        &[Target::Instance(InstanceId::from_index(7))],
    )
    .unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let text = message(t.finish().unwrap_err());
    assert!(
        text.contains("instance 1 (`op_dec_jump_nz`) jumps to instance 7"),
        "{text}"
    );
    assert_eq!(jit.memory_stats().used(), 0, "nothing allocated");
}

#[test]
fn symbols_are_resolved_lazily_and_unknown_ones_are_named() {
    // Nothing resolves: traces that call no helper still work.
    let jit = Jit::new(SET, |_| None).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[1], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    t.finish().unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let text = message(t.finish().unwrap_err());
    assert!(
        text.contains("unknown symbol `cpjit_test_helper` needed by instance 1 (`op_call_helper`)"),
        "{text}"
    );
}

#[test]
fn the_resolver_is_asked_once_per_symbol() {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let jit = Jit::new(SET, |name| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        resolve(name)
    })
    .unwrap();
    for _ in 0..3 {
        let mut t = jit.trace();
        t.push_shim().unwrap();
        t.push_named("op_call_helper", &[], &[]).unwrap();
        t.push_named("op_call_got", &[], &[]).unwrap();
        t.push_named("op_return", &[], &[]).unwrap();
        t.finish().unwrap();
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn a_trace_must_not_end_with_an_instance_that_continues() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let text = message(t.finish().unwrap_err());
    assert!(
        text.contains("trace ends with an instance that continues: instance 0 (`cpjit_entry`)"),
        "{text}"
    );
}

#[test]
fn a_trace_must_not_end_with_an_instance_that_falls_through() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_add_got", &[1, 2], &[]).unwrap();
    let text = message(t.finish().unwrap_err());
    assert!(
        text.contains("instance 1 (`op_add_got`) falls through"),
        "{text}"
    );
    // Given a continuation, the same trace is fine.
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let add = t.push_named("op_add_got", &[1, 2], &[]).unwrap();
    t.continue_at(Target::Instance(add));
    t.finish().unwrap();
}

/// A chunk size out of range is refused by `Jit::with_options`, naming the option, the
/// value and the range (`usize::MAX` overflowed a rounding in debug builds).
#[test]
fn chunk_sizes_out_of_range_are_refused_naming_the_option() {
    for chunk_bytes in [usize::MAX, 0, JitOptions::MAX_CHUNK_BYTES + 1, 1 << 40] {
        let options = JitOptions {
            chunk_bytes,
            ..JitOptions::default()
        };
        let Err(e) = Jit::with_options(SET, resolve, options) else {
            panic!("chunk_bytes = {chunk_bytes} was accepted");
        };
        assert!(
            matches!(e, Error::InvalidOption { option: "JitOptions::chunk_bytes", value, .. }
                if value == chunk_bytes),
            "{e:?}"
        );
        let text = message(e);
        assert!(
            text.contains(&format!(
                "JitOptions::chunk_bytes = {chunk_bytes} is out of range"
            )) && text.contains(&format!("from 1 to {}", JitOptions::MAX_CHUNK_BYTES)),
            "{text}"
        );
    }
    // The bounds themselves are fine (with room for two parts of the largest).
    for chunk_bytes in [1, JitOptions::MAX_CHUNK_BYTES] {
        let options = JitOptions {
            chunk_bytes,
            reserve_bytes: 2 * JitOptions::MAX_CHUNK_BYTES,
            ..JitOptions::default()
        };
        let jit = Jit::with_options(SET, resolve, options).unwrap();
        let mut t = jit.trace();
        t.push_named("op_return", &[], &[]).unwrap();
        t.finish().unwrap();
    }
}

#[test]
fn running_out_of_reserved_memory_is_an_error() {
    let options = JitOptions {
        reserve_bytes: 64 << 10,
        chunk_bytes: 16 << 10,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut traces = Vec::new();
    let e = loop {
        let mut t = jit.trace();
        t.push_shim().unwrap();
        for _ in 0..100 {
            t.push_named("op_add_got", &[1, 2], &[]).unwrap();
        }
        t.push_named("op_return", &[], &[]).unwrap();
        match t.finish() {
            Ok(trace) => traces.push(trace),
            Err(e) => break e,
        }
        assert!(traces.len() < 1000, "the limit was not enforced");
    };
    let text = message(e);
    assert!(text.starts_with("out of JIT memory"), "{text}");
    assert!(jit.memory_stats().mapped() <= 64 << 10);
}

#[test]
fn a_set_for_another_architecture_is_rejected() {
    let other = match SET.arch {
        Arch::X86_64 => Arch::Aarch64,
        Arch::Aarch64 | Arch::Riscv64 => Arch::X86_64,
    };
    let set = leak(StencilSet {
        arch: other,
        target: "elsewhere",
        ..*SET
    });
    let text = message(Jit::new(set, resolve).err().unwrap());
    assert!(text.contains("`elsewhere`"), "{text}");
}

#[test]
fn malformed_stencils_are_rejected_up_front() {
    let set = edited_set("op_load_got", |s| {
        let mut holes = s.holes.to_vec();
        holes[0].offset = s.code.len() as u32;
        s.holes = Box::leak(holes.into_boxed_slice());
    });
    let text = message(Jit::new(set, resolve).err().unwrap());
    assert!(
        text.contains("invalid stencil `op_load_got`") && text.contains("extends past"),
        "{text}"
    );

    let set = edited_set("op_load_got", |s| {
        let mut holes = s.holes.to_vec();
        holes[0].value = HoleValue::Operand(3);
        s.holes = Box::leak(holes.into_boxed_slice());
    });
    let text = message(Jit::new(set, resolve).err().unwrap());
    assert!(text.contains("operand[3]"), "{text}");

    let no_shim = leak(StencilSet { shim: None, ..*SET });
    let jit = Jit::new(no_shim, resolve).unwrap();
    assert!(matches!(jit.trace().push_shim(), Err(Error::NoShim { .. })));
}

/// A PC-relative data reference cannot reach an operand 64 TiB away: the patch error
/// names the stencil, instance, hole and value, and the trace's memory is returned.
#[test]
fn an_unencodable_value_is_a_patch_error() {
    let set = edited_set("op_load_data_abs", |s| {
        let mut holes: Vec<_> = s.code_holes().copied().collect();
        for h in &mut holes {
            h.value = HoleValue::Operand(0);
        }
        s.holes = Box::leak(holes.into_boxed_slice());
        s.init_data = &[];
        s.data_len = 0;
    });
    let jit = Jit::new(set, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_data_abs", &[0x4000_0000_0000], &[])
        .unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let e = t.finish().unwrap_err();
    assert!(std::error::Error::source(&e).is_some());
    let text = message(e);
    assert!(
        text.contains("instance 1 (`op_load_data_abs`)") && text.contains("operand[0]"),
        "{text}"
    );
    assert_eq!(
        jit.memory_stats().used(),
        0,
        "the failed trace's memory was returned"
    );
}

/// Range checks are not debug assertions: the matrix runs this test binary built in
/// release mode (ci/matrix.toml), where a PC-relative reference to an address out of its
/// field's reach must still be an error naming the stencil, not a wrapped displacement.
#[test]
fn an_address_out_of_a_holes_reach_is_an_error_in_release_builds_too() {
    use cpjit_runtime::model::{Hole, HoleKind, Section};
    use cpjit_runtime::patch::Problem;
    // `lea rax, [rip + X]; ret` / `adrp x0, X; ret`: a data reference, never veneered.
    let (code, kind, offset, addend): (&'static [u8], _, _, _) = match SET.arch {
        Arch::X86_64 => (
            &[0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xc3],
            HoleKind::X86Pc32,
            3,
            -4,
        ),
        Arch::Aarch64 => (
            &[0x00, 0x00, 0x00, 0x90, 0xc0, 0x03, 0x5f, 0xd6],
            HoleKind::Aarch64AdrPage21,
            0,
            0,
        ),
        // `auipc a0, %pcrel_hi(X); ret`
        Arch::Riscv64 => (
            &[0x17, 0x05, 0x00, 0x00, 0x82, 0x80],
            HoleKind::RiscvPcrelHi20,
            0,
            0,
        ),
    };
    let hole = Hole {
        section: Section::Code,
        offset,
        kind,
        value: HoleValue::Operand(0),
        addend,
    };
    let set = edited_set("op_return", |s| {
        s.code = code;
        s.holes = leak([hole]);
        s.operands = &["FAR"];
        s.falls_through = false;
    });
    let jit = Jit::new(set, resolve).unwrap();
    // 2^44 bytes away from this code: beyond ±2 GiB (rel32, auipc) and ±4 GiB (adrp).
    let here = an_address_out_of_a_holes_reach_is_an_error_in_release_builds_too as *const ();
    let far = (here as usize as u64) ^ (1 << 44);
    let mut t = jit.trace();
    t.push_named("op_return", &[far], &[]).unwrap();
    match t.finish() {
        Err(Error::Patch {
            stencil,
            instance: 0,
            hole: h,
            source,
        }) => {
            assert_eq!((stencil.as_str(), h), ("op_return", hole));
            assert!(
                matches!(source.problem, Problem::OutOfRange { .. }),
                "{source}"
            );
        }
        other => panic!(
            "expected a range error (debug assertions {}), got {other:?}",
            cfg!(debug_assertions)
        ),
    }
}

/// The entry shim sets up a native frame for the ops: it can only be a trace's first
/// instance, and never the destination of a jump or of the trace's continuation.
#[test]
fn the_entry_shim_is_only_an_entry() {
    let jit = Jit::new(SET, resolve).unwrap();
    let shim_name = SET.shim().unwrap().name;

    let mut t = jit.trace();
    t.push_named("op_load_got", &[1], &[]).unwrap();
    match t.push_shim() {
        Err(e @ Error::ShimNotFirst { .. }) => {
            let text = message(e);
            assert!(
                text.contains(shim_name) && text.contains("instance 1"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    let by_index = t.push(SET.shim.unwrap() as usize, &[], &[]);
    assert!(matches!(
        by_index,
        Err(Error::ShimNotFirst { instance: 1, .. })
    ));
    // First, but with an operand it does not take: refused by its counts, nothing pushed.
    let mut t = jit.trace();
    let counted = t.push(SET.shim.unwrap() as usize, &[7], &[]);
    assert!(
        matches!(
            counted,
            Err(Error::OperandCount {
                expected: 0,
                got: 1,
                ..
            })
        ),
        "{counted:?}"
    );
    assert!(t.is_empty());

    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_dec_jump_nz", &[], &[Target::Instance(shim)])
        .unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    match t.finish() {
        Err(e @ Error::ShimAsTarget { instance: 1, .. }) => {
            let text = message(e);
            assert!(
                text.contains(shim_name) && text.contains("op_dec_jump_nz"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }

    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    t.push_named("op_data_counter", &[], &[]).unwrap();
    t.continue_at(Target::Instance(shim));
    match t.finish() {
        Err(Error::ShimAsTarget {
            stencil,
            instance: 1,
            ..
        }) => assert_eq!(stencil, "op_data_counter"),
        other => panic!("{other:?}"),
    }
}

/// The shim's parameter count (`HoleKind::EntryParameters`) is checked once, and typed
/// entries of another arity are refused wherever they are asked for.
#[test]
fn typed_entries_follow_the_shims_declared_parameters() {
    use cpjit_runtime::model::{Hole, HoleKind, Section};
    type Two = unsafe extern "C" fn(*mut u8, *mut u64) -> i64;
    type Three = unsafe extern "C" fn(*mut u8, *mut u64, *mut u8) -> i64;
    let marker = |addend: i64, offset: u32| Hole {
        section: Section::Code,
        offset,
        kind: HoleKind::EntryParameters,
        value: HoleValue::Code,
        addend,
    };
    let shim_name = SET.shim().unwrap().name;
    let with_markers = |name: &str, markers: Vec<Hole>| {
        edited_set(name, |s| {
            let mut holes = s.holes.to_vec();
            holes.extend(markers);
            holes.sort();
            s.holes = Box::leak(holes.into_boxed_slice());
        })
    };

    let three = with_markers(shim_name, vec![marker(3, 0)]);
    let jit = Jit::new(three, resolve).unwrap();
    match jit.trace().push_shim() {
        Err(
            e @ Error::EntrySignature {
                expected: 3,
                declared: 2,
                ..
            },
        ) => assert!(message(e).contains(shim_name)),
        other => panic!("{other:?}"),
    }
    let mut t = jit.trace();
    let entry = t.push_shim_as::<Three>().unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert!(trace.entry_typed(entry).is_ok());
    assert!(matches!(
        trace.entry_as::<Two>(entry.id()),
        Err(Error::EntrySignature {
            expected: 3,
            declared: 2,
            ..
        })
    ));
    assert!(matches!(
        trace.entry_as::<Three>(InstanceId::from_index(1)),
        Err(Error::NotAnEntry { instance: 1 })
    ));
    // Without a shim first, no instance is an entry; the default shim takes two.
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    let first = t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert!(matches!(
        trace.entry_as::<Two>(first),
        Err(Error::NotAnEntry { instance: 0 })
    ));
    assert!(matches!(
        jit.trace().push_shim_as::<Three>(),
        Err(Error::EntrySignature {
            expected: 2,
            declared: 3,
            ..
        })
    ));

    // Malformed markers: on an op, twice, elsewhere than code+0, or a count past 6.
    for (name, markers, needle) in [
        ("op_return", vec![marker(3, 0)], "not the entry shim"),
        (shim_name, vec![marker(3, 0), marker(4, 0)], "more than one"),
        (shim_name, vec![marker(3, 1)], "code+0x1"),
        (shim_name, vec![marker(7, 0)], "declares 7 parameters"),
        (shim_name, vec![marker(0, 0)], "declares 0 parameters"),
    ] {
        match Jit::new(with_markers(name, markers), resolve) {
            Err(e @ Error::InvalidStencil { .. }) => {
                let text = message(e);
                assert!(text.contains(name) && text.contains(needle), "{text}");
            }
            other => panic!("{name} {needle}: {:?}", other.map(|_| ())),
        }
    }
}

/// `entry_fn` hands out only the entry shim (issue 41): a trace without one, an op of a
/// trace with one, and an id past the trace are refused with `NotAnEntry`, never a C-ABI
/// pointer to an op of the ops' own calling convention (nor a panic).
#[test]
fn entry_fn_refuses_every_instance_but_the_shim() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    let op = t.push_named("op_return", &[], &[]).unwrap();
    let no_shim = t.finish().unwrap();
    let e = no_shim.entry_fn(op).unwrap_err();
    assert!(matches!(e, Error::NotAnEntry { instance: 0 }), "{e:?}");
    let text = message(e);
    assert!(
        text.contains("instance 0 is not an entry shim")
            && text.contains("fix: push the shim first (`TraceBuilder::push_shim`)"),
        "{text}"
    );

    let mut t = jit.trace();
    let shim = t.push_shim().unwrap();
    let op = t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    for (id, instance) in [(op, 1), (InstanceId::from_index(99), 99)] {
        let e = trace.entry_fn(id).unwrap_err();
        assert!(
            matches!(e, Error::NotAnEntry { instance: i } if i == instance),
            "{e:?}"
        );
    }
    let entry = trace.entry_fn(shim).unwrap();
    assert_eq!(entry as usize, trace.entry(shim) as usize);
    // The typed entries refuse the same way.
    assert!(no_shim
        .entry_as::<cpjit_runtime::EntryFn>(InstanceId::from_index(0))
        .is_err());
}

/// `Trace::entry` of an id that is not the trace's panics, naming the id and the trace's
/// instance count (as its docs say).
#[test]
fn entry_of_an_instance_past_the_trace_panics_naming_it() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_return", &[], &[]).unwrap();
    let trace = t.finish().unwrap();
    assert_eq!(trace.entry(InstanceId::from_index(1)), entry_at(&trace, 1));
    let past = std::panic::AssertUnwindSafe(|| trace.entry(InstanceId::from_index(2)));
    let panic = std::panic::catch_unwind(past);
    let payload = panic.expect_err("an id past the trace");
    let text = payload
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert_eq!(text, "instance 2 is not in this trace (2 instances)");
}

/// Instance `index`'s address from the trace's offsets (what `entry` must give).
fn entry_at(trace: &cpjit_runtime::Trace, index: usize) -> *const u8 {
    (trace.code_range().start + trace.instance_offsets()[index] as usize) as *const u8
}

/// A set generated in another crate format is refused before anything of it is read, and
/// the message says how to regenerate it.
#[test]
fn a_set_of_another_crate_format_is_refused_with_the_regenerate_command() {
    let current = cpjit_runtime::model::format::VERSION;
    for found in [current.wrapping_sub(1), current + 1] {
        let old = leak(StencilSet {
            format_version: found,
            ..*SET
        });
        let Err(e) = Jit::new(old, resolve) else {
            panic!("a set of crate format {found} was accepted");
        };
        assert!(
            matches!(e, Error::StencilFormat { found: f, expected, .. } if f == found && expected == current),
            "{e:?}"
        );
        let text = message(e);
        assert!(text.contains("cpjit build-stencils"), "{text}");
        assert!(text.contains(&format!("format {found}")), "{text}");
    }
    assert!(Jit::new(SET, resolve).is_ok());
}
