//! Toolchain benches: the `cpjit-toolchain` binary run as a child process, as
//! `cargo xtask build-stencils` runs it, with its own cache and output directories under a
//! temporary directory (the workspace's `stencils/` and cache are never touched).
//!
//! The large-header case builds the generated CPython-style set
//! (`cpjit_toolchain::scale_set`: 300 ops sharing a header of over 20,000 lines) for one
//! target, with one translation unit per op (compiled in `clang -cc1` groups, one process
//! per group) and with 64 ops per translation unit (`batch_size`),
//! alternately with the naive method, one `clang-19 -c` per unit producing an object (two
//! at a time, as the toolchain runs two jobs), and times its no-op check.
//!
//! The real-shaped set (issue 43) is the same 300 ops over the same header cut into a chain
//! of four headers, in both of a real interpreter's forms: per-op units, and one family
//! over one template (each op selected by its member's define), both 64 per clang run; each
//! cold, then a no-op, one op changed, and the change reverted (with how many clang runs
//! the revert made), alternated run by run with one clang per op.
//!
//! CPU use is the children's user + system time (`getrusage(RUSAGE_CHILDREN)`, which
//! includes the clang processes the toolchain waited for) over wall time; 200 % is both
//! cores busy.

use crate::harness::Sample;
use crate::results::ToolchainRow;
use crate::synth;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Runs every toolchain case.
pub fn run(root: &Path, bin: &Path, quick: bool) -> Result<Vec<ToolchainRow>, String> {
    if !bin.is_file() {
        return Err(format!(
            "no toolchain binary at {} (build it with `cargo build --release -p cpjit-toolchain`; \
             `cargo xtask bench` does)",
            bin.display()
        ));
    }
    let tmp = TempDir::new("toolchain")?;
    let targets = std::fs::read_dir(root.join("targets"))
        .map_err(|e| format!("{}/targets: {e}", root.display()))?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "toml"))
        })
        .count();
    let tc = Toolchain { bin, root };
    let runs = if quick { 1 } else { 3 };
    let mut rows = Vec::new();

    // Clean build: a fresh cache each run, --force.
    let out = tmp.path.join("out");
    let templates = root.join("templates");
    let cache = |name: String| tmp.path.join(name);
    let clean = repeat(runs, |k| {
        tc.build(
            &templates,
            &out,
            &cache(format!("cache-clean-{k}")),
            &["--force"],
        )
    })?;
    rows.push(row("clean build, default set", targets, clean));

    // No-op: the output is current, the digest matches.
    let warm_cache = cache(format!("cache-clean-{}", runs - 1));
    tc.build(&templates, &out, &warm_cache, &[])?;
    let noop = repeat(if quick { 3 } else { 7 }, |_| {
        tc.build(&templates, &out, &warm_cache, &[])
    })?;
    rows.push(row("no-op rebuild (digest matches)", targets, noop));

    // Touch one op: a copy of the set, built once (warm cache), then op_test_push edited.
    let copy = tmp.path.join("templates");
    copy_dir(&templates, &copy)?;
    let touched_out = tmp.path.join("out-touched");
    tc.build(&copy, &touched_out, &warm_cache, &[])?;
    let holes = copy.join("testing/holes.c");
    let original =
        std::fs::read_to_string(&holes).map_err(|e| format!("{}: {e}", holes.display()))?;
    const PUSH: &str = "sp[0] = CPJIT_OPERAND(OPERAND0);\n  sp += 1;";
    if !original.contains(PUSH) {
        return Err(format!(
            "{}: op_test_push no longer contains `{PUSH}`; update the touch-one-op bench",
            holes.display()
        ));
    }
    let touched = repeat(runs, |k| {
        let edited = original.replacen(
            PUSH,
            &format!("sp[0] = CPJIT_OPERAND(OPERAND0) + {};\n  sp += 1;", k + 1),
            1,
        );
        std::fs::write(&holes, edited).map_err(|e| format!("{}: {e}", holes.display()))?;
        tc.build(&copy, &touched_out, &warm_cache, &[])
    })?;
    rows.push(row(
        "touch one op (op_test_push in holes.c)",
        targets,
        touched,
    ));

    rows.extend(large_header_set(&tc, &tmp.path, quick)?);
    rows.extend(real_shaped_set(&tc, &tmp.path, quick)?);

    // Scaling: synthetic sets, clean builds.
    for n in [50, 150, 300] {
        let set = tmp.path.join(format!("synth-{n}"));
        synth::write_set(&set, &templates, n)?;
        let out = tmp.path.join(format!("out-synth-{n}"));
        let built = repeat(runs, |k| {
            tc.build(
                &set,
                &out,
                &cache(format!("cache-synth-{n}-{k}")),
                &["--force"],
            )
        })?;
        let per_target = built.stencils / targets.max(1);
        if per_target != n + 1 {
            return Err(format!(
                "synthetic set of {n} ops: the toolchain reported {per_target} stencils per target, \
                 expected {} (ops + shim)",
                n + 1
            ));
        }
        rows.push(row(
            &format!("clean build, {n} synthetic ops"),
            targets,
            built,
        ));
    }
    Ok(rows)
}

/// The large-header set for the first target file: cpjit (clean, fresh cache) and one clang
/// per unit, alternated (A B A B ...), then cpjit's no-op check.
fn large_header_set(tc: &Toolchain, tmp: &Path, quick: bool) -> Result<Vec<ToolchainRow>, String> {
    use cpjit_toolchain::scale_set::ScaleSet;
    let size = ScaleSet {
        ops: 300,
        header_lines: 20_000,
        batch_size: None,
    };
    // The same set with its units compiled BATCH at a time (`[stencils] batch_size`).
    const BATCH: usize = 64;
    let batched = ScaleSet {
        batch_size: Some(BATCH),
        ..size
    };
    let set = tmp.join("scale");
    let set_batched = tmp.join("scale-batched");
    for (s, dir) in [(size, &set), (batched, &set_batched)] {
        s.write(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let target = cpjit_toolchain::target::Target::load_all(&tc.root.join("targets"))
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no target files")?;
    let manifest = cpjit_toolchain::manifest::Manifest::load(&set).map_err(|e| e.to_string())?;
    let flags = cpjit_toolchain::clang::compile_flags(&manifest, &target);
    let units = manifest.translation_units().map_err(|e| e.to_string())?;
    let out = tmp.join("out-scale");
    let objects = tmp.join("objects-scale");
    let only = ["--force", "--target", target.triple.as_str()];
    let runs = if quick { 1 } else { 3 };
    let (mut ours, mut ours_batched, mut naive) = (Vec::new(), Vec::new(), Vec::new());
    // Alternated run by run: per unit, batched, naive, per unit, ...
    for k in 0..runs {
        ours.push(tc.build(&set, &out, &tmp.join(format!("cache-scale-{k}")), &only)?);
        ours_batched.push(tc.build(
            &set_batched,
            &out,
            &tmp.join(format!("cache-scale-batched-{k}")),
            &only,
        )?);
        naive.push(clang_per_unit(&manifest.root, &units, &flags, &objects)?);
    }
    let warm = tmp.join(format!("cache-scale-batched-{}", runs - 1));
    let noop_args = ["--target", target.triple.as_str()];
    tc.build(&set_batched, &out, &warm, &noop_args)?;
    let noop = repeat(if quick { 3 } else { 7 }, |_| {
        tc.build(&set_batched, &out, &warm, &noop_args)
    })?;
    let label = format!(
        "{} ops, {}-line header, 1 target",
        size.ops,
        size.header_lines / 1000 * 1000
    );
    let measured = |runs_of: Vec<Run>| {
        let mut it = runs_of.into_iter();
        repeat(runs, |_| it.next().ok_or_else(String::new))
    };
    Ok(vec![
        row(
            &format!("clean build, large-header set ({label}), cpjit, one unit per op (cc1 groups) + PCH"),
            1,
            measured(ours)?,
        ),
        row(
            &format!(
                "clean build, large-header set ({label}), cpjit, {BATCH} units per clang + PCH"
            ),
            1,
            measured(ours_batched)?,
        ),
        row(
            &format!("clean build, large-header set ({label}), one clang-19 -c per unit"),
            1,
            measured(naive)?,
        ),
        row("no-op rebuild, large-header set (1 target)", 1, noop),
    ])
}

/// The real-shaped set's forms: its label and whether it is the family form.
const FORMS: [(&str, bool); 2] = [("per-op units", false), ("one family", true)];

/// The real-shaped set (see the module documentation) for the first target file.
fn real_shaped_set(tc: &Toolchain, tmp: &Path, quick: bool) -> Result<Vec<ToolchainRow>, String> {
    use cpjit_toolchain::scale_set::ScaleSet;
    const BATCH: usize = 64;
    let size = ScaleSet {
        ops: 300,
        header_lines: 20_000,
        batch_size: Some(BATCH),
    };
    let target = cpjit_toolchain::target::Target::load_all(&tc.root.join("targets"))
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("no target files")?;
    let only = ["--target", target.triple.as_str()];
    let runs = if quick { 1 } else { 3 };
    // The clang the toolchain runs, logging each run (a revert should make none).
    let log = tmp.join("real-clang.log");
    let wrapper = tmp.join("real-clang.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec clang-19 \"$@\"\n",
            log.display()
        ),
    )
    .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    let env = [("CPJIT_CLANG", wrapper.as_path())];
    // Per form: cold, no-op, changed, reverted runs, and the revert's clang runs.
    let mut measured: Vec<[Vec<Run>; 4]> = vec![Default::default(), Default::default()];
    let mut revert_runs = [0usize; 2];
    let mut naive = Vec::new();
    let naive_set = tmp.join("real-naive");
    write_real_shaped(&size, &naive_set, false)?;
    let manifest =
        cpjit_toolchain::manifest::Manifest::load(&naive_set).map_err(|e| e.to_string())?;
    let flags = cpjit_toolchain::clang::compile_flags(&manifest, &target);
    let units = manifest.translation_units().map_err(|e| e.to_string())?;
    for k in 0..runs {
        for (f, (_, family)) in FORMS.iter().enumerate() {
            let set = tmp.join(format!("real-{f}-{k}"));
            write_real_shaped(&size, &set, *family)?;
            let (out, cache) = (
                tmp.join(format!("real-out-{f}-{k}")),
                tmp.join(format!("real-cache-{f}-{k}")),
            );
            let build = || tc.build_with(&set, &out, &cache, &only, &env);
            let cold = build()?;
            let noop = build()?;
            // One op changed: op_0007's constant, in its unit or in the template.
            let file = set.join(if *family { "ops.c" } else { "ops/op_0007.c" });
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let edited = text.replacen("_set(o, 7);", "_set(o, 7 + 1000);", 1);
            if edited == text {
                return Err(format!(
                    "{}: op_0007's `_set(o, 7);` not found",
                    file.display()
                ));
            }
            std::fs::write(&file, &edited).map_err(|e| format!("{}: {e}", file.display()))?;
            let changed = build()?;
            std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
            let _ = std::fs::remove_file(&log);
            let reverted = build()?;
            revert_runs[f] = revert_runs[f].max(clang_runs(&log));
            for (slot, run) in measured[f].iter_mut().zip([cold, noop, changed, reverted]) {
                slot.push(run);
            }
        }
        naive.push(clang_per_unit(
            &manifest.root,
            &units,
            &flags,
            &tmp.join("real-objects"),
        )?);
    }
    let label = format!(
        "real-shaped set ({} ops, {}-line header chain, 1 target, {BATCH} per clang + PCH)",
        size.ops,
        size.header_lines / 1000 * 1000
    );
    let mut rows = Vec::new();
    for (f, (form, _)) in FORMS.iter().enumerate() {
        let [cold, noop, changed, reverted] = std::mem::take(&mut measured[f]);
        let cases = [
            (format!("clean build, {label}, cpjit, {form}"), cold),
            (format!("no-op rebuild, {label}, {form}"), noop),
            (format!("one op changed, {label}, {form}"), changed),
            (
                format!(
                    "one op changed back, {label}, {form} ({} clang runs)",
                    revert_runs[f]
                ),
                reverted,
            ),
        ];
        for (case, runs_of) in cases {
            let mut it = runs_of.into_iter();
            rows.push(row(
                &case,
                1,
                repeat(runs, |_| it.next().ok_or_else(String::new))?,
            ));
        }
    }
    let mut it = naive.into_iter();
    rows.push(row(
        &format!("clean build, {label}, one clang-19 -c per op"),
        1,
        repeat(runs, |_| it.next().ok_or_else(String::new))?,
    ));
    Ok(rows)
}

/// Writes the real-shaped set in `dir` (anew): `size` in the family or the units form,
/// its header cut into a chain of four.
fn write_real_shaped(
    size: &cpjit_toolchain::scale_set::ScaleSet,
    dir: &Path,
    family: bool,
) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    let written = if family {
        size.write_family(dir)
    } else {
        size.write(dir)
    };
    written
        .and_then(|()| cpjit_toolchain::scale_set::ScaleSet::chain_header(dir, 4))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// The clang runs `log` records (not the version question).
fn clang_runs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("--version"))
        .count()
}

/// The naive method: one `clang-19 -c` per unit (the toolchain's flags), two at a time.
fn clang_per_unit(
    root: &Path,
    units: &[PathBuf],
    flags: &[String],
    objects: &Path,
) -> Result<Run, String> {
    let _ = std::fs::remove_dir_all(objects);
    std::fs::create_dir_all(objects).map_err(|e| format!("{}: {e}", objects.display()))?;
    let before = children_cpu_ns();
    let start = Instant::now();
    let mut pending = units.iter().enumerate();
    let mut running: Vec<std::process::Child> = Vec::new();
    loop {
        while running.len() < 2 {
            let Some((i, unit)) = pending.next() else {
                break;
            };
            let child = Command::new("clang-19")
                .args(flags)
                .arg("-c")
                .arg(root.join(unit))
                .arg("-o")
                .arg(objects.join(format!("{i}.o")))
                .spawn()
                .map_err(|e| format!("cannot run clang-19: {e}"))?;
            running.push(child);
        }
        if running.is_empty() {
            break;
        }
        let status = running
            .remove(0)
            .wait()
            .map_err(|e| format!("clang-19: {e}"))?;
        if !status.success() {
            return Err(format!(
                "clang-19 failed on a unit of {} ({status})",
                root.display()
            ));
        }
    }
    Ok(Run {
        wall_ns: start.elapsed().as_nanos() as f64,
        cpu_ns: children_cpu_ns() - before,
        stencils: units.len(),
    })
}

fn row(case: &str, targets: usize, m: Measured) -> ToolchainRow {
    ToolchainRow {
        case: case.into(),
        targets,
        stencils: m.stencils,
        wall: m.wall,
        cpu_ns: m.cpu_ns,
    }
}

/// Wall time, CPU time and stencils built over several runs.
struct Measured {
    wall: Sample,
    cpu_ns: f64,
    stencils: usize,
}

fn repeat(
    runs: usize,
    mut f: impl FnMut(usize) -> Result<Run, String>,
) -> Result<Measured, String> {
    let runs: Vec<Run> = (0..runs.max(1)).map(&mut f).collect::<Result<_, _>>()?;
    let stencils = runs[0].stencils;
    let mut cpu: Vec<f64> = runs.iter().map(|r| r.cpu_ns).collect();
    cpu.sort_by(f64::total_cmp);
    Ok(Measured {
        wall: Sample::from_times(runs.iter().map(|r| r.wall_ns).collect(), 1),
        cpu_ns: cpu[cpu.len() / 2],
        stencils,
    })
}

struct Run {
    wall_ns: f64,
    cpu_ns: f64,
    /// Stencils built (lines `<triple>: N stencils, ...`; up-to-date targets count 0).
    stencils: usize,
}

struct Toolchain<'a> {
    bin: &'a Path,
    root: &'a Path,
}

impl Toolchain<'_> {
    fn build(
        &self,
        templates: &Path,
        out: &Path,
        cache: &Path,
        extra: &[&str],
    ) -> Result<Run, String> {
        self.build_with(templates, out, cache, extra, &[])
    }

    /// [`Toolchain::build`] with `env` set for the toolchain.
    fn build_with(
        &self,
        templates: &Path,
        out: &Path,
        cache: &Path,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Result<Run, String> {
        let mut cmd = Command::new(self.bin);
        cmd.envs(env.iter().copied());
        cmd.current_dir(self.root)
            .env("CPJIT_STENCIL_CACHE", cache)
            .arg("build-stencils")
            .arg("--templates")
            .arg(templates)
            .arg("--out")
            .arg(out)
            .args(extra);
        let before = children_cpu_ns();
        let start = Instant::now();
        let output = cmd
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bin.display()))?;
        let wall_ns = start.elapsed().as_nanos() as f64;
        let cpu_ns = children_cpu_ns() - before;
        if !output.status.success() {
            return Err(format!(
                "{cmd:?} failed ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        Ok(Run {
            wall_ns,
            cpu_ns,
            stencils: stencils_built(&stdout),
        })
    }
}

/// Sums `N` over the toolchain's `<triple>: N stencils, ...` lines (not `up to date` ones).
pub fn stencils_built(stdout: &str) -> usize {
    stdout
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(" stencils,").map(|(n, _)| n))
        .filter_map(|n| n.replace(',', "").parse::<usize>().ok())
        .sum()
}

/// User + system time of all waited-for children so far, ns.
fn children_cpu_ns() -> f64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
    }
    Ok(())
}

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(what: &str) -> Result<TempDir, String> {
        let path = std::env::temp_dir().join(format!("cpjit-bench-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_built_stencils_not_up_to_date_ones() {
        let out = "target-a: up to date (102 stencils, 6,004 B code)\n\
                   target-b: 1,102 stencils, 7,408 B code, 176 B data, 1.45 s\n\
                   target-c: 51 stencils, 7,832 B code\n\
                   total: 2 target(s) in 5.05 s\n";
        assert_eq!(stencils_built(out), 1153);
    }
}
