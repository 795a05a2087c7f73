//! Many small traces share pages: 1,000 one-stencil traces map (commit) barely more than
//! they use, chunks only reserve the rest of their address space, and freed space is reused
//! without committing more.

use crate::common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::{Jit, JitOptions};

/// A trace that loads `start`, then adds 1 + 2 `adds` times (about 20 bytes of code
/// each) and returns: a large trace from few kinds of ops.
fn adding(
    jit: &Jit<'_>,
    start: u64,
    adds: usize,
) -> Result<(cpjit_runtime::Trace, cpjit_runtime::InstanceId), cpjit_runtime::Error> {
    let mut t = jit.trace();
    let shim = t.push_shim()?;
    t.push_named("op_load_got", &[start], &[])?;
    for _ in 0..adds {
        t.push_named("op_add_got", &[1, 2], &[])?;
    }
    t.push_named("op_return", &[], &[])?;
    Ok((t.finish()?, shim))
}

#[test]
fn a_thousand_tiny_traces_share_pages() {
    let jit = Jit::new(SET, resolve).unwrap();
    // `op_data_counter` falls through, so each trace loops back onto itself: one stencil
    // plus the tail jump the runtime appends.
    let traces: Vec<_> = (0..1000)
        .map(|_| {
            let mut t = jit.trace();
            let op = t.push_named("op_data_counter", &[], &[]).unwrap();
            t.continue_at(cpjit_runtime::Target::Instance(op));
            t.finish().unwrap()
        })
        .collect();
    let real: usize = traces
        .iter()
        .map(|t| t.code_range().len() + t.data_range().len())
        .sum();
    let stats = jit.memory_stats();
    println!(
        "1000 traces: real {real} B, used {} B ({} code + {} data), mapped {} B \
         ({} code + {} data), reserved {} B in {} chunk(s)",
        stats.used(),
        stats.code_used,
        stats.data_used,
        stats.mapped(),
        stats.code_mapped,
        stats.data_mapped,
        stats.reserved(),
        stats.chunks
    );
    assert_eq!(stats.traces, 1000);
    assert!(stats.used() <= 2 * real, "{stats:?} vs real {real}");
    // The bound: chunks are committed up to their high-water mark, rounded up to a page per
    // part, and first fit packs blocks that are never freed back to back; the only other
    // slack is alignment padding between blocks (the stencils' alignment is at most 16,
    // the granule, so none here) and the tail of the last block before `finish` shrinks it,
    // which the next trace reuses. So mapped <= 1.1 x used + one page per part per chunk.
    let page = page_size();
    let bound = stats.used() + stats.used() / 10 + 2 * page * stats.chunks;
    assert!(stats.mapped() <= bound, "{stats:?}: mapped above {bound}");
    assert!(stats.code_used <= stats.code_mapped && stats.data_used <= stats.data_mapped);
    // The default chunk reserves 1 MiB per part; reserving is counted separately.
    assert_eq!(stats.chunks, 1, "{stats:?}");
    assert_eq!(
        (stats.code_reserved, stats.data_reserved),
        (1 << 20, 1 << 20)
    );
    drop(traces);
    let after = jit.memory_stats();
    assert_eq!((after.used(), after.traces), (0, 0));

    // Freed space is reused: mapping grows only as far as the new (larger) traces need past
    // what is already committed, and nothing new is reserved.
    let mapped = after.mapped();
    assert_eq!(mapped, stats.mapped(), "freeing does not decommit");
    let again: Vec<_> = (0..1000)
        .map(|_| common::returning_trace(&jit, &[("op_load_got", &[3])]))
        .collect();
    let s = jit.memory_stats();
    // Per part: these traces have no data (their operand is relaxed to an immediate, not
    // loaded from a GOT slot), so the data pages stay those the first traces committed.
    for (part, mapped_now, mapped_before, used) in [
        ("code", s.code_mapped, after.code_mapped, s.code_used),
        ("data", s.data_mapped, after.data_mapped, s.data_used),
    ] {
        let bound = used + used / 10 + page * s.chunks;
        assert!(
            mapped_now <= mapped_before.max(bound),
            "{s:?}: {part} mapped above {bound}"
        );
    }
    // RISC-V's GOT loads (auipc + ld) are not relaxed: there the operand keeps its slot.
    // (Each trace's data holds its instances' code offsets: two `u32`s, one granule.)
    if !cfg!(target_arch = "riscv64") {
        assert!(
            again.iter().all(|(t, _)| t.got_slots() == 0),
            "a GOT slot for a relaxed operand"
        );
        assert_eq!(s.data_used, 16 * again.len(), "{s:?}");
    }
    assert_eq!((s.reserved(), s.chunks), (stats.reserved(), 1));
    for (trace, shim) in &again {
        assert_eq!(run(trace, *shim, &mut Frame::default()), 3);
    }
}

#[test]
fn a_trace_larger_than_a_chunk_gets_its_own() {
    let options = cpjit_runtime::JitOptions {
        chunk_bytes: 4096,
        ..Default::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let (trace, shim) = adding(&jit, 0, 2000).unwrap();
    assert!(trace.code_range().len() > 4096);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 6000);
}

#[test]
fn one_chunk_commits_more_as_it_fills_and_reuses_before_growing() {
    // A chunk of 4 MiB per part, filled by traces of a few hundred bytes: many commits.
    let options = JitOptions {
        chunk_bytes: 4 << 20,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let page = page_size();
    let mut traces = Vec::new();
    let mut commits = 0;
    let mut mapped = 0;
    while traces.len() < 3000 {
        let mut t = jit.trace();
        let shim = t.push_shim().unwrap();
        t.push_named("op_load_got", &[traces.len() as u64], &[])
            .unwrap();
        for _ in 0..4 {
            t.push_named("op_add_got", &[1, 2], &[]).unwrap();
        }
        t.push_named("op_return", &[], &[]).unwrap();
        traces.push((t.finish().unwrap(), shim));
        let s = jit.memory_stats();
        if s.mapped() != mapped {
            assert!(
                s.mapped() > mapped,
                "the committed prefix only grows: {s:?}"
            );
            commits += 1;
            mapped = s.mapped();
        }
        assert!(s.mapped() <= s.used() + s.used() / 10 + 2 * page, "{s:?}");
    }
    let s = jit.memory_stats();
    assert_eq!(s.chunks, 1, "{s:?}");
    assert!(s.mapped() < s.reserved() / 4, "{s:?}");
    assert!(commits >= 10, "{commits} commits for {s:?}");
    // Every trace runs: its committed code and data really are mapped as they must be.
    for (i, (trace, shim)) in traces.iter().enumerate() {
        assert_eq!(run(trace, *shim, &mut Frame::default()) as usize, i + 12);
    }
    // Free every other trace; the same number again fits in the holes without committing.
    let mut i = 0;
    traces.retain(|_| {
        i += 1;
        i % 2 == 0
    });
    let before = jit.memory_stats();
    for k in 0..1500u64 {
        let mut t = jit.trace();
        let shim = t.push_shim().unwrap();
        t.push_named("op_load_got", &[k], &[]).unwrap();
        for _ in 0..4 {
            t.push_named("op_add_got", &[1, 2], &[]).unwrap();
        }
        t.push_named("op_return", &[], &[]).unwrap();
        let trace = t.finish().unwrap();
        assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, k + 12);
        traces.push((trace, shim));
    }
    let after = jit.memory_stats();
    assert_eq!(after.traces, 3000);
    assert_eq!(
        (after.mapped(), after.reserved()),
        (before.mapped(), before.reserved())
    );
}

fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert!(page > 0);
        page as usize
    }
    #[cfg(windows)]
    {
        4096
    }
}

/// On Windows (run under wine here), what `VirtualQuery` reports matches the stats: the
/// trace's pages are committed RX (code) and RW (data), the pages after them only reserved.
#[cfg(windows)]
#[test]
fn windows_pages_past_the_high_water_mark_are_only_reserved() {
    use windows_sys::Win32::System::Memory::{
        VirtualQuery, MEMORY_BASIC_INFORMATION, MEM_COMMIT, MEM_RESERVE, PAGE_EXECUTE_READ,
        PAGE_READWRITE,
    };
    fn query(address: usize) -> MEMORY_BASIC_INFORMATION {
        // SAFETY: VirtualQuery fills the struct it is given, for any address.
        unsafe {
            let mut info = std::mem::zeroed();
            let n = VirtualQuery(
                address as *const _,
                &mut info,
                std::mem::size_of::<MEMORY_BASIC_INFORMATION>(),
            );
            assert_ne!(n, 0, "VirtualQuery({address:#x})");
            info
        }
    }
    let jit = Jit::new(SET, resolve).unwrap();
    let (trace, shim) = common::returning_trace(
        &jit,
        &[
            ("op_load_got", &[9]),
            // Data of its own (the operand is relaxed into an immediate, so it has no GOT slot).
            ("op_data_counter", &[]),
        ],
    );
    assert_eq!(run(&trace, shim, &mut Frame::default()), 9);
    let page = page_size();
    let code = query(trace.code_range().start);
    assert_eq!((code.State, code.Protect), (MEM_COMMIT, PAGE_EXECUTE_READ));
    let data = query(trace.data_range().start);
    assert_eq!((data.State, data.Protect), (MEM_COMMIT, PAGE_READWRITE));
    for range in [trace.code_range(), trace.data_range()] {
        let next = (range.end - 1) / page * page + page;
        assert_eq!(
            query(next).State,
            MEM_RESERVE,
            "page {next:#x} after {range:x?}"
        );
    }
    let s = jit.memory_stats();
    assert_eq!(
        (s.code_mapped, s.data_mapped, s.reserved()),
        (page, page, 2 << 20)
    );
}

/// Idle chunks are returned to the system beyond `JitOptions::idle_chunk_bytes` (issue 42):
/// measured in a child process, by the arena's stats, the process's descriptors and its
/// code mappings (`/proc/self/maps`). Traces larger than a chunk each get their own; once
/// all are freed, only the idle chunks that fit the limit stay, and traces still work.
/// (x86-64 only: the test binary runs itself again, which it cannot under qemu-user.)
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn idle_chunks_beyond_the_limit_are_returned_to_the_system() {
    common::in_child(
        "arena::idle_chunks_beyond_the_limit_are_returned_to_the_system",
        idle_chunks_in_a_child,
    );
}

/// A JIT dropped before its traces (several chunks' worth, one batch among them): each
/// trace keeps running and is freed on its own, and the last one freed frees the arena:
/// on x86-64 Linux, measured in a child process, its code object's descriptor and its code
/// mappings are then gone, and not before.
#[test]
fn traces_outlive_their_jit_and_the_last_frees_the_arena() {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    common::in_child(
        "arena::traces_outlive_their_jit_and_the_last_frees_the_arena",
        traces_outliving_their_jit,
    );
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    traces_outliving_their_jit();
}

fn traces_outliving_their_jit() {
    /// Open descriptors, and mappings of JIT code objects (none counted off Linux).
    fn resources() -> (usize, usize) {
        if !cfg!(target_os = "linux") {
            return (0, 0);
        }
        let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        (
            fds,
            maps.lines().filter(|l| l.contains("cpjit-code")).count(),
        )
    }
    let before = resources();
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    // Each about 20 KiB of code: several chunks even where a chunk is at least the
    // system's allocation granularity (64 KiB on Windows), not the 4 KiB asked for.
    const TRACES: u64 = 8;
    const ADDS: usize = 1000;
    let mut traces: Vec<_> = (0..TRACES)
        .map(|k| adding(&jit, k, ADDS).unwrap())
        .collect();
    let mut batch = jit.batch();
    for _ in 0..3 {
        let t = batch.trace();
        t.push_shim().unwrap();
        t.push_named("op_load_got", &[7], &[]).unwrap();
        t.push_named("op_return", &[], &[]).unwrap();
    }
    let batched = batch.finish().unwrap();
    assert!(jit.memory_stats().chunks > 1, "{:?}", jit.memory_stats());
    drop(jit);
    let held = resources();
    // Dropped in turns, the batch's traces among the others; every survivor still runs.
    for (k, t) in batched.into_iter().enumerate() {
        let shim = cpjit_runtime::InstanceId::from_index(0);
        assert_eq!(run(&t, shim, &mut Frame::default()), 7, "batched trace {k}");
        drop(t);
        traces.remove(0);
        for (trace, shim) in &traces {
            let start = run(trace, *shim, &mut Frame::default()) - 3 * ADDS as i64;
            assert!((0..TRACES as i64).contains(&start), "trace loading {start}");
        }
        assert_eq!(
            resources(),
            held,
            "the arena is held by {} traces",
            traces.len()
        );
    }
    drop(traces);
    assert_eq!(resources(), before, "the last trace freed the arena");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn idle_chunks_in_a_child() {
    /// Open descriptors, and mappings of JIT code objects.
    fn resources() -> (usize, usize) {
        let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let code = maps.lines().filter(|l| l.contains("cpjit-code")).count();
        (fds, code)
    }
    /// A trace of about 20 KiB of code: larger than a 4 KiB chunk.
    fn large(jit: &Jit<'_>) -> (cpjit_runtime::Trace, cpjit_runtime::InstanceId) {
        adding(jit, 0, 1000).unwrap()
    }
    for idle_chunk_bytes in [usize::MAX, 0, 200 << 10] {
        let options = JitOptions {
            chunk_bytes: 4096,
            idle_chunk_bytes,
            ..JitOptions::default()
        };
        let before = resources();
        let jit = Jit::with_options(SET, resolve, options).unwrap();
        let traces: Vec<_> = (0..20).map(|_| large(&jit)).collect();
        let full = jit.memory_stats();
        let (full_fds, full_maps) = resources();
        assert_eq!(full.chunks, 20, "{full:?}");
        assert_eq!(full_fds, before.0 + 1, "one descriptor for all chunks");
        assert!(full_maps >= before.1 + 20, "{full_maps} code mappings");
        let chunk = full.reserved() / 20;
        drop(traces);
        let idle = jit.memory_stats();
        let (fds, maps) = resources();
        println!(
            "idle_chunk_bytes {idle_chunk_bytes}: 20 chunks of {chunk} bytes, {} reserved \
             ({} mapped, {full_fds} fds, {full_maps} code mappings); all freed: {} chunks, \
             {} reserved ({} mapped, {fds} fds, {maps} code mappings)",
            full.reserved(),
            full.mapped(),
            idle.chunks,
            idle.reserved(),
            idle.mapped()
        );
        let kept = match idle_chunk_bytes {
            usize::MAX => 20,
            limit => limit / chunk,
        };
        assert_eq!(idle.chunks, kept, "{idle:?}");
        assert_eq!(idle.reserved(), kept * chunk);
        assert!(idle.mapped() <= idle.reserved() && idle.traces == 0);
        assert_eq!(fds, before.0 + 1, "the arena's one code object stays open");
        assert!(maps <= before.1 + 2 * kept, "{maps} code mappings");
        // Traces are still stitched and run, in kept chunks or new ones.
        let again: Vec<_> = (0..25).map(|_| large(&jit)).collect();
        for (trace, shim) in &again {
            assert_eq!(run(trace, *shim, &mut Frame::default()), 3000);
        }
        assert_eq!(jit.memory_stats().chunks, 25);
        drop(again);
        drop(jit);
        assert_eq!(
            resources().0,
            before.0,
            "dropping the JIT closes every descriptor"
        );
    }
    // A chunk is returned only once its last trace is freed.
    let options = JitOptions {
        idle_chunk_bytes: 0,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let (a, b) = (large(&jit), large(&jit));
    assert_eq!(jit.memory_stats().chunks, 1);
    drop(a);
    assert_eq!(jit.memory_stats().chunks, 1);
    assert_eq!(run(&b.0, b.1, &mut Frame::default()), 3000);
    drop(b);
    assert_eq!(jit.memory_stats().chunks, 0);
}

/// A JIT's chunks share one code descriptor (issue 42): under a descriptor limit only a few
/// above what the process has open (`ulimit -n`), 200 chunks are still reserved and run.
/// Before, each chunk's `memfd_create` took a descriptor and failed past the limit.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn many_chunks_fit_under_a_small_descriptor_limit() {
    common::in_child(
        "arena::many_chunks_fit_under_a_small_descriptor_limit",
        || {
            let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
            let limit = libc::rlimit {
                rlim_cur: open + 8,
                rlim_max: open + 8,
            };
            // SAFETY: setrlimit reads the struct it is given.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
            let options = JitOptions {
                chunk_bytes: 4096,
                ..JitOptions::default()
            };
            let jit = Jit::with_options(SET, resolve, options).unwrap();
            // Each about 20 KiB of code: larger than a chunk, so a chunk each.
            let traces: Vec<_> = (0..200u64)
                .map(|i| {
                    let (trace, shim) = adding(&jit, i, 1000)
                        .unwrap_or_else(|e| panic!("chunk {i} under {open} + 8 descriptors: {e}"));
                    (trace, shim, i)
                })
                .collect();
            assert_eq!(jit.memory_stats().chunks, 200);
            for (trace, shim, i) in &traces {
                assert_eq!(run(trace, *shim, &mut Frame::default()) as u64, i + 3000);
            }
        },
    );
}

/// A trace built again where a freed one was (a JIT that compiles and drops programs one
/// after another) costs one write system call, and two with `trap_freed_code` (the freed
/// block overwritten with traps), and no page: the block's page stays in the code object
/// between the two (`mincore` on its executable view), so the write never makes the kernel
/// allocate and clear a page again (about 1.1 µs more per write, `memory/mod.rs`). Wave 37
/// found the one `pwrite` to be the whole of the default's cost over the persistent alias
/// in the ebpf-jit example's compile; this keeps it one, on a page the file holds. Counted
/// on this thread (`syscw` of `/proc/thread-self/io`), with `CodeWrites::WithoutKeys` so
/// that every machine writes code with `pwrite`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_trace_built_again_in_a_freed_block_costs_one_write_and_no_new_page() {
    /// Write system calls this thread has made so far.
    fn writes() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        let line = io.lines().find(|l| l.starts_with("syscw:")).unwrap();
        line["syscw:".len()..].trim().parse().unwrap()
    }
    /// Whether the code object holds the page at `page` (its executable view).
    fn resident(page: usize) -> bool {
        let mut held = 0u8;
        // SAFETY: `page` is page-aligned and mapped (the chunk stays while the JIT lives);
        // mincore writes one byte for one page.
        let status = unsafe { libc::mincore(page as *mut _, 1, &mut held) };
        assert_eq!(status, 0, "mincore: {}", std::io::Error::last_os_error());
        held & 1 == 1
    }
    for trap in [false, true] {
        let options = JitOptions {
            code_writes: cpjit_runtime::CodeWrites::WithoutKeys,
            trap_freed_code: trap,
            ..JitOptions::default()
        };
        let jit = Jit::with_options(SET, resolve, options).unwrap();
        let first = adding(&jit, 0, 3).unwrap().0;
        let page = first.code_range().start & !(page_size() - 1);
        drop(first);
        let before = writes();
        for k in 1..=50u64 {
            let (trace, shim) = adding(&jit, k, 3).unwrap();
            let start = trace.code_range().start;
            assert_eq!(
                start & !(page_size() - 1),
                page,
                "trace {k} moved to {start:#x}"
            );
            assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, k + 9);
            drop(trace);
            assert!(resident(page), "trace {k}'s page left the code object");
        }
        let per_trace = 1 + u64::from(trap);
        assert_eq!(
            writes() - before,
            50 * per_trace,
            "write system calls for 50 traces built and freed (trap_freed_code: {trap})"
        );
    }
}
