//! The build pipeline for one (translation unit, target) pair, and the parallel driver over
//! all pairs: the set's precompiled header, once per target (cached by the content of the
//! files it was built from) → `clang` to bitcode with `-MD` (cached by the content of every
//! file the dependency list names, so an unchanged unit spawns no clang at all) → inkwell
//! parse + validation → object emission (cached by bitcode) → object reader → frame
//! layouts (`frame`) → reserved-register check.
//!
//! [`Pipeline::run_all`] first asks the cache which units and family members need clang,
//! and compiles those in groups, one `clang -cc1` process per group (`cc1`; a process start
//! costs about as much as compiling a small unit); each unit of a group then goes through
//! the later stages on its own. The dependency list a group reports (the union of its
//! units') is recorded for each of its units. A group clang rejects is compiled unit by unit
//! (one driver run each), which names the failing unit's file and line.

mod attempt;
mod emit;
mod pch;
mod prefix;
mod unit;

pub(crate) use attempt::Attempt;
use pch::Pchs;
pub use pch::PreparedPch;
use prefix::Prefixes;
pub use unit::check_reserved_registers;

use crate::cache::{self, Cache, DepEntry, DepList, FileHashes};
use crate::cache_deps;
use crate::cc1::{self, Cc1Command};
use crate::clang;
use crate::error::{Error, Result};
use crate::family::Member;
use crate::llvm;
use crate::manifest::Manifest;
use crate::progress::Progress;
use crate::stencil::StencilBuf;
use crate::target::Target;
use crate::validate::IrFacts;
use rayon::prelude::*;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Everything the jobs share.
pub struct Pipeline<'a> {
    pub manifest: &'a Manifest,
    pub clang_version: &'a str,
    pub llvm_version: &'a str,
    pub cache: &'a Cache,
    /// Content hashes of the files units read, each hashed once per build.
    pub hashes: FileHashes,
    /// Family batches preprocessed before the jobs run (`batch_members`).
    pub preprocessed: crate::batch_members::Preprocessed,
}

/// `f` of each distinct target of `targets` (by triple), in parallel: the results by
/// triple, or every error at once.
fn per_target<T: Send>(
    mut targets: Vec<&Target>,
    f: impl Fn(&Target) -> Result<T> + Sync,
) -> Result<std::collections::HashMap<String, T>> {
    targets.sort_by(|a, b| a.triple.cmp(&b.triple));
    targets.dedup_by(|a, b| a.triple == b.triple);
    let results: Vec<Result<(String, T)>> = targets
        .par_iter()
        .map(|t| f(t).map(|v| (t.triple.clone(), v)))
        .collect();
    all_or_errors(results)
}

/// The keyed values of `results`, or every error at once.
fn all_or_errors<K: std::hash::Hash + Eq, V>(
    results: Vec<Result<(K, V)>>,
) -> Result<std::collections::HashMap<K, V>> {
    let mut values = std::collections::HashMap::new();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((k, v)) => {
                values.insert(k, v);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(Error::many(errors))
    }
}

/// The result of one (translation unit, target) job.
#[derive(Debug, Clone)]
pub struct UnitOutput {
    /// The unit's path relative to the manifest, `/`-separated (e.g. `testing/holes.c`).
    pub template: String,
    pub stencils: Vec<StencilBuf>,
    pub facts: IrFacts,
    /// Time spent in this job (seconds).
    pub seconds: f64,
}

/// What to compile for one target.
pub struct Job<'a> {
    pub target: &'a Target,
    pub work: Work<'a>,
}

/// A job's translation unit(s).
#[derive(Clone)]
pub enum Work<'a> {
    /// A translation unit (relative to the manifest).
    Unit(PathBuf),
    /// One member of a stencil family (its template with the member's defines, renamed).
    Member(&'a Member),
    /// Units compiled by one clang run and split apart again (`[stencils] batch_size`,
    /// see `batch`); one output per unit, in this order.
    Batch(Vec<PathBuf>),
    /// Members of one family batched the same way; one output per member, in this order.
    MemberBatch(Vec<&'a Member>),
}

impl Work<'_> {
    /// What the progress line calls the job.
    pub(crate) fn describe(&self) -> String {
        match self {
            Work::Unit(unit) => unit.display().to_string(),
            Work::Member(m) => m.source.display().to_string(),
            Work::Batch(units) => format!(
                "{} (+{} batched)",
                units
                    .first()
                    .map(|u| u.display().to_string())
                    .unwrap_or_default(),
                units.len().saturating_sub(1)
            ),
            Work::MemberBatch(members) => format!(
                "{} (+{} members batched)",
                members
                    .first()
                    .map(|m| format!("{} (family member {})", m.source.display(), m.stencil))
                    .unwrap_or_default(),
                members.len().saturating_sub(1)
            ),
        }
    }
}

/// Units per `clang -cc1` group at most: large enough that the process start is a small
/// part of a group's time, small enough that a failed group (compiled unit by unit) and
/// the union of a group's dependencies stay cheap.
pub const MAX_GROUP: usize = 32;

/// A piece of [`Pipeline::run_all`]'s work.
enum Task {
    /// One job, alone (its bitcode is cached, or it cannot be a group input).
    Job(usize),
    /// Jobs of one target compiled by one `clang -cc1` process (see `cc1`).
    Group(Vec<usize>),
}

/// What a group's `clang -cc1` command is for: a target (its triple) and the family prefix
/// (an index into `Prefixes::list`) its units compile after, if any.
type CommandKey = (String, Option<usize>);

/// A unit's bitcode compiled by its group, and every file the group read.
pub struct Prebuilt {
    pub bitcode: Vec<u8>,
    pub inputs: Vec<PathBuf>,
}

/// Where a unit's C comes from: its file, or a generated batch of units: the text that
/// names it in cache keys (`batch::source`) and the text compiled, which marks headers
/// without include guard as included once where the units need it
/// (`batch::source_with_once`), a function of the files the key covers.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    File(&'a std::path::Path),
    Batch { key: &'a str, text: &'a str },
}

impl Pipeline<'_> {
    /// Runs all jobs on `threads` threads; results are in job order. Errors of all jobs are
    /// collected.
    pub fn run_all(&self, jobs: &[Job], threads: usize) -> Result<Vec<UnitOutput>> {
        llvm::initialize();
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error(format!("cannot start worker threads: {e}")))?;
        let pchs = pool.install(|| self.prepare_pchs(jobs))?;
        let mut prefixes = pool.install(|| self.prepare_prefixes(jobs))?;
        pool.install(|| self.preprocess_member_batches(jobs, |t| pchs.by_target.get(t)));
        let (tasks, needed) = pool.install(|| self.plan(jobs, &pchs, &prefixes, threads));
        pool.install(|| self.build_needed(&mut prefixes, &needed))?;
        let prefixes = prefixes;
        let commands = pool.install(|| self.cc1_commands(jobs, &tasks, &pchs, &prefixes))?;
        let progress = Progress::new(std::io::stderr().is_terminal(), Instant::now(), jobs.len());
        let finished = AtomicBool::new(false);
        let results: Vec<(usize, Result<Vec<UnitOutput>>)> = std::thread::scope(|scope| {
            // The ticker: a status line every 250 ms once the build has run for a second, so
            // a single slow unit is visible too.
            let ticker = scope.spawn(|| {
                while !finished.load(Ordering::Relaxed) {
                    std::thread::park_timeout(std::time::Duration::from_millis(250));
                    if let Some(line) = progress.status() {
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "{line}");
                        let _ = err.flush();
                    }
                }
            });
            let run_one = |index: usize, prebuilt: Option<&Prebuilt>| {
                let job = &jobs[index];
                let what = format!("{} {}", job.target.triple, job.work.describe());
                progress.begin(&what);
                let pch = prefixes.pch(&pchs, jobs, index);
                let r = self.run_job(job, pch, prebuilt);
                progress.end(&what, 1);
                (index, r)
            };
            let results = pool.install(|| {
                tasks
                    .par_iter()
                    .flat_map_iter(|task| match task {
                        Task::Job(index) => vec![run_one(*index, None)],
                        Task::Group(group) => {
                            let triple = &jobs[group[0]].target.triple;
                            let command = &commands[&(triple.clone(), prefixes.by_job[group[0]])];
                            self.run_group(jobs, group, command, &progress, &run_one)
                        }
                    })
                    .collect()
            });
            finished.store(true, Ordering::Relaxed);
            ticker.thread().unpark();
            results
        });
        if progress.shown() {
            eprint!("\r\x1b[K");
        }
        let mut results = results;
        results.sort_by_key(|(index, _)| *index);
        let mut outputs = Vec::new();
        let mut errors = Vec::new();
        for (_, r) in results {
            match r {
                Ok(o) => outputs.extend(o),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(outputs)
        } else {
            Err(Error::many(errors))
        }
    }

    /// The order of work: every job whose bitcode is not in the cache and that can be a
    /// group input joins a group of its target and family prefix (one `clang -cc1` process
    /// each, see `cc1`), the others run alone. A target's misses are cut into groups of at
    /// most [`MAX_GROUP`], and into at least two per thread when there are few, so every
    /// thread has work. Also which prefixes a missed job compiles after.
    fn plan(
        &self,
        jobs: &[Job],
        pchs: &Pchs,
        prefixes: &Prefixes,
        threads: usize,
    ) -> (Vec<Task>, Vec<bool>) {
        let missed: Vec<bool> = (0..jobs.len())
            .into_par_iter()
            .map(|index| {
                let pch = prefixes.pch(pchs, jobs, index);
                !self.bitcode_cached(&jobs[index], pch)
            })
            .collect();
        let mut needed = vec![false; prefixes.list.len()];
        let mut tasks = Vec::new();
        let mut misses: Vec<(CommandKey, Vec<usize>)> = Vec::new();
        for (index, job) in jobs.iter().enumerate() {
            let prefix = prefixes.by_job[index];
            if let (Some(p), true) = (prefix, missed[index]) {
                needed[p] = true;
            }
            if !missed[index] || self.group_input(job).is_none() {
                tasks.push(Task::Job(index));
                continue;
            }
            let key = (job.target.triple.clone(), prefix);
            match misses.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(index),
                None => misses.push((key, vec![index])),
            }
        }
        for (_, list) in misses {
            let size = list.len().div_ceil(2 * threads).clamp(1, MAX_GROUP);
            tasks.extend(list.chunks(size).map(|c| Task::Group(c.to_vec())));
        }
        (tasks, needed)
    }

    /// The `-cc1` command of every target and family prefix that has a group, asked of the
    /// driver once each (the target's flags and precompiled header; a member's defines are
    /// in its input).
    fn cc1_commands(
        &self,
        jobs: &[Job],
        tasks: &[Task],
        pchs: &Pchs,
        prefixes: &Prefixes,
    ) -> Result<std::collections::HashMap<CommandKey, Cc1Command>> {
        let mut kinds: Vec<(&Target, Option<usize>, usize)> = tasks
            .iter()
            .filter_map(|task| match task {
                Task::Group(group) => {
                    Some((jobs[group[0]].target, prefixes.by_job[group[0]], group[0]))
                }
                Task::Job(_) => None,
            })
            .collect();
        kinds.sort_by(|a, b| (&a.0.triple, a.1).cmp(&(&b.0.triple, b.1)));
        kinds.dedup_by(|a, b| (&a.0.triple, a.1) == (&b.0.triple, b.1));
        let results: Vec<Result<(CommandKey, Cc1Command)>> = kinds
            .par_iter()
            .map(|&(t, prefix, index)| {
                let pch = prefixes.pch(pchs, jobs, index).map(|p| p.path.as_path());
                let flags = self.unit_flags(t, None);
                Cc1Command::from_driver(&flags, pch, self.manifest.limits.clang_time())
                    .map(|c| ((t.triple.clone(), prefix), c))
                    .map_err(|e| e.context(&t.triple))
            })
            .collect();
        all_or_errors(results)
    }

    /// A group of jobs (indices into `jobs`, one target): one `clang -cc1` run, then each
    /// job finished from its bitcode as if compiled alone (`run_one`). A group clang
    /// rejects (an error in one unit, or over its time limit) is compiled job by job, so
    /// an error names the unit's own file and line; if every unit then compiles, the group
    /// only cost time, and a notice says so.
    fn run_group<F>(
        &self,
        jobs: &[Job],
        group: &[usize],
        command: &Cc1Command,
        progress: &Progress,
        run_one: &F,
    ) -> Vec<(usize, Result<Vec<UnitOutput>>)>
    where
        F: Fn(usize, Option<&Prebuilt>) -> (usize, Result<Vec<UnitOutput>>) + Sync,
    {
        let triple = &jobs[group[0]].target.triple;
        let inputs: Vec<cc1::GroupInput> = group
            .iter()
            .map(|&i| {
                self.group_input(&jobs[i])
                    .expect("planned as a group input")
            })
            .collect();
        let group_name = format!(
            "{} (+{} in one clang -cc1)",
            jobs[group[0]].work.describe(),
            group.len() - 1
        );
        let what = format!("{triple} {group_name}");
        progress.begin(&what);
        // A group may take as long as its units alone would.
        let limit = self.manifest.limits.clang_time() * group.len() as u32;
        let start = Instant::now();
        let compiled = command.compile_group(&inputs, limit);
        progress.end(&what, 0);
        match compiled {
            Ok(out) => {
                // Each unit's time includes its share of the group's clang run.
                let share = start.elapsed().as_secs_f64() / group.len() as f64;
                let read = out.inputs;
                group
                    .par_iter()
                    .zip(out.bitcode.into_par_iter())
                    .map(|(&index, bitcode)| {
                        let prebuilt = Prebuilt {
                            bitcode,
                            inputs: read.clone(),
                        };
                        let (index, mut result) = run_one(index, Some(&prebuilt));
                        if let Ok(outputs) = &mut result {
                            outputs.iter_mut().for_each(|o| o.seconds += share);
                        }
                        (index, result)
                    })
                    .collect()
            }
            Err(group_error) => {
                let results: Vec<(usize, Result<Vec<UnitOutput>>)> = group
                    .par_iter()
                    .map(|&index| run_one(index, None))
                    .collect();
                if results.iter().all(|(_, r)| r.is_ok()) {
                    let first = group_error
                        .0
                        .lines()
                        .find(|l| l.contains("error"))
                        .or_else(|| group_error.0.lines().next())
                        .unwrap_or("");
                    eprintln!(
                        "notice: {triple}: the group {group_name} failed to compile, but each \
                         of its units compiled alone (slower): {first}"
                    );
                }
                results
            }
        }
    }

    /// The group input of `job` (a unit or a family member, its source by absolute path),
    /// if it can be one (see `cc1::wrapper`).
    fn group_input(&self, job: &Job) -> Option<cc1::GroupInput> {
        let (unit, member) = match &job.work {
            Work::Unit(unit) => (unit, None),
            Work::Member(m) => (&m.source, Some(*m)),
            Work::Batch(_) | Work::MemberBatch(_) => return None,
        };
        let defines = member.map_or(&[][..], |m| m.defines.as_slice());
        let text = cc1::wrapper(&self.manifest.root.join(unit), defines)?;
        Some(cc1::GroupInput {
            name: cc1::input_name(&template_name(unit, member)),
            text,
        })
    }

    /// Whether `job`'s bitcode is in the cache (its dependency list fresh and the bitcode
    /// entry present), so it needs no clang run.
    fn bitcode_cached(&self, job: &Job, pch: Option<&PreparedPch>) -> bool {
        let (unit, member) = match &job.work {
            Work::Unit(unit) => (unit, None),
            Work::Member(m) => (&m.source, Some(*m)),
            Work::Batch(_) | Work::MemberBatch(_) => return false,
        };
        self.source_cached(
            Source::File(unit),
            &self.unit_flags(job.target, member),
            pch,
        )
    }

    /// Whether the bitcode of `source` compiled with `flags` is in the cache (its dependency
    /// list fresh and the bitcode entry present).
    pub(crate) fn source_cached(
        &self,
        source: Source,
        flags: &[String],
        pch: Option<&PreparedPch>,
    ) -> bool {
        let keys = self.bitcode_keys(source, flags, pch);
        self.cache
            .get(DEPS, &keys.dep())
            .and_then(|bytes| DepList::decode(&bytes))
            .is_some_and(|list| {
                list.fresh(&self.hashes)
                    .any(|entry| self.cache.contains("bc2", &keys.bitcode(entry)))
            })
    }

    /// One translation unit for one target. A failure of anything that came from the cache
    /// (parsing, validation, object reading) makes those entries misses: they are removed
    /// and the unit is rebuilt once without reading the cache.
    pub fn run(
        &self,
        target: &Target,
        unit: &std::path::Path,
        pch: Option<&PreparedPch>,
    ) -> Result<UnitOutput> {
        self.run_unit(target, unit, None, pch, None)
    }

    /// [`Pipeline::run`] for any job: one output per unit it compiles; `prebuilt` is the
    /// bitcode of a unit or member that its group compiled.
    pub fn run_job(
        &self,
        job: &Job,
        pch: Option<&PreparedPch>,
        prebuilt: Option<&Prebuilt>,
    ) -> Result<Vec<UnitOutput>> {
        let (outputs, members) = match &job.work {
            Work::Unit(unit) => (
                vec![self.run_unit(job.target, unit, None, pch, prebuilt)?],
                Vec::new(),
            ),
            Work::Member(m) => (
                vec![self.run_unit(job.target, &m.source, Some(m), pch, prebuilt)?],
                vec![*m],
            ),
            Work::Batch(units) => (self.run_batch(job.target, units, pch)?, Vec::new()),
            Work::MemberBatch(members) => (
                self.run_member_batch(job.target, members, pch)?,
                members.clone(),
            ),
        };
        // The declared stack effects against the members' code: after the cache is done
        // with the job, so that a wrong declaration is not taken for a bad cache entry.
        for m in members {
            let seen = outputs
                .iter()
                .find_map(|o| o.facts.stack_uses.get(&m.stencil));
            let family = &self.manifest.families[m.family];
            crate::stack_use::check(family, m, seen, &job.target.triple)?;
        }
        Ok(outputs)
    }

    pub(crate) fn run_unit(
        &self,
        target: &Target,
        unit: &std::path::Path,
        member: Option<&Member>,
        pch: Option<&PreparedPch>,
        prebuilt: Option<&Prebuilt>,
    ) -> Result<UnitOutput> {
        let mut attempt = Attempt::new(true);
        match self.attempt(target, unit, member, pch, prebuilt, &mut attempt) {
            Ok(output) => {
                attempt.store(self.cache);
                Ok(output)
            }
            Err(error) if !attempt.read.is_empty() => {
                for (kind, key) in &attempt.read {
                    self.cache.reject(kind, key, &error.0);
                }
                let mut fresh = Attempt::new(false);
                let output = self.attempt(target, unit, member, pch, prebuilt, &mut fresh)?;
                fresh.store(self.cache);
                Ok(output)
            }
            Err(error) => Err(error),
        }
    }

    /// Clang flags of a unit (a family member's defines included).
    pub(crate) fn unit_flags(&self, target: &Target, member: Option<&Member>) -> Vec<String> {
        let mut flags = clang::compile_flags(self.manifest, target);
        if let Some(m) = member {
            flags.extend(m.defines.iter().map(|d| format!("-D{d}")));
        }
        flags
    }

    /// The stages of [`Pipeline::run`]; cache entries are only recorded in `attempt`.
    fn attempt(
        &self,
        target: &Target,
        unit: &std::path::Path,
        member: Option<&Member>,
        pch: Option<&PreparedPch>,
        prebuilt: Option<&Prebuilt>,
        attempt: &mut Attempt,
    ) -> Result<UnitOutput> {
        let start = Instant::now();
        let template = template_name(unit, member);
        let at = |e: Error| e.context(format!("{}: {template}", target.triple));
        let flags = self.unit_flags(target, member);
        let bitcode = self
            .bitcode(Source::File(unit), &flags, pch, prebuilt, attempt)
            .map_err(at)?;
        self.finish_unit(target, template, member, &flags, &bitcode, start, attempt)
    }

    /// Bitcode for `unit`: from the cache when every file its last compilation read still
    /// has the content it had then, else compiled (and its dependency list recorded).
    pub(crate) fn bitcode(
        &self,
        source: Source,
        flags: &[String],
        pch: Option<&PreparedPch>,
        prebuilt: Option<&Prebuilt>,
        attempt: &mut Attempt,
    ) -> Result<Vec<u8>> {
        let keys = self.bitcode_keys(source, flags, pch);
        let dep_key = keys.dep();
        let compiled = match prebuilt {
            // Compiled by its group just now: the cache was asked when the group was planned.
            Some(p) => clang::Compiled {
                bitcode: p.bitcode.clone(),
                inputs: p.inputs.clone(),
            },
            None => {
                if let Some(bytes) = attempt.get(self.cache, DEPS, &dep_key) {
                    match DepList::decode(&bytes) {
                        Some(list) => {
                            // Any earlier compilation whose files have these contents.
                            for entry in list.fresh(&self.hashes) {
                                if let Some(bitcode) =
                                    attempt.get(self.cache, "bc2", &keys.bitcode(entry))
                                {
                                    attempt.inputs = entry.local_files(&self.hashes);
                                    return Ok(bitcode);
                                }
                            }
                        }
                        None => self.cache.reject(DEPS, &dep_key, "not a dependency list"),
                    }
                }
                let limit = self.manifest.limits.clang_time();
                let pch_path = pch.map(|p| p.path.as_path());
                match source {
                    Source::File(unit) => clang::compile_source_within(
                        flags,
                        &self.manifest.root.join(unit),
                        pch_path,
                        limit,
                    )?,
                    Source::Batch { text, .. } => clang::compile_text_within(
                        flags,
                        "batch",
                        text.as_bytes(),
                        pch_path,
                        limit,
                    )?,
                }
            }
        };
        let mut compiled = compiled;
        // A family prefix's generated header is gone after the build; its text is in the key.
        if let Some(generated) = pch.and_then(|p| p.generated.as_ref()) {
            compiled.inputs.retain(|p| p != generated);
        }
        attempt.inputs.clone_from(&compiled.inputs);
        // A listed file that cannot be read (removed meanwhile): nothing to key a cache entry
        // on, so the bitcode is used but not stored.
        if let Some(entry) = self.dep_entry(&compiled.inputs) {
            attempt.put("bc2", &keys.bitcode(&entry), &compiled.bitcode);
            let previous = attempt
                .peek(self.cache, DEPS, &dep_key)
                .and_then(|b| DepList::decode(&b));
            attempt.put(DEPS, &dep_key, &DepList::with(previous, entry).encode());
        }
        Ok(compiled.bitcode)
    }

    /// The cache keys of a unit's bitcode: clang's version, the flags, the precompiled
    /// header's key and what is compiled (a unit by its path, a batch by its text, which
    /// lists its units' paths), each with the set's directory spelt [`cache_deps::SET_ROOT`]
    /// (a second checkout finds the entries).
    fn bitcode_keys(
        &self,
        source: Source,
        flags: &[String],
        pch: Option<&PreparedPch>,
    ) -> BitcodeKeys {
        BitcodeKeys {
            clang_version: self.clang_version.to_string(),
            flags: self.portable(&flags.join("\0")),
            pch: pch.map_or(String::new(), |p| p.portable.clone()),
            identity: match source {
                Source::File(unit) => {
                    self.portable(&self.manifest.root.join(unit).to_string_lossy())
                }
                Source::Batch { key, .. } => format!("batch\0{}", self.portable(key)),
            },
        }
    }

    /// `text` (flags, a batch's source) with the set's directory spelt
    /// [`cache_deps::SET_ROOT`], as cache keys spell it.
    pub(crate) fn portable(&self, text: &str) -> String {
        cache_deps::portable(text, &self.manifest.root)
    }

    /// The dependency entry of `inputs` (each with its content hash), if all are readable;
    /// files under the set are listed as in every checkout of it.
    fn dep_entry(&self, inputs: &[PathBuf]) -> Option<DepEntry> {
        let files = inputs
            .iter()
            .map(|file| Some((self.hashes.portable(file), self.hashes.hash(file)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(DepEntry { files })
    }
}

/// The cache kind of a unit's dependency lists ([`DepList`]) and of a precompiled header's.
const DEPS: &str = "dep3";
const PCH_DEPS: &str = "pchdep2";

/// What a unit's bitcode cache entries are keyed on (see [`Pipeline::bitcode_keys`]).
struct BitcodeKeys {
    clang_version: String,
    flags: String,
    pch: String,
    identity: String,
}

impl BitcodeKeys {
    /// The key of the dependency list (`dep2`): what clang read when it last compiled this.
    fn dep(&self) -> String {
        cache::key(&[
            DEPS.as_bytes(),
            self.clang_version.as_bytes(),
            self.flags.as_bytes(),
            self.pch.as_bytes(),
            self.identity.as_bytes(),
        ])
    }

    /// The key of the bitcode (`bc2`) compiled from the files and contents of `entry`.
    fn bitcode(&self, entry: &DepEntry) -> String {
        cache::key(&[
            b"bc2",
            self.clang_version.as_bytes(),
            self.flags.as_bytes(),
            self.pch.as_bytes(),
            self.identity.as_bytes(),
            &entry.encode(),
        ])
    }
}

/// A unit's name in stencils and errors: its path relative to the manifest, `/`-separated,
/// with the member's stencil for a family member.
pub(crate) fn template_name(unit: &std::path::Path, member: Option<&Member>) -> String {
    let template = unit
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    match member {
        Some(m) => format!("{template} (family member {})", m.stencil),
        None => template,
    }
}

#[cfg(test)]
mod tests;
