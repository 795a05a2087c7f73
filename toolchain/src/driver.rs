//! The `build-stencils` and `stencils show` commands: load the set and the targets, skip
//! targets whose committed crate already has the current inputs digest, run the pipeline,
//! build each target's set, then write, check or dump it.

use crate::cache::Cache;
use crate::check;
use crate::clang;
use crate::digest;
use crate::error::{Error, Result};
use crate::family;
use crate::listing;
use crate::llvm;
use crate::manifest::Manifest;
use crate::pipeline::{Job, Pipeline, Work};
use crate::set::{self, BuiltSet};
use crate::target::Target;
use crate::writer;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options shared by both commands.
#[derive(Debug, Clone)]
pub struct Options {
    /// Template-set directory (holds `manifest.toml`).
    pub templates: PathBuf,
    /// Directory of target files.
    pub targets_dir: PathBuf,
    /// Targets to build (triples); empty means all.
    pub only: Vec<String>,
    pub jobs: usize,
    pub cache: Cache,
}

/// `build-stencils`-specific options.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub common: Options,
    /// Where the crates go: `<out>/<triple>/`.
    pub out: PathBuf,
    /// A local `cpjit-model` crate directory the generated Cargo.toml points at (with the
    /// version); `None`: depend on the published version only.
    pub model_dir: Option<PathBuf>,
    pub check: bool,
    pub json: Option<PathBuf>,
    /// Regenerate even when the committed digest matches.
    pub force: bool,
}

/// What `build-stencils` did, per target: its summary line.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
    /// Targets that were (re)generated (not skipped as up to date).
    pub built: Vec<String>,
    /// Targets whose stencils clang compiled in this run: the built ones, except that a
    /// target with a twin (`same_code_as`) is compiled as its twin, once for both.
    pub compiled: Vec<String>,
}

struct Loaded {
    manifest: Manifest,
    /// The targets to build, as this set builds them.
    targets: Vec<Target>,
    /// Every target file's target, as this set builds it (twins are compiled as these).
    all: Vec<Target>,
    clang_version: String,
    llvm_version: String,
    files: Vec<(String, Vec<u8>)>,
}

fn load(opts: &Options) -> Result<Loaded> {
    opts.cache.check()?;
    let manifest = Manifest::load(&opts.templates)?;
    let manifest_file = opts.templates.join("manifest.toml");
    for triple in manifest.targets.keys() {
        if !opts.targets_dir.join(format!("{triple}.toml")).is_file() {
            return Err(Error(format!(
                "{}: key `target.{triple}`: no such target (target files are in {})",
                manifest_file.display(),
                opts.targets_dir.display()
            )));
        }
    }
    // Each target as this set builds it (a set may choose its code and relocation model).
    let all = Target::load_all(&opts.targets_dir)?
        .iter()
        .map(|t| match manifest.flags_for(t) {
            Some(f) => t.with_set_models(
                &manifest_file.display().to_string(),
                &manifest.name,
                f.code_model.as_deref(),
                f.reloc_model.as_deref(),
            ),
            None => Ok(t.clone()),
        })
        .collect::<Result<Vec<Target>>>()?;
    let mut targets = Vec::new();
    for want in &opts.only {
        match all.iter().find(|t| t.triple == *want) {
            Some(t) if !targets.iter().any(|x: &Target| x.triple == *want) => {
                targets.push(t.clone())
            }
            Some(_) => {}
            None => {
                let known: Vec<&str> = all.iter().map(|t| t.triple.as_str()).collect();
                return Err(Error(format!(
                    "unknown target `{want}` (known: {})",
                    known.join(", ")
                )));
            }
        }
    }
    if targets.is_empty() {
        targets = all.clone();
    }
    targets.sort_by(|a, b| a.triple.cmp(&b.triple));
    let clang_version = clang::version_cached(&opts.cache)?;
    let llvm_version = llvm::version()?;
    let files = digest::template_files(&manifest)?;
    Ok(Loaded {
        manifest,
        targets,
        all,
        clang_version,
        llvm_version,
        files,
    })
}

/// The target `t` is compiled as: itself, or the target its file names in `same_code_as`
/// (whose facts the schema has checked equal), as this set builds both. A set that changes
/// the flags of one and not the other (`[target.<triple>]`) makes their code differ: refused,
/// naming the manifest, both triples and the fix.
fn compile_as<'a>(l: &'a Loaded, t: &'a Target) -> Result<&'a Target> {
    let Some(twin) = &t.same_code_as else {
        return Ok(t);
    };
    let other = l
        .all
        .iter()
        .find(|o| o.triple == *twin)
        .expect("the schema checked that the twin's file exists");
    if l.manifest.flags_for(t) != l.manifest.flags_for(other) {
        return Err(Error(format!(
            "{}: `{}` and `{twin}` get different flags from this set, but targets/{}.toml says \
             `same_code_as = \"{twin}\"`: give both the same [target.<triple>] table (or one \
             [[target_rule]] for both), or remove the key from the target file",
            l.manifest.root.join("manifest.toml").display(),
            t.triple,
            t.triple
        )));
    }
    Ok(other)
}

/// Compiles `targets` and builds their sets. A target with a twin (`same_code_as`) is not
/// compiled: its set is built from its twin's outputs (compiled in this run, never taken
/// from elsewhere), so the two crates differ only in what names the target.
fn build_sets(
    l: &Loaded,
    targets: &[&Target],
    opts: &Options,
) -> Result<(Vec<BuiltSet>, Vec<String>)> {
    let units = l.manifest.translation_units()?;
    let members = family::all_members(&l.manifest.families, &l.manifest.root)?;
    // Plain units in one job each, or in batches (`[stencils] batch_size`, units of one
    // `translation_unit_entry` each); either way one output per unit, in unit order, then
    // one per family member.
    let unit_batches = match l.manifest.naming {
        crate::manifest::Naming::TranslationUnitEntry(_) => l.manifest.batch_size,
        crate::manifest::Naming::Functions(_) => None,
    };
    let plain: Vec<Work> = match unit_batches {
        None => units.iter().cloned().map(Work::Unit).collect(),
        Some(size) => crate::batch::batches(&units, size)
            .into_iter()
            .map(Work::Batch)
            .collect(),
    };
    // Family members likewise: one job each, or batches of one family's members.
    let mut member_work: Vec<Work> = Vec::new();
    match l.manifest.batch_size {
        None => member_work.extend(members.iter().map(Work::Member)),
        Some(size) => {
            for family in members.chunk_by(|a, b| a.family == b.family) {
                for batch in family.chunks(size.max(1)) {
                    member_work.push(Work::MemberBatch(batch.iter().collect()));
                }
            }
        }
    }
    let sources: Vec<&Target> = targets
        .iter()
        .map(|t| compile_as(l, t))
        .collect::<Result<_>>()?;
    let mut compiled: Vec<&Target> = sources.clone();
    compiled.sort_by(|a, b| a.triple.cmp(&b.triple));
    compiled.dedup_by(|a, b| a.triple == b.triple);
    let jobs: Vec<Job> = compiled
        .iter()
        .flat_map(|t| {
            plain.iter().chain(&member_work).map(move |w| Job {
                target: t,
                work: w.clone(),
            })
        })
        .collect();
    let pipeline = Pipeline {
        manifest: &l.manifest,
        clang_version: &l.clang_version,
        llvm_version: &l.llvm_version,
        cache: &opts.cache,
        hashes: crate::cache::FileHashes::for_set(&l.manifest.root),
        preprocessed: Default::default(),
    };
    let mut outputs = pipeline
        .run_all(&jobs, opts.jobs)
        .map_err(|e| with_twins_named(e, targets, &sources))?
        .into_iter();
    let mut by_source = std::collections::HashMap::new();
    for t in &compiled {
        let mine: Vec<_> = outputs.by_ref().take(units.len() + members.len()).collect();
        by_source.insert(t.triple.as_str(), mine);
    }
    let mut sets = Vec::new();
    let mut errors = Vec::new();
    for (t, source) in targets.iter().zip(&sources) {
        let mut mine = by_source[source.triple.as_str()].clone();
        if source.triple != t.triple {
            // The job time was spent once, for the twin: counted there.
            mine.iter_mut().for_each(|u| u.seconds = 0.0);
        }
        let digest = digest::compute(&l.files, &l.manifest, t, &l.clang_version, &l.llvm_version);
        match set::build(&l.manifest, t, mine, digest)
            .and_then(|s| set::with_families(s, &l.manifest, &members))
        {
            Ok(s) => sets.push(s),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok((sets, compiled.iter().map(|t| t.triple.clone()).collect()))
    } else {
        Err(Error::many(errors))
    }
}

/// `e` with a line per target compiled as its twin: the errors name the triple compiled.
fn with_twins_named(e: Error, targets: &[&Target], sources: &[&Target]) -> Error {
    let mut text = e.0;
    for (t, source) in targets.iter().zip(sources) {
        if t.triple != source.triple {
            text.push_str(&format!(
                "\nnote: {} is compiled as {} (`same_code_as` in its target file): the errors \
                 naming {} are its errors too",
                t.triple, source.triple, source.triple
            ));
        }
    }
    Error(text)
}

/// The summary line of a built set. Its time is the target's *job time*: the time its
/// jobs took, summed (a `clang -cc1` group's or batch's run shared among its units). Jobs
/// of every target run side by side on the build's threads, so job time is not the time
/// the target took, and the targets' job times add up to more than the build's wall time;
/// [`total_line`] gives both.
pub fn summary(set: &BuiltSet) -> String {
    let time = match &set.target.same_code_as {
        Some(twin) => format!("compiled as {twin} (same_code_as), no job time of its own"),
        None => format!("{:.2} s of job time", set.seconds),
    };
    format!(
        "{}: {} stencils, {} B code, {} B data, {} holes, {time}",
        set.target.triple,
        set.stencils.len(),
        writer::thousands(set.code_bytes()),
        writer::thousands(set.data_bytes()),
        writer::thousands(set.hole_count()),
    )
}

/// The last line of a build of `job_seconds` (each built target's job time, see
/// [`summary`]) in `wall_seconds` on `threads` threads: the wall time from start to end,
/// and the job time as the sum of the per-target figures as printed.
pub fn total_line(job_seconds: &[f64], wall_seconds: f64, threads: usize) -> String {
    // Summed as printed (to the hundredth), so the total is the sum of the lines above.
    let jobs: f64 = job_seconds
        .iter()
        .map(|s| (s * 100.0).round() / 100.0)
        .sum();
    format!(
        "total: {} target(s) in {wall_seconds:.2} s of wall time ({jobs:.2} s of job time, \
         the targets' sum, on {})",
        job_seconds.len(),
        writer::plural(threads, "thread")
    )
}

/// The sidecar of target `t`'s crate in `out` if the crate is fresh: the sidecar records
/// this inputs digest and the full-content digest of every generated file still matches
/// (a torn or edited file is rebuilt).
fn fresh_sidecar(l: &Loaded, out: &Path, t: &Target) -> Option<writer::Sidecar> {
    let digest = digest::compute(&l.files, &l.manifest, t, &l.clang_version, &l.llvm_version);
    let crate_dir = out.join(&t.triple);
    writer::Sidecar::read(&crate_dir).filter(|s| s.is_fresh(&crate_dir, &digest))
}

/// The targets of `opts` whose crate in `opts.out` is missing or not fresh (what a plain
/// `build-stencils` with these options would build), compiling nothing: for a client's
/// build or bench to refuse stale stencils with the command that regenerates them.
pub fn stale_crates(opts: &BuildOptions) -> Result<Vec<String>> {
    let l = load(&opts.common)?;
    Ok(l.targets
        .iter()
        .filter(|t| fresh_sidecar(&l, &opts.out, t).is_none())
        .map(|t| t.triple.clone())
        .collect())
}

/// `build-stencils`.
pub fn build_stencils(opts: &BuildOptions) -> Result<Report> {
    let start = Instant::now();
    let mut opts = opts.clone();
    if opts.check {
        // What `--check` vouches for comes from this run's compilers, never a cache entry.
        opts.common.cache = opts.common.cache.fill_only();
    }
    let opts = &opts;
    let l = load(&opts.common)?;
    let mut report = Report::default();
    let all_targets = Target::load_all(&opts.common.targets_dir)?;
    if !opts.check {
        remove_stale_temporaries(&opts.out, &all_targets);
    }
    let mut todo: Vec<&Target> = Vec::new();
    for t in &l.targets {
        match fresh_sidecar(&l, &opts.out, t) {
            Some(sidecar) if !opts.check && !opts.force && opts.json.is_none() => {
                let c = sidecar.counts;
                report.lines.push(format!(
                    "{}: up to date ({} stencils, {} B code, {} B data, {} holes)",
                    t.triple,
                    c.stencils,
                    writer::thousands(c.code_bytes),
                    writer::thousands(c.data_bytes),
                    writer::thousands(c.holes)
                ));
            }
            _ => todo.push(t),
        }
    }
    // Written (or checked) only once every set has built: a failed build leaves the facade
    // as it was, like the crates. It lists the targets of this build and those already in
    // `out` (facade::listed).
    let facade = || {
        crate::facade::write_or_check(
            &opts.out,
            &l.manifest.name,
            &l.manifest.package,
            &all_targets,
            &l.targets,
            opts.model_dir.as_deref(),
            opts.check,
            !l.manifest.families.is_empty(),
        )
    };
    if todo.is_empty() {
        // Only without --check (which builds every target): nothing is stale to report.
        facade()?;
        return Ok(report);
    }
    let (sets, compiled) = build_sets(&l, &todo, &opts.common)?;
    report.compiled = compiled;
    let mut stale = Vec::new();
    for set in &sets {
        let crate_dir = opts.out.join(&set.target.triple);
        let model_path = match &opts.model_dir {
            Some(dir) => Some(writer::relative_path(
                &absolute(&crate_dir)?,
                &absolute(dir)?,
            )),
            None => None,
        };
        let files = writer::generate(set, model_path.as_deref())?;
        for (rel, content) in &files.files {
            let path = crate_dir.join(rel);
            let committed = std::fs::read_to_string(&path).ok();
            if opts.check {
                if let Some(d) = check::describe_difference(
                    &path.display().to_string(),
                    committed.as_deref(),
                    content,
                ) {
                    stale.push(format!("{}: {d}", set.target.triple));
                }
            } else if committed.as_deref() != Some(content.as_str()) {
                // Unchanged files are not rewritten, so cargo does not rebuild their crate.
                // The sidecar is last in `files`: it only vouches for files already in place.
                writer::write_atomic(&path, content.as_bytes())?;
            }
        }
        if let Some(notice) = crate::frame::unknown_notice(&set.target, &set.stencils) {
            eprintln!("{notice}");
        }
        report.lines.push(summary(set));
        report.built.push(set.target.triple.clone());
    }
    stale.splice(0..0, facade()?);
    if let Some(path) = &opts.json {
        write_json(path, &sets)?;
    }
    let job_seconds: Vec<f64> = sets.iter().map(|s| s.seconds).collect();
    report.lines.push(total_line(
        &job_seconds,
        start.elapsed().as_secs_f64(),
        opts.common.jobs.max(1),
    ));
    if !stale.is_empty() {
        let triples: Vec<&str> = sets
            .iter()
            .map(|s| s.target.triple.as_str())
            .filter(|t| stale.iter().any(|line| line.starts_with(&format!("{t}: "))))
            .collect();
        return Err(Error(format!(
            "{}\n{} stale file(s); to fix: {} (then commit the result)",
            stale.join("\n"),
            stale.len(),
            fix_command(opts, &triples)
        )));
    }
    Ok(report)
}

/// Removes what a killed run left in the output's crate and facade directories (see
/// `writer::remove_stale_temporaries`), with a notice naming each file.
fn remove_stale_temporaries(out: &Path, targets: &[Target]) {
    let crates = targets
        .iter()
        .map(|t| t.triple.as_str())
        .chain([crate::facade::DIR]);
    for name in crates {
        for dir in [out.join(name), out.join(name).join("src")] {
            for file in writer::remove_stale_temporaries(&dir) {
                eprintln!(
                    "notice: removed {}, a temporary file of an interrupted run",
                    file.display()
                );
            }
        }
    }
}

/// The command that regenerates the stale targets of a `--check` run: the same set and
/// output directory, without `--check` (a plain run rebuilds whatever its sidecar does not
/// vouch for). Default paths (`templates/`, `stencils/` beside `targets/`) are left out.
pub fn fix_command(opts: &BuildOptions, triples: &[&str]) -> String {
    let root = opts.common.targets_dir.parent().map(Path::to_path_buf);
    let is_default = |path: &Path, name: &str| {
        root.as_ref()
            .is_some_and(|r| absolute(path).ok() == absolute(&r.join(name)).ok())
    };
    let mut command = String::from("cargo xtask build-stencils");
    if !is_default(&opts.common.templates, "templates") {
        command.push_str(&format!(" --templates {}", opts.common.templates.display()));
    }
    if !is_default(&opts.out, "stencils") {
        command.push_str(&format!(" --out {}", opts.out.display()));
    }
    for t in triples {
        command.push_str(&format!(" --target {t}"));
    }
    format!("run `{command}`")
}

fn absolute(p: &Path) -> Result<PathBuf> {
    std::path::absolute(p).map_err(|e| Error(format!("{}: {e}", p.display())))
}

fn write_json(path: &Path, sets: &[BuiltSet]) -> Result<()> {
    let mut targets = serde_json::Map::new();
    for set in sets {
        let value = serde_json::json!({
            "target": set.target.triple,
            "arch": set.target.arch.name(),
            "format": set.target.format.name(),
            "set": set.set_name,
            "digest": set.digest,
            "shim": set.shim.map(|i| set.stencils[i as usize].name.clone()),
            // Issue 37's figure: continuing stencils, and how many of them fall through.
            "continuing": set.continuing(),
            "falls_through": set.falling_through(),
            "symbols": set.symbols,
            "stencils": set.stencils,
        });
        targets.insert(set.target.triple.clone(), value);
    }
    let mut text = serde_json::to_string_pretty(&serde_json::Value::Object(targets))
        .map_err(|e| Error(format!("cannot serialise JSON: {e}")))?;
    text.push('\n');
    writer::write_atomic(path, text.as_bytes())
}

/// `stencils show`: listings of the stencils called `name` (a glob; all when `None`).
pub fn show(opts: &Options, name: Option<&str>) -> Result<String> {
    let l = load(opts)?;
    let targets: Vec<&Target> = l.targets.iter().collect();
    let (sets, _) = build_sets(&l, &targets, opts)?;
    let mut out = String::new();
    let mut found = false;
    for set in &sets {
        for (s, template) in set.stencils.iter().zip(&set.templates) {
            if name.is_some_and(|n| !crate::glob::matches(n, &s.name)) {
                continue;
            }
            found = true;
            out.push_str(&format!(
                "{} {} ({template}): {} B code (align {}), {} B data (align {}), {}{}\n",
                set.target.triple,
                s.name,
                s.code.len(),
                s.code_align,
                s.data_len,
                s.data_align,
                writer::plural(s.holes.len(), "hole"),
                if s.elided_continue {
                    ", continuation jump elided"
                } else {
                    ""
                }
            ));
            for line in listing::lines(set.target.llvm_triple(), s)? {
                out.push_str("  ");
                out.push_str(&line);
                out.push('\n');
            }
            out.push('\n');
        }
    }
    if !found {
        if let Some(n) = name {
            return Err(Error(format!("no stencil matches `{n}`")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::total_line;

    #[test]
    fn the_total_line_says_what_it_measures_and_sums_the_targets_as_printed() {
        let line = total_line(&[40.154, 40.154], 49.1, 2);
        assert_eq!(
            line,
            "total: 2 target(s) in 49.10 s of wall time (80.30 s of job time, the targets' \
             sum, on 2 threads)"
        );
        assert!(total_line(&[1.0], 2.0, 1).ends_with("on 1 thread)"));
    }
}
