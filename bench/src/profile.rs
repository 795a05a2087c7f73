//! `--profile-stitch TRACE`: runs exactly what the peer bench times for copy-and-patch on one
//! trace, many rounds, with nothing else around it, for a profiler
//! (`valgrind --tool=callgrind --toggle-collect='*profile::timed_round'`, which leaves the
//! warm-up rounds out) or a quick A/B timing of two builds run alternately.
//!
//! A round is one of the peer bench's timed runs: the trace stitched as many times as its
//! compile rows stitch it per run (`peer_bench::batches`), or with `--batch` as one
//! [`TraceBatch`](cpjit_runtime::TraceBatch) of 100 traces (its batch rows); the traces are
//! dropped after the round, untimed, as there. `--alias` writes code through the persistent
//! alias; `--select` compiles end to end from the op list (the kit's selection + push +
//! finish) instead of stitching the pre-lowered plan. Prints the median and range of the thread CPU time per instance, and the number of
//! instances stitched (to turn a profile's instruction counts into counts per instance):
//! those of the timed rounds (what `--toggle-collect` collects) and those of the whole run,
//! the warm-up rounds included (what a profile without it collects, and what callgrind's
//! call counts always count: they go on while collection is off).

use crate::copy_patch::{self, Plan};
use crate::harness::{collect_n, thread_cpu_ns, time};
use crate::workload::{counting_loop, straight, TraceSpec};
use cpjit_runtime::{CodeWrites, Jit, Trace};

/// What to profile, from the command line.
pub struct ProfileOptions {
    pub trace: String,
    pub alias: bool,
    /// End to end: the op list, the kit's selection + push + finish.
    pub select: bool,
    pub batch: bool,
    pub rounds: usize,
}

/// Parses `TRACE [--alias] [--select] [--batch] [--rounds N]` (the arguments after `--profile-stitch`).
pub fn parse(args: &[String]) -> Result<ProfileOptions, String> {
    let mut it = args.iter();
    let trace = it
        .next()
        .ok_or("`--profile-stitch` needs a trace (straight-N or counting-loop)")?
        .clone();
    let mut o = ProfileOptions {
        trace,
        alias: false,
        select: false,
        batch: false,
        rounds: 200,
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--alias" => o.alias = true,
            "--select" => o.select = true,
            "--batch" => o.batch = true,
            "--rounds" => {
                let v = it.next().ok_or("`--rounds` needs a value")?;
                o.rounds = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("`--rounds {v}`: not a positive number"))?;
            }
            other => return Err(format!("--profile-stitch: unexpected argument `{other}`")),
        }
    }
    Ok(o)
}

/// The trace named `name`: `straight-N` (N ≥ 3) or `counting-loop`.
fn spec(name: &str) -> Result<TraceSpec, String> {
    if name == "counting-loop" {
        return Ok(counting_loop(1000));
    }
    match name.strip_prefix("straight-").map(str::parse::<usize>) {
        Some(Ok(n)) if n >= 3 => Ok(straight(n)),
        _ => Err(format!(
            "--profile-stitch: unknown trace `{name}` (straight-N with N ≥ 3, or counting-loop)"
        )),
    }
}

/// Untimed rounds before the timed ones, as the bench runs them.
const WARM_UP_ROUNDS: usize = 2;

/// Runs the rounds and prints the thread CPU time per instance.
pub fn run(o: &ProfileOptions) -> Result<(), String> {
    let jit = copy_patch::jit_writing(if o.alias {
        CodeWrites::PersistentAlias
    } else {
        CodeWrites::Transient
    })?;
    let spec = spec(&o.trace)?;
    let n = spec.instances.len();
    let traces = if o.batch {
        crate::peer_bench::BATCH
    } else {
        crate::peer_bench::batches(n).0
    };
    let work = Work::new(&jit, &spec, o.select, traces, o.batch)?;
    // Warm-up as the bench's (two untimed runs), then the rounds.
    for _ in 0..WARM_UP_ROUNDS {
        drop(untimed_round(&jit, &work)?);
    }
    let mut per_instance = Vec::with_capacity(o.rounds);
    let start = thread_cpu_ns();
    for _ in 0..o.rounds {
        let (stitched, t) = time(|| timed_round(&jit, &work));
        drop(stitched?);
        per_instance.push(t.cpu / (traces * n) as f64);
    }
    let total = thread_cpu_ns() - start;
    per_instance.sort_by(f64::total_cmp);
    println!(
        "{} ({}{}{}): {} rounds × {traces} traces × {n} instances = {} instances stitched \
         in the timed rounds (`--toggle-collect='*profile::timed_round'`), {} in the whole \
         run ({} traces; the {WARM_UP_ROUNDS} warm-up rounds included); thread CPU per \
         instance: median {:.2} ns ({:.2}–{:.2}); {:.0} ms in all",
        spec.name,
        if o.alias {
            "persistent alias"
        } else {
            "default"
        },
        if o.select {
            ", end to end: selection + push + finish"
        } else {
            ", pre-lowered: push + finish"
        },
        if o.batch { ", batch" } else { "" },
        o.rounds,
        o.rounds * traces * n,
        (o.rounds + WARM_UP_ROUNDS) * traces * n,
        (o.rounds + WARM_UP_ROUNDS) * traces,
        per_instance[per_instance.len() / 2],
        per_instance[0],
        per_instance[per_instance.len() - 1],
        total / 1e6,
    );
    Ok(())
}

/// A warm-up round: [`timed_round`] under another name, so that a profile collecting
/// `timed_round` leaves it out.
#[inline(never)]
fn untimed_round(jit: &Jit<'_>, work: &Work) -> Result<Vec<Trace>, String> {
    stitch_round(jit, work)
}

/// One of the peer bench's timed runs (see [`stitch_round`]); never inlined, so that a
/// profile can collect exactly its cost.
#[inline(never)]
fn timed_round(jit: &Jit<'_>, work: &Work<'_>) -> Result<Vec<Trace>, String> {
    stitch_round(jit, work)
}

/// What a round compiles: the pre-lowered plan, or (`--select`) the op list; how many times,
/// and whether as one batch.
struct Work<'j> {
    plan: Plan,
    ops: Option<copy_patch::Ops<'j>>,
    labels: std::cell::RefCell<Vec<cpjit_runtime::Label>>,
    traces: usize,
    batch: bool,
}

impl<'j> Work<'j> {
    /// `traces` compiles of `spec` a round (as one batch with `batch`), from its op list
    /// with `select`.
    fn new(
        jit: &'j Jit<'static>,
        spec: &TraceSpec,
        select: bool,
        traces: usize,
        batch: bool,
    ) -> Result<Work<'j>, String> {
        Ok(Work {
            plan: copy_patch::plan(jit, spec)?,
            ops: select
                .then(|| copy_patch::Ops::new(jit, spec))
                .transpose()?,
            labels: std::cell::RefCell::new(Vec::new()),
            traces,
            batch,
        })
    }
}

/// One of the peer bench's timed runs: `work.traces` compiles of `work` (one batch with
/// `work.batch`).
#[inline(always)]
fn stitch_round(jit: &Jit<'_>, work: &Work<'_>) -> Result<Vec<Trace>, String> {
    let (labels, traces) = (&mut work.labels.borrow_mut(), work.traces);
    match (&work.ops, work.batch) {
        (Some(ops), true) => copy_patch::select_stitch_batch(jit, ops, traces, labels),
        (Some(ops), false) => collect_n(traces, || copy_patch::select_stitch(jit, ops, labels)),
        (None, true) => copy_patch::stitch_batch(jit, &work.plan, traces),
        (None, false) => collect_n(traces, || copy_patch::stitch(jit, &work.plan)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_compiles_the_traces_asked_for_in_every_mode() {
        let jit = copy_patch::jit_writing(CodeWrites::Transient).unwrap();
        let spec = straight(5);
        for (select, batch) in [(false, false), (false, true), (true, false), (true, true)] {
            let work = Work::new(&jit, &spec, select, 3, batch).unwrap();
            let traces = timed_round(&jit, &work).unwrap();
            assert_eq!(traces.len(), 3, "select {select}, batch {batch}");
            for t in &traces {
                let instances = t.instance_offsets().len();
                assert_eq!(instances, spec.instances.len(), "{select} {batch}");
            }
        }
    }
}
