//! Stitching and memory benches of the copy-and-patch runtime.
//!
//! Stitching: straight traces of 10 to 10,000 instances, from `push` to a callable
//! trace (copy, patch, publish the code with one `pwrite` to the chunk's memfd, icache
//! flush), pushed from a pre-lowered [`copy_patch::Plan`] (members selected beforehand), and
//! end to end from the op list (the kit's selection + push + finish,
//! [`copy_patch::select_stitch`]), the two alternated; the arena's chunk is
//! already reserved (amortised), and a separate row times a fresh `Jit` whose first trace
//! reserves its chunk. Each size alternates with a `memcpy` of the same code bytes into one
//! (cache-warm) buffer, the floor of any stitcher, so the ratio to it holds on a loaded
//! machine too. Two floor rows, timed in the same rounds, show what publishing a trace costs
//! the kernel at least (a null system call, and a `pwrite` of the smallest trace's code to a
//! memfd, which is how the runtime publishes code on Linux). Memory: 1,000 tiny and 100 large live traces; bytes used, bytes
//! mapped (pages the arena has committed) and bytes of the pages the traces actually touch.

use crate::copy_patch;
use crate::harness::{alternate, cpu_ratios, measure, ratios, time, Timed};
use crate::results::{MemoryRow, StitchRow};
use crate::workload::straight;
use cpjit_runtime::{Jit, JitOptions, Trace};
use std::collections::BTreeSet;

/// Stitching speed for each size in `sizes`, with a `memcpy` of the same code bytes as the
/// floor: all sizes and their copies are timed alternately, round by round.
pub fn stitching(sizes: &[usize], quick: bool) -> Result<Vec<StitchRow>, String> {
    let jit = copy_patch::jit()?;
    let runs = if quick { 5 } else { 21 };
    let mut cases = Vec::new();
    for &n in sizes {
        let spec = straight(n);
        let plan = copy_patch::plan(&jit, &spec)?;
        let ops = copy_patch::Ops::new(&jit, &spec)?;
        let code = copy_patch::stitch(&jit, &plan)?.code_bytes().to_vec();
        // About 2 ms of work per timed run.
        let batch = (200_000 / n).clamp(1, 2_000);
        cases.push((spec, plan, ops, code, batch));
    }
    // The per-trace floor of publishing code without a writable view of it (Linux): one
    // kernel entry, measured as a null system call and as the `pwrite` the runtime makes,
    // of the smallest trace's code, to a memfd of its own.
    let floor_bytes = cases.first().map_or(0, |c| c.3.len());
    let floor = KernelFloor::new(floor_bytes)?;
    let floor_batch = 200;
    // Every run records wall and thread CPU time (see `harness::Measured`).
    let mut ops = Vec::new();
    for (_, plan, list, code, batch) in &cases {
        let (jit, batch) = (&jit, *batch);
        let mut keep: Vec<Trace> = Vec::with_capacity(batch);
        ops.push(Timed::new(1, runs, move || {
            keep.clear();
            let (done, t) = time(|| -> Result<(), String> {
                for _ in 0..batch {
                    keep.push(copy_patch::stitch(jit, plan)?);
                }
                Ok(())
            });
            done?;
            Ok(t / batch as f64)
        }));
        // End to end: the kit selects each op's member as it pushes.
        let mut keep: Vec<Trace> = Vec::with_capacity(batch);
        let mut labels = Vec::new();
        ops.push(Timed::new(1, runs, move || {
            keep.clear();
            let (done, t) = time(|| -> Result<(), String> {
                for _ in 0..batch {
                    keep.push(copy_patch::select_stitch(jit, list, &mut labels)?);
                }
                Ok(())
            });
            done?;
            Ok(t / batch as f64)
        }));
        let mut copy = vec![0u8; code.len()];
        ops.push(Timed::new(1, runs, move || {
            let (_, t) = time(|| {
                for _ in 0..batch {
                    std::hint::black_box(&mut copy).copy_from_slice(std::hint::black_box(code));
                }
            });
            Ok(t / batch as f64)
        }));
    }
    ops.push(Timed::new(1, runs, || {
        let (_, t) = time(|| {
            for _ in 0..floor_batch {
                floor.null_syscall();
            }
        });
        Ok(t / floor_batch as f64)
    }));
    ops.push(Timed::new(1, runs, || {
        let (done, t) = time(|| (0..floor_batch).try_for_each(|_| floor.pwrite()));
        done?;
        Ok(t / floor_batch as f64)
    }));
    let rounds = alternate(&mut ops)?;
    drop(ops);
    let mut rows = Vec::new();
    for (i, (spec, _, _, code, batch)) in cases.iter().enumerate() {
        let copy = 3 * i + 2;
        for (at, what) in [
            (3 * i, "warm arena, pre-lowered (push + finish)"),
            (
                3 * i + 1,
                "warm arena, end to end (selection + push + finish)",
            ),
        ] {
            let mut row = StitchRow::new(
                what,
                spec.instances.len(),
                code.len(),
                rounds.sample(at, *batch),
            );
            row.memcpy = Some(rounds.sample(copy, *batch));
            row.ratio_to_memcpy = ratios(&rounds, at, copy);
            row.thread_cpu = Some(rounds.cpu_sample(at, *batch));
            row.memcpy_cpu = Some(rounds.cpu_sample(copy, *batch));
            row.cpu_ratio_to_memcpy = cpu_ratios(&rounds, at, copy);
            rows.push(row);
        }
    }
    let first = 3 * cases.len();
    let n0 = cases.first().map_or(0, |c| c.0.instances.len());
    rows.push(StitchRow::new(
        "floor: one system call (getppid)",
        n0,
        0,
        rounds.sample(first, floor_batch),
    ));
    rows.push(StitchRow::new(
        "floor: pwrite of the smallest trace's code to a memfd",
        n0,
        floor_bytes,
        rounds.sample(first + 1, floor_batch),
    ));
    // Cold: a new JIT each time, so its first trace maps (and faults in) a chunk.
    let n = *sizes.last().unwrap_or(&100);
    let spec = straight(n);
    // The same stencil set (`SET`) behind every `Jit`, so one plan serves them all.
    let plan = copy_patch::plan(&jit, &spec)?;
    let mut code_bytes = 0;
    let mut failure = None;
    let sample = measure(1, if quick { 3 } else { 11 }, || {
        let jit = match copy_patch::jit() {
            Ok(j) => j,
            Err(e) => {
                failure = Some(e);
                return 0;
            }
        };
        match copy_patch::stitch(&jit, &plan) {
            Ok(t) => {
                code_bytes = t.code_bytes().len();
                code_bytes
            }
            Err(e) => {
                failure = Some(e);
                0
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    rows.push(StitchRow::new(
        "new Jit (maps its chunk)",
        n,
        code_bytes,
        sample,
    ));
    Ok(rows)
}

/// Memory use of `count` live traces of `instances` instances each, with `options`.
pub fn memory(
    case: &str,
    count: usize,
    instances: usize,
    options: JitOptions,
) -> Result<MemoryRow, String> {
    let jit = Jit::with_options(copy_patch::set(), crate::workload::resolve, options)
        .map_err(|e| format!("cpjit-runtime: {e}"))?;
    let spec = straight(instances);
    let traces = (0..count)
        .map(|_| copy_patch::compile(&jit, &spec))
        .collect::<Result<Vec<_>, _>>()?;
    // Run every trace (so their code pages are really used) and check they agree.
    let expected = copy_patch::run(&traces[0], &spec);
    for (i, t) in traces.iter().enumerate() {
        let status = copy_patch::run(t, &spec);
        if status != expected {
            return Err(format!(
                "{case}: trace {i} returned {status}, trace 0 {expected}"
            ));
        }
    }
    let stats = jit.memory_stats();
    let real: usize = traces
        .iter()
        .map(|t| t.code_range().len() + t.data_range().len())
        .sum();
    let page = page_size();
    let mut pages = BTreeSet::new();
    for t in &traces {
        for r in [t.code_range(), t.data_range()] {
            if r.is_empty() {
                continue;
            }
            for p in (r.start / page)..=((r.end - 1) / page) {
                pages.insert(p);
            }
        }
    }
    let resident = resident_pages(&pages, page)?;
    Ok(MemoryRow {
        case: case.into(),
        traces: count,
        instances_per_trace: instances,
        chunk_bytes: options.chunk_bytes,
        real_bytes: real,
        used_bytes: stats.used(),
        mapped_bytes: stats.mapped(),
        touched_bytes: pages.len() * page,
        resident_bytes: resident * page,
        chunks: stats.chunks,
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// How many of `pages` (page numbers) are resident, by `mincore`.
fn resident_pages(pages: &BTreeSet<usize>, page: usize) -> Result<usize, String> {
    let mut resident = 0;
    for &p in pages {
        let mut vec = [0u8; 1];
        // SAFETY: one page of an address range this process has mapped (a live trace's).
        let rc = unsafe { libc::mincore((p * page) as *mut libc::c_void, page, vec.as_mut_ptr()) };
        if rc != 0 {
            return Err(format!(
                "mincore({:#x}): {}",
                p * page,
                std::io::Error::last_os_error()
            ));
        }
        resident += (vec[0] & 1) as usize;
    }
    Ok(resident)
}

/// A memfd and a buffer of code-sized bytes: what one `finish` costs the kernel at least.
struct KernelFloor {
    fd: libc::c_int,
    bytes: Vec<u8>,
}

impl KernelFloor {
    fn new(len: usize) -> Result<KernelFloor, String> {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(c"cpjit-bench-floor".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        let floor = KernelFloor {
            fd,
            bytes: vec![0xcc; len.max(1)],
        };
        // The page exists before timing, as a warm arena's pages do.
        floor.pwrite()?;
        Ok(floor)
    }

    fn null_syscall(&self) {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }

    fn pwrite(&self) -> Result<(), String> {
        let b = &self.bytes;
        // SAFETY: a valid buffer and our own descriptor.
        let n = unsafe { libc::pwrite(self.fd, b.as_ptr() as *const libc::c_void, b.len(), 0) };
        if n != b.len() as isize {
            return Err(format!(
                "pwrite to a memfd: {n} of {} bytes ({})",
                b.len(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

impl Drop for KernelFloor {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}
