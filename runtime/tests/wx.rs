//! No page of the process is ever writable and executable at once, and data pages are not
//! executable: checked in `/proc/self/maps` after every state change (Linux only; qemu-user
//! emulates the file for the guest).
#![cfg(target_os = "linux")]

use crate::common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::{Jit, JitOptions};

/// (start, end, permissions) of every mapping.
fn maps() -> Vec<(usize, usize, String)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next().unwrap();
            let perms = fields.next().unwrap().to_string();
            let (a, b) = range.split_once('-').unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
                perms,
            )
        })
        .collect()
}

fn perms_at(maps: &[(usize, usize, String)], address: usize) -> &str {
    maps.iter()
        .find(|(a, b, _)| (*a..*b).contains(&address))
        .map(|(_, _, p)| p.as_str())
        .unwrap_or_else(|| panic!("{address:#x} is not mapped"))
}

fn assert_no_wx(when: &str) {
    for (a, b, p) in maps() {
        assert!(
            !(p.contains('w') && p.contains('x')),
            "{when}: {a:#x}-{b:#x} is {p}"
        );
    }
}

#[test]
fn no_page_is_ever_writable_and_executable() {
    assert_no_wx("at start");
    // Small chunks, so that the test also sees the arena grow.
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    assert_no_wx("after Jit::new");
    let mut traces = Vec::new();
    for i in 0..120u64 {
        let (trace, shim) = common::returning_trace(
            &jit,
            &[
                ("op_load_got", &[i]),
                ("op_data_counter", &[]),
                ("op_add_got", &[i, 1]),
            ],
        );
        assert_no_wx("after finish");
        let m = maps();
        let code = perms_at(&m, trace.code_range().start);
        assert!(code.starts_with("r-x"), "code mapped {code}");
        let data = perms_at(&m, trace.data_range().start);
        assert!(data.starts_with("rw-"), "data mapped {data}");
        assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, 2 * i + 1);
        assert_no_wx("after running");
        traces.push(trace);
    }
    assert!(
        jit.memory_stats().chunks > 1,
        "the arena grew: {:?}",
        jit.memory_stats()
    );
    while let Some(trace) = traces.pop() {
        drop(trace);
        assert_no_wx("after free");
    }
    drop(jit);
    assert_no_wx("after dropping the Jit");
}

#[test]
fn chunks_are_reserved_inaccessible_and_committed_only_as_far_as_used() {
    let jit = Jit::new(SET, resolve).unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let (trace, shim) =
        common::returning_trace(&jit, &[("op_load_got", &[7]), ("op_data_counter", &[])]);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 7);
    assert!(!trace.data_range().is_empty());
    let m = maps();
    let code = trace.code_range();
    let data = trace.data_range();
    assert!(perms_at(&m, code.start).starts_with("r-x"));
    assert!(perms_at(&m, data.start).starts_with("rw-"));
    // The rest of the 1 MiB code and data parts is reserved but not accessible.
    let code_next = (code.end - 1) / page * page + page;
    let data_next = (data.end - 1) / page * page + page;
    for (what, address) in [("code", code_next), ("data", data_next)] {
        let p = perms_at(&m, address);
        assert!(
            p.starts_with("---"),
            "{what} past the committed page is {p}"
        );
    }
    let stats = jit.memory_stats();
    assert_eq!((stats.code_mapped, stats.data_mapped), (page, page));
    assert_eq!(stats.reserved(), 2 << 20);
    assert_no_wx("with one trace");
}

/// Permissions of every mapping of the JIT's code object (the memfd named `cpjit-code`).
fn code_object_mappings() -> Vec<String> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|line| line.contains("memfd:cpjit-code"))
        .map(|line| line.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn no_writable_view_of_code_remains_after_finish_or_drop() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut traces = Vec::new();
    for i in 0..20u64 {
        let (trace, shim) =
            common::returning_trace(&jit, &[("op_load_got", &[i]), ("op_call_helper", &[])]);
        let views = code_object_mappings();
        assert!(
            views.iter().any(|p| p.starts_with("r-x")),
            "the code is mapped executable: {views:?}"
        );
        assert!(
            views.iter().all(|p| !p.contains('w')),
            "after finish, the code object is mapped {views:?}"
        );
        assert_eq!(run(&trace, shim, &mut Frame::default()), 1000 + i as i64);
        traces.push(trace);
    }
    // Dropping a trace writes traps over its code, through a window that is gone after.
    traces.truncate(5);
    let views = code_object_mappings();
    assert!(
        views.iter().all(|p| !p.contains('w')),
        "after drop: {views:?}"
    );
}

#[test]
fn batches_keep_code_never_writable_and_data_never_executable() {
    assert_no_wx("at start");
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut kept = Vec::new();
    for round in 0..6u64 {
        let mut batch = jit.batch();
        // More than a 4 KiB chunk holds: the batch gets a chunk of its own.
        for i in 0..40 {
            let t = batch.trace();
            t.push_shim().unwrap();
            t.push_named("op_load_got", &[round * 100 + i], &[])
                .unwrap();
            t.push_named("op_data_counter", &[], &[]).unwrap();
            t.push_named("op_add_got", &[i, 1], &[]).unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
        }
        let traces = batch.finish().unwrap();
        assert_no_wx("after finishing a batch");
        let views = code_object_mappings();
        assert!(
            views.iter().all(|p| !p.contains('w')),
            "after a batch, the code object is mapped {views:?}"
        );
        let m = maps();
        for (i, trace) in traces.iter().enumerate() {
            let code = perms_at(&m, trace.code_range().start);
            assert!(code.starts_with("r-x"), "code mapped {code}");
            let data = perms_at(&m, trace.data_range().start);
            assert!(data.starts_with("rw-"), "data mapped {data}");
            let shim = cpjit_runtime::InstanceId::from_index(0);
            let expected = round * 100 + 2 * i as u64 + 1;
            assert_eq!(run(trace, shim, &mut Frame::default()) as u64, expected);
        }
        assert_no_wx("after running a batch");
        // Half of each batch is freed at once, half kept to the end.
        kept.extend(traces.into_iter().step_by(2));
        assert_no_wx("after freeing part of a batch");
    }
    drop(kept);
    assert_no_wx("after freeing every batch");
}
