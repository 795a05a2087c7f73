//! The side-by-side bench: the same traces compiled by copy-and-patch, LLVM -O0/-O2 and
//! Cranelift (memory and SSA translations, `opt_level` none and speed); compile time for
//! straight traces of 10 to 10,000 instances, compile and run time for the counting loop.
//! Every backend's run is checked against copy-and-patch's (exit status and helper
//! checksum) before it is timed.
//!
//! All backends of one trace are timed alternately, round by round ([`alternate`]), and
//! each row carries its ratio to copy-and-patch computed run by run from the same rounds.

use crate::copy_patch;
use crate::cranelift::{Compiler, Variant};
use crate::harness::{alternate, collect_n, cpu_ratios, ratios, time, Measured, Rounds, Timed};
use crate::peer::{self, library, Level};
use crate::results::PeerRow;
use crate::workload::{self, counting_loop, straight, TraceSpec, LOOP_BODY_INSTANCES};
use cpjit_runtime::{CodeWrites, Jit};
use inkwell::context::Context;
use std::path::Path;

/// The test stencils the synthetic traces use.
const STENCILS: &[&str] = &[
    "cpjit_entry",
    "op_test_push",
    "op_test_push2",
    "op_test_add",
    "op_test_helper",
    "op_test_table",
    "op_test_counter",
    "op_test_addr_addend",
    "op_test_dec_jump_nz",
    "op_test_pop",
    "op_test_exit",
];

/// Every backend of the peer bench, with its reusable state.
struct Backends<'ctx> {
    jit: Jit<'static>,
    /// Copy-and-patch writing code through a persistent alias (Linux; `None` elsewhere).
    alias_jit: Option<Jit<'static>>,
    context: &'ctx Context,
    lib: library::Library<'ctx>,
    cranelift: Vec<Compiler>,
    /// Timed runs of the cheap backends (the expensive ones run fewer, see [`llvm_runs`]).
    runs: usize,
}

/// One result row's backend name and opt level.
type Name = (&'static str, Option<&'static str>);

/// Copy-and-patch end to end: the op list, the kit's selection + push + finish
/// (`copy_patch::select_stitch`).
const COPY_AND_PATCH: Name = ("copy-and-patch", None);
/// Copy-and-patch stitching a pre-lowered plan (members selected beforehand, off the clock):
/// push + finish only.
const COPY_AND_PATCH_PRELOWERED: Name = ("copy-and-patch", Some("pre-lowered"));
/// Copy-and-patch with the uncached test ops (`copy_patch::plan_exact`), as the bench ran
/// before the register-cached variants: the same run's before/after comparison.
const COPY_AND_PATCH_UNCACHED: Name = ("copy-and-patch", Some("uncached ops"));
/// Copy-and-patch (cached ops, end to end) writing code through a persistent alias
/// (`CodeWrites::PersistentAlias`): no system call per trace or batch.
const COPY_AND_PATCH_ALIAS: Name = ("copy-and-patch", Some("persistent alias"));

fn cranelift_name(v: Variant) -> Name {
    (v.backend(), Some(v.opt_level()))
}

/// Runs the peer bench on straight traces of `sizes` and the counting loop; backends left out
/// of a trace (too slow to measure) are added to `skipped` with the reason.
pub fn run(
    root: &Path,
    sizes: &[usize],
    quick: bool,
    skipped: &mut Vec<(String, String)>,
) -> Result<Vec<PeerRow>, String> {
    let ir = library::template_bitcode(
        &root.join("templates"),
        &root.join("targets"),
        &["shim.c", "testing/holes.c"],
    )?;
    let context = Context::create();
    let mut b = Backends {
        jit: copy_patch::jit()?,
        alias_jit: if cfg!(target_os = "linux") {
            Some(copy_patch::jit_writing(CodeWrites::PersistentAlias)?)
        } else {
            None
        },
        context: &context,
        lib: library::Library::new(&context, &ir, STENCILS)?,
        cranelift: Variant::ALL
            .into_iter()
            .map(|v| Compiler::new(v, workload::resolve))
            .collect::<Result<_, _>>()?,
        runs: if quick { 3 } else { 11 },
    };
    let mut rows = Vec::new();
    for &n in sizes {
        eprintln!("bench:   straight-{n} ...");
        if llvm_levels(n).is_empty() {
            skipped.push((
                format!("peer: LLVM -O0 and -O2 on straight-{n}"),
                format!(
                    "one compile takes minutes (the cost grows faster than linearly: about \
                     1–2 s at -O0 and 12 s at -O2 for {LLVM_LIMIT} instances, 176 s at -O0 \
                     for 10,000 in one run)"
                ),
            ));
        }
        rows.extend(compile_rows(&mut b, &straight(n), None)?);
    }
    eprintln!("bench:   counting loop ...");
    let rounds: u64 = if quick { 200_000 } else { 2_000_000 };
    let counting = counting_loop(rounds);
    rows.extend(loop_rows(&mut b, &counting, rounds)?);
    for spec in [straight(10), straight(100), counting] {
        eprintln!("bench:   batch of {BATCH} × {} ...", spec.name);
        rows.extend(batch_rows(&mut b, &spec)?);
    }
    Ok(rows)
}

/// Functions compiled together in the batch rows: a JIT that compiles many short functions
/// at once (a module, a hot set of methods) pays its per-compile fixed costs once per batch.
pub(crate) const BATCH: usize = 100;

/// Compile time per function of [`BATCH`] copies of `spec` compiled together: copy-and-patch
/// as one [`TraceBatch`](cpjit_runtime::TraceBatch) (one allocation, one `pwrite`, one
/// flush), each Cranelift variant as [`BATCH`] functions of one module with one
/// `finalize_definitions`. Every function's result is checked against copy-and-patch's.
fn batch_rows(b: &mut Backends<'_>, spec: &TraceSpec) -> Result<Vec<PeerRow>, String> {
    let jit = &b.jit;
    // Cranelift's op list, resolved once like copy-and-patch's (outside every clock).
    let cl_list = crate::cranelift::op_list(spec)?;
    let plan = copy_patch::plan(jit, spec)?;
    let cp = copy_patch::stitch_batch(jit, &plan, BATCH)?;
    let expected = outcome(|| copy_patch::run(&cp[0], spec));
    for trace in &cp[1..] {
        check(
            spec,
            "copy-and-patch (batch)",
            expected,
            outcome(|| copy_patch::run(trace, spec)),
        )?;
    }
    drop(cp);
    let list = copy_patch::Ops::new(jit, spec)?;
    for trace in &copy_patch::select_stitch_batch(jit, &list, BATCH, &mut Vec::new())? {
        check(
            spec,
            "copy-and-patch (end to end, batch)",
            expected,
            outcome(|| copy_patch::run(trace, spec)),
        )?;
    }
    let alias_plan = match &b.alias_jit {
        Some(alias_jit) => {
            let plan = copy_patch::Ops::new(alias_jit, spec)?;
            for trace in &copy_patch::select_stitch_batch(alias_jit, &plan, BATCH, &mut Vec::new())?
            {
                check(
                    spec,
                    "copy-and-patch (persistent alias, batch)",
                    expected,
                    outcome(|| copy_patch::run(trace, spec)),
                )?;
            }
            Some((alias_jit, plan))
        }
        None => None,
    };
    for c in &mut b.cranelift {
        let compiled = c.compile_batch(&cl_list, BATCH)?;
        let name = format!(
            "{} ({}, batch)",
            c.variant().backend(),
            c.variant().opt_level()
        );
        for f in &compiled {
            // SAFETY: `c` is recycled only after `compiled` is dropped (below).
            check(spec, &name, expected, outcome(|| unsafe { f.run(spec) }))?;
        }
        drop(compiled);
        // SAFETY: no function of `c` is used after this.
        unsafe { c.recycle() }?;
    }
    let runs = b.runs;
    let (plan, list, cl_list) = (&plan, &list, &cl_list);
    let mut names = vec![COPY_AND_PATCH];
    let mut labels = Vec::new();
    let mut ops = vec![Timed::new(2, runs, move || {
        let (traces, t) = time(|| copy_patch::select_stitch_batch(jit, list, BATCH, &mut labels));
        traces?;
        Ok(t / BATCH as f64)
    })
    .primed()];
    let alias = alias_plan.as_ref().map(|(alias_jit, list)| {
        names.push(COPY_AND_PATCH_ALIAS);
        let mut labels = Vec::new();
        ops.push(
            Timed::new(2, runs, move || {
                let (traces, t) =
                    time(|| copy_patch::select_stitch_batch(alias_jit, list, BATCH, &mut labels));
                traces?;
                Ok(t / BATCH as f64)
            })
            .primed(),
        );
        names.len() - 1
    });
    names.push(COPY_AND_PATCH_PRELOWERED);
    ops.push(
        Timed::new(2, runs, move || {
            let (traces, t) = time(|| copy_patch::stitch_batch(jit, plan, BATCH));
            traces?;
            Ok(t / BATCH as f64)
        })
        .primed(),
    );
    for c in &mut b.cranelift {
        names.push(cranelift_name(c.variant()));
        ops.push(
            Timed::new(2, runs, move || {
                let (compiled, t) = time(|| c.compile_batch(cl_list, BATCH));
                drop(compiled?);
                // SAFETY: the functions were just dropped; nothing else of `c` runs.
                unsafe { c.recycle() }?;
                Ok(t / BATCH as f64)
            })
            .primed(),
        );
    }
    let rounds = alternate(&mut ops)?;
    Ok(names
        .iter()
        .enumerate()
        .map(|(i, name)| PeerRow {
            trace: format!("batch of {BATCH} × {}", trace_name(spec)),
            backend: name.0.into(),
            opt_level: name.1.map(String::from),
            instances: spec.instances.len(),
            compile: Some(rounds.sample(i, BATCH)),
            compile_ratio: ratios(&rounds, i, 0),
            compile_cpu: Some(rounds.cpu_sample(i, BATCH)),
            compile_cpu_ratio: cpu_ratios(&rounds, i, 0),
            compile_ratio_to_alias: alias.and_then(|a| ratios(&rounds, i, a)),
            compile_cpu_ratio_to_alias: alias.and_then(|a| cpu_ratios(&rounds, i, a)),
            run: None,
            run_ratio: None,
            run_unit: String::new(),
        })
        .collect())
}

/// The longest trace LLVM compiles here: its cost grows faster than linearly in the trace
/// length (linking one module per instance; -O2 also inlines every instance into its
/// successor), so longer traces would take minutes per compile.
const LLVM_LIMIT: usize = 1000;

/// The LLVM levels measured on `n` instances.
fn llvm_levels(n: usize) -> Vec<Level> {
    if n <= LLVM_LIMIT {
        vec![Level::O0, Level::O2]
    } else {
        Vec::new()
    }
}

/// Warm-ups and timed runs of LLVM at `level` on `n` instances: its largest compiles take
/// seconds, so fewer runs.
fn llvm_runs(level: Level, n: usize, runs: usize) -> (usize, usize) {
    match (level, n) {
        (_, n) if n < 1000 => (1, runs),
        (Level::O0, _) => (1, runs),
        (Level::O2, _) => (0, runs.min(3)),
    }
}

/// Compiles per timed run of copy-and-patch and Cranelift (about 0.5 ms or more per run on
/// short traces), so that the clock's resolution and the loop do not matter.
pub(crate) fn batches(n: usize) -> (usize, usize) {
    ((2000 / n).clamp(1, 100), (200 / n).clamp(1, 10))
}

/// (status, checksum) of one run.
fn outcome(run: impl FnOnce() -> i64) -> (i64, u64) {
    workload::take_checksum();
    let status = run();
    (status, workload::take_checksum())
}

/// Compiles `spec` once with every backend and checks each run against copy-and-patch's.
fn check_all(b: &mut Backends<'_>, spec: &TraceSpec) -> Result<(), String> {
    let cp = copy_patch::compile(&b.jit, spec)?;
    let expected = outcome(|| copy_patch::run(&cp, spec));
    let uncached = copy_patch::stitch(&b.jit, &copy_patch::plan_exact(&b.jit, spec)?)?;
    check(
        spec,
        "copy-and-patch (uncached ops)",
        expected,
        outcome(|| copy_patch::run(&uncached, spec)),
    )?;
    if let Some(alias_jit) = &b.alias_jit {
        let aliased = copy_patch::compile(alias_jit, spec)?;
        check(
            spec,
            "copy-and-patch (persistent alias)",
            expected,
            outcome(|| copy_patch::run(&aliased, spec)),
        )?;
    }
    for level in llvm_levels(spec.instances.len()) {
        let compiled = peer::compile(b.context, &b.lib, spec, level, workload::resolve)?;
        check(spec, level.name(), expected, outcome(|| compiled.run(spec)))?;
    }
    for c in &mut b.cranelift {
        let compiled = c.compile_spec(spec)?;
        // SAFETY: `c` is not recycled before `compiled` is dropped (below).
        let got = outcome(|| unsafe { compiled.run(spec) });
        drop(compiled);
        // SAFETY: no trace of `c` is used after this.
        unsafe { c.recycle() }?;
        let name = format!("{} ({})", c.variant().backend(), c.variant().opt_level());
        check(spec, &name, expected, got)?;
    }
    Ok(())
}

/// The alternated compile-time rounds of every backend on `spec`; the names of the
/// operations, in order (copy-and-patch first), and their batch sizes.
fn time_compiles(
    b: &mut Backends<'_>,
    spec: &TraceSpec,
) -> Result<(Rounds, Vec<(Name, usize)>), String> {
    let n = spec.instances.len();
    let (cp_batch, cl_batch) = batches(n);
    let runs = b.runs;
    let (jit, context, lib) = (&b.jit, b.context, &b.lib);
    let cl_list = &crate::cranelift::op_list(spec)?;
    // Resolved once, as a JIT's bytecode is (see `copy_patch::Ops`): the end-to-end rows
    // select members on the clock; the pre-lowered and uncached rows push plans.
    let mut ends = vec![(jit, copy_patch::Ops::new(jit, spec)?)];
    let plans = vec![
        (jit, copy_patch::plan(jit, spec)?),
        (jit, copy_patch::plan_exact(jit, spec)?),
    ];
    let mut names = vec![(COPY_AND_PATCH, cp_batch)];
    if let Some(alias_jit) = &b.alias_jit {
        ends.push((alias_jit, copy_patch::Ops::new(alias_jit, spec)?));
    }
    let levels = llvm_levels(n);
    let mut ops: Vec<Timed<'_>> = Vec::new();
    for (k, (jit, list)) in ends.into_iter().enumerate() {
        if k == 1 {
            names.push((COPY_AND_PATCH_ALIAS, cp_batch));
        }
        let mut labels = Vec::new();
        ops.push(
            Timed::new(2, runs, move || {
                let (traces, t) = time(|| {
                    collect_n(cp_batch, || {
                        copy_patch::select_stitch(jit, &list, &mut labels)
                    })
                });
                traces?;
                Ok(t / cp_batch as f64)
            })
            .primed(),
        );
    }
    names.push((COPY_AND_PATCH_PRELOWERED, cp_batch));
    names.push((COPY_AND_PATCH_UNCACHED, cp_batch));
    ops.extend(plans.into_iter().map(|(jit, plan)| {
        Timed::new(2, runs, move || {
            let (traces, t) = time(|| collect_n(cp_batch, || copy_patch::stitch(jit, &plan)));
            traces?;
            Ok(t / cp_batch as f64)
        })
        .primed()
    }));
    for level in levels {
        let (warmup, level_runs) = llvm_runs(level, n, runs);
        names.push(((level.name(), None), 1));
        let op = Timed::new(warmup, level_runs, move || {
            let (compiled, t) =
                time(|| peer::compile(context, lib, spec, level, workload::resolve));
            compiled?;
            Ok(t)
        });
        // Not an -O2 compile of 1,000 instances or more (seconds each, a few runs):
        // another backend's caches are nothing against it.
        ops.push(if level_runs == runs { op.primed() } else { op });
    }
    for c in &mut b.cranelift {
        names.push((cranelift_name(c.variant()), cl_batch));
        ops.push(
            Timed::new(2, runs, move || {
                let (compiled, t) = time(|| collect_n(cl_batch, || c.compile(cl_list)));
                drop(compiled?);
                // SAFETY: the traces were just dropped; nothing else of `c` runs.
                unsafe { c.recycle() }?;
                Ok(t / cl_batch as f64)
            })
            .primed(),
        );
    }
    let rounds = alternate(&mut ops)?;
    Ok((rounds, names))
}

/// Rows of a compile-only trace (`run`: run-time rounds of the same backends, in the same
/// order, with their unit).
fn compile_rows(
    b: &mut Backends<'_>,
    spec: &TraceSpec,
    run: Option<(&Rounds, &str)>,
) -> Result<Vec<PeerRow>, String> {
    check_all(b, spec)?;
    let (rounds, names) = time_compiles(b, spec)?;
    let alias = names
        .iter()
        .position(|&(name, _)| name == COPY_AND_PATCH_ALIAS);
    Ok(names
        .iter()
        .enumerate()
        .map(|(i, &(name, batch))| PeerRow {
            trace: trace_name(spec),
            backend: name.0.into(),
            opt_level: name.1.map(String::from),
            instances: spec.instances.len(),
            compile: Some(rounds.sample(i, batch)),
            compile_ratio: ratios(&rounds, i, 0),
            compile_cpu: Some(rounds.cpu_sample(i, batch)),
            compile_cpu_ratio: cpu_ratios(&rounds, i, 0),
            compile_ratio_to_alias: alias.and_then(|a| ratios(&rounds, i, a)),
            compile_cpu_ratio_to_alias: alias.and_then(|a| cpu_ratios(&rounds, i, a)),
            run: run.map(|(r, _)| r.sample(i, 1)),
            run_ratio: run.and_then(|(r, _)| ratios(r, i, 0)),
            run_unit: run.map_or("", |(_, unit)| unit).into(),
        })
        .collect())
}

/// The counting loop: run times (alternated, per round of the loop), then compile times.
fn loop_rows(
    b: &mut Backends<'_>,
    spec: &TraceSpec,
    iterations: u64,
) -> Result<Vec<PeerRow>, String> {
    check_all(b, spec)?;
    let per_round = |t: Measured| t / iterations as f64;
    let runs = b.runs;
    let cp = copy_patch::compile(&b.jit, spec)?;
    let cp_uncached = copy_patch::stitch(&b.jit, &copy_patch::plan_exact(&b.jit, spec)?)?;
    // The same code as `cp`, written through the alias: run-time rows stay aligned with
    // `time_compiles`'s names.
    let cp_alias = match &b.alias_jit {
        Some(alias_jit) => Some(copy_patch::compile(alias_jit, spec)?),
        None => None,
    };
    let llvm = [Level::O0, Level::O2]
        .into_iter()
        .map(|level| peer::compile(b.context, &b.lib, spec, level, workload::resolve))
        .collect::<Result<Vec<_>, _>>()?;
    let cranelift = b
        .cranelift
        .iter_mut()
        .map(|c| c.compile_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    // In `time_compiles`'s order: end to end, alias, pre-lowered (the same code as the end
    // to end trace), uncached.
    let cp_pre = copy_patch::stitch(&b.jit, &copy_patch::plan(&b.jit, spec)?)?;
    let mut ops = vec![Timed::new(1, runs, || {
        Ok(per_round(time(|| copy_patch::run(&cp, spec)).1))
    })];
    if let Some(cp_alias) = &cp_alias {
        ops.push(Timed::new(1, runs, move || {
            Ok(per_round(time(|| copy_patch::run(cp_alias, spec)).1))
        }));
    }
    ops.push(Timed::new(1, runs, || {
        Ok(per_round(time(|| copy_patch::run(&cp_pre, spec)).1))
    }));
    ops.push(Timed::new(1, runs, || {
        Ok(per_round(time(|| copy_patch::run(&cp_uncached, spec)).1))
    }));
    for compiled in &llvm {
        ops.push(Timed::new(1, runs, move || {
            Ok(per_round(time(|| compiled.run(spec)).1))
        }));
    }
    for compiled in &cranelift {
        ops.push(Timed::new(1, runs, move || {
            // SAFETY: the compilers are recycled only after `cranelift` is dropped.
            Ok(per_round(time(|| unsafe { compiled.run(spec) }).1))
        }));
    }
    let run_rounds = alternate(&mut ops)?;
    drop(ops);
    drop(cranelift);
    for c in &mut b.cranelift {
        // SAFETY: the traces above were dropped.
        unsafe { c.recycle() }?;
    }
    compile_rows(b, spec, Some((&run_rounds, "ns/round")))
}

fn trace_name(spec: &TraceSpec) -> String {
    if spec.name == "counting-loop" {
        format!("counting loop ({} instances/round)", LOOP_BODY_INSTANCES)
    } else {
        spec.name.clone()
    }
}

fn check(
    spec: &TraceSpec,
    backend: &str,
    expected: (i64, u64),
    got: (i64, u64),
) -> Result<(), String> {
    if expected == got {
        Ok(())
    } else {
        Err(format!(
            "{}: {backend} computed (status, checksum) {got:?}, copy-and-patch {expected:?}",
            spec.name
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cranelift::Variant;
    use crate::harness::thread_cpu_ns;

    /// The batch rows' comparison in thread CPU time, which preemption does not inflate (on
    /// a loaded machine a 50 ms Cranelift batch is preempted many times, a 0.2 ms
    /// copy-and-patch batch rarely, so wall-time ratios there overstate copy-and-patch's
    /// lead). Alternated round by round; prints median (min – max) per function and the
    /// median of per-round ratios. A measurement, run on demand:
    /// `cargo test --release -p cpjit-bench batch_cpu -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn batch_cpu_time() {
        let jit = copy_patch::jit().unwrap();
        let mut compilers: Vec<Compiler> = Variant::ALL
            .into_iter()
            .map(|v| Compiler::new(v, workload::resolve).unwrap())
            .collect();
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        for spec in [straight(10), straight(100), counting_loop(1000)] {
            let plan = copy_patch::plan(&jit, &spec).unwrap();
            let cl_list = crate::cranelift::op_list(&spec).unwrap();
            let mut cp = Vec::new();
            let mut cl = vec![Vec::new(); compilers.len()];
            for round in 0..13 {
                let start = thread_cpu_ns();
                let traces = copy_patch::stitch_batch(&jit, &plan, BATCH).unwrap();
                let t = (thread_cpu_ns() - start) / BATCH as f64;
                drop(traces);
                for (c, times) in compilers.iter_mut().zip(&mut cl) {
                    let start = thread_cpu_ns();
                    let compiled = c.compile_batch(&cl_list, BATCH).unwrap();
                    let u = (thread_cpu_ns() - start) / BATCH as f64;
                    drop(compiled);
                    // SAFETY: the functions were just dropped.
                    unsafe { c.recycle() }.unwrap();
                    if round >= 2 {
                        times.push(u);
                    }
                }
                if round >= 2 {
                    cp.push(t);
                }
            }
            let (m, lo, hi) = median(cp.clone());
            eprintln!(
                "batch of {BATCH} × {}: copy-and-patch {m:.0} ns ({lo:.0} – {hi:.0}) CPU per function",
                spec.name
            );
            for (c, times) in compilers.iter().zip(&cl) {
                let (m, lo, hi) = median(times.clone());
                let r: Vec<f64> = times.iter().zip(&cp).map(|(a, b)| a / b).collect();
                let (rm, rlo, rhi) = median(r);
                eprintln!(
                    "  {} ({}): {m:.0} ns ({lo:.0} – {hi:.0}); ratio {rm:.0}× ({rlo:.0} – {rhi:.0})",
                    c.variant().backend(),
                    c.variant().opt_level()
                );
            }
        }
    }
}
