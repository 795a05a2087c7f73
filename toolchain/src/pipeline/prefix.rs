//! Shared prefixes of family members (issue 38): the members of a family template on one
//! target parse the same headers before anything that depends on their defines, so that
//! part (`crate::prefix`) is precompiled once and each member compiled after it, with the
//! bitcode it gives alone.
//!
//! Which members may share one precompiled prefix: the prefix is first built with no
//! member define (the probe); the member defines its files (or its own lines) name are the
//! ones it may read, and the members are split by their values of those, each part's prefix
//! built with them defined first. A part's prefix whose files name a define that varies
//! within the part (a header the probe did not read, included under such a define) is not
//! used: its members compile as before, with a notice, since the author declared nothing
//! and the stencils are the same either way, only slower.
//!
//! Keys: a prefix's dependency list is cached by its text and flags (`prefixdep1`); the
//! members' bitcode keys take its text, flags and the content of every file it read
//! ([`PreparedPch::portable`]), so an edited header or template line gives new keys. The
//! precompiled header itself is never cached: it is built in a scratch directory, only when
//! one of its members misses the cache.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The cache kind of a family prefix's dependency list.
const PREFIX_DEPS: &str = "prefixdep1";

/// Members of one part that make a precompiled prefix worth building.
const MIN_MEMBERS: usize = 2;

/// One family prefix on one target.
pub(super) struct PrefixPch {
    pub(super) pch: PreparedPch,
    text: String,
    flags: Vec<String>,
    /// Whether `pch.path` is written (else it is built when a member needs it).
    built: bool,
    /// The files it read (for the check that it reads no member's varying define).
    files: Vec<PathBuf>,
    /// What errors name: the families and the template.
    what: String,
}

/// The family prefixes of one build.
#[derive(Default)]
pub(super) struct Prefixes {
    _dir: Option<tempfile::TempDir>,
    pub(super) list: Vec<PrefixPch>,
    /// Per job, the prefix it compiles after, if any.
    pub(super) by_job: Vec<Option<usize>>,
}

impl Prefixes {
    /// The precompiled header job `index` compiles after: its prefix's, else the set's.
    pub(super) fn pch<'p>(
        &'p self,
        pchs: &'p Pchs,
        jobs: &[Job],
        index: usize,
    ) -> Option<&'p PreparedPch> {
        match self.by_job.get(index).copied().flatten() {
            Some(prefix) => Some(&self.list[prefix].pch),
            None => pchs.by_target.get(&jobs[index].target.triple),
        }
    }
}

/// A prefix and the members (job indices) that compile after it.
type Shared = (PrefixPch, Vec<usize>);

/// The family members of one template on one target: (triple, template) → job indices.
type Buckets<'j> = BTreeMap<(String, PathBuf), (&'j Target, Vec<usize>)>;

impl Pipeline<'_> {
    /// The prefixes of the family members among `jobs` (none for a set with its own
    /// `precompiled_header`: clang takes one).
    pub(super) fn prepare_prefixes(&self, jobs: &[Job]) -> Result<Prefixes> {
        let mut prefixes = Prefixes {
            by_job: vec![None; jobs.len()],
            ..Prefixes::default()
        };
        if self.manifest.precompiled_header.is_some() {
            return Ok(prefixes);
        }
        let mut buckets: Buckets = BTreeMap::new();
        for (index, job) in jobs.iter().enumerate() {
            if let Work::Member(m) = &job.work {
                let key = (job.target.triple.clone(), m.source.clone());
                buckets
                    .entry(key)
                    .or_insert((job.target, Vec::new()))
                    .1
                    .push(index);
            }
        }
        buckets.retain(|_, (_, members)| members.len() >= MIN_MEMBERS);
        if buckets.is_empty() {
            return Ok(prefixes);
        }
        let dir = clang::scratch_dir()?;
        let results: Vec<Result<Vec<Shared>>> = buckets
            .par_iter()
            .map(|((_, source), (target, members))| {
                self.bucket_prefixes(jobs, target, source, members, dir.path())
            })
            .collect();
        let mut errors = Vec::new();
        for result in results {
            match result {
                Ok(parts) => {
                    for (prefix, members) in parts {
                        for index in members {
                            prefixes.by_job[index] = Some(prefixes.list.len());
                        }
                        prefixes.list.push(prefix);
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(Error::many(errors));
        }
        prefixes._dir = Some(dir);
        Ok(prefixes)
    }

    /// The prefixes of one template's members on one target (`members`, job indices), each
    /// with the members that compile after it.
    fn bucket_prefixes(
        &self,
        jobs: &[Job],
        target: &Target,
        source: &std::path::Path,
        members: &[usize],
        dir: &std::path::Path,
    ) -> Result<Vec<Shared>> {
        let member = |index: usize| match &jobs[index].work {
            Work::Member(m) => *m,
            _ => unreachable!("buckets hold family members"),
        };
        let name = |define: &str| {
            define
                .split_once('=')
                .map_or(define, |(n, _)| n)
                .to_string()
        };
        let names: BTreeSet<String> = members
            .iter()
            .flat_map(|&i| member(i).defines.iter().map(|d| name(d)))
            .collect();
        let path = self.manifest.root.join(source);
        let Ok(template) = std::fs::read_to_string(&path) else {
            return Ok(Vec::new()); // compiling it reports the error
        };
        let borrowed: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let template_dir = path.parent().unwrap_or(&self.manifest.root);
        let Some(prefix) = crate::prefix::find(&template, template_dir, &borrowed) else {
            return Ok(Vec::new());
        };
        let mut families: Vec<&str> = members
            .iter()
            .map(|&i| self.manifest.families[member(i).family].name.as_str())
            .collect();
        let mut seen = BTreeSet::new();
        families.retain(|f| seen.insert(*f));
        let named = match families.len() {
            0..=3 => families.join(", "),
            n => format!("{} and {} more", families[..3].join(", "), n - 3),
        };
        let what = format!(
            "{}: family {named} (the prefix of {}, its leading #define and #include lines)",
            target.triple,
            source.display()
        );
        let probe = self.prefix_pch(target, prefix.header_text(&[]), dir, &what)?;
        // The member defines the prefix may read.
        let read = self.names_read(&probe, &names);
        let mut parts: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
        for &index in members {
            let fixed: Vec<String> = member(index)
                .defines
                .iter()
                .filter(|d| read.contains(&name(d)))
                .cloned()
                .collect();
            parts.entry(fixed).or_default().push(index);
        }
        let mut probe = Some(probe);
        let mut out = Vec::new();
        for (fixed, part) in parts {
            if part.len() < MIN_MEMBERS {
                continue;
            }
            let pch = match (fixed.is_empty(), probe.take()) {
                (true, Some(probe)) => probe,
                (_, kept) => {
                    probe = kept;
                    self.prefix_pch(target, prefix.header_text(&fixed), dir, &what)?
                }
            };
            // The defines that vary within the part, or are defined after the prefix.
            let after: BTreeSet<String> = part
                .iter()
                .flat_map(|&i| member(i).defines.iter().map(|d| name(d)))
                .filter(|n| !fixed.iter().any(|f| name(f) == *n))
                .collect();
            if let Some((define, file)) = self.first_read(&pch, &after) {
                eprintln!(
                    "notice: {what}: {file} names `{define}`, a define the members set after \
                     the prefix: compiled without a shared prefix (the same stencils, slower)"
                );
                continue;
            }
            out.push((pch, part));
        }
        Ok(out)
    }

    /// Which of `names` the prefix's files or its own text name in code.
    fn names_read(&self, prefix: &PrefixPch, names: &BTreeSet<String>) -> BTreeSet<String> {
        let own = crate::batch_names::code_identifiers(&prefix.text);
        let mut read: BTreeSet<String> =
            names.iter().filter(|n| own.contains(*n)).cloned().collect();
        for file in &prefix.files {
            if let Some(words) = self.preprocessed.code_identifiers(file) {
                read.extend(names.iter().filter(|n| words.contains(*n)).cloned());
            }
        }
        read
    }

    /// The first of `names` the prefix reads, with the file that names it.
    fn first_read(&self, prefix: &PrefixPch, names: &BTreeSet<String>) -> Option<(String, String)> {
        let own = crate::batch_names::code_identifiers(&prefix.text);
        if let Some(n) = names.iter().find(|n| own.contains(*n)) {
            return Some((n.clone(), "its own text".into()));
        }
        prefix.files.iter().find_map(|file| {
            let words = self.preprocessed.code_identifiers(file)?;
            let n = names.iter().find(|n| words.contains(*n))?;
            Some((n.clone(), file.display().to_string()))
        })
    }

    /// The prefix `text` on `target`: its key from the cached dependency list when every
    /// file it read is unchanged (built later, if a member needs it), else built now.
    fn prefix_pch(
        &self,
        target: &Target,
        text: String,
        dir: &std::path::Path,
        what: &str,
    ) -> Result<PrefixPch> {
        let flags = clang::compile_flags(self.manifest, target);
        let portable_flags = self.portable(&flags.join("\0"));
        let stem = &cache::key(&[target.triple.as_bytes(), text.as_bytes()])[..24];
        let header = dir.join(format!("{stem}.h"));
        let portable_text = self.portable(&text);
        let dep_key = cache::key(&[
            PREFIX_DEPS.as_bytes(),
            self.clang_version.as_bytes(),
            portable_flags.as_bytes(),
            portable_text.as_bytes(),
        ]);
        let identity = |entry: &[u8]| {
            cache::key(&[
                b"prefix",
                self.clang_version.as_bytes(),
                portable_flags.as_bytes(),
                portable_text.as_bytes(),
                entry,
            ])
        };
        let previous = self
            .cache
            .get(PREFIX_DEPS, &dep_key)
            .and_then(|b| DepList::decode(&b));
        let mut prefix = PrefixPch {
            pch: PreparedPch {
                path: dir.join(format!("{stem}.pch")),
                key: String::new(),
                portable: String::new(),
                generated: Some(header),
            },
            text,
            flags,
            built: false,
            files: Vec::new(),
            what: what.to_string(),
        };
        let fresh = previous.as_ref().and_then(|l| l.fresh(&self.hashes).next());
        if let Some(entry) = fresh {
            prefix.pch.key = identity(&entry.encode());
            prefix.pch.portable = prefix.pch.key.clone();
            prefix.files = entry.local_files(&self.hashes);
            return Ok(prefix);
        }
        let inputs = self.build_prefix(&prefix)?;
        prefix.built = true;
        prefix.pch.key = match self.dep_entry(&inputs) {
            Some(entry) => {
                let key = identity(&entry.encode());
                self.cache.put(
                    PREFIX_DEPS,
                    &dep_key,
                    &DepList::with(previous, entry).encode(),
                );
                key
            }
            // An input vanished while clang ran: usable once, keyed so it is never reused.
            None => cache::key(&[b"uncached", dep_key.as_bytes()]),
        };
        prefix.pch.portable = prefix.pch.key.clone();
        prefix.files = inputs;
        Ok(prefix)
    }

    /// Writes the prefix's header and precompiles it: the files clang read (the generated
    /// header left out). An error names the families, the template and clang's message.
    fn build_prefix(&self, prefix: &PrefixPch) -> Result<Vec<PathBuf>> {
        let header = prefix.pch.generated.as_ref().expect("a prefix's header");
        std::fs::write(header, &prefix.text)
            .map_err(|e| Error(format!("cannot write {}: {e}", header.display())))?;
        let inputs = clang::precompile_header_within(
            &prefix.flags,
            header,
            &prefix.pch.path,
            self.manifest.limits.clang_time(),
        )
        .map_err(|e| {
            e.context(format!(
                "{}: cannot be precompiled (generated header:\n{})",
                prefix.what,
                prefix.text.trim_end()
            ))
        })?;
        Ok(inputs.into_iter().filter(|p| p != header).collect())
    }

    /// Builds the prefixes `needed` says a member compiles after and that are not built yet.
    pub(super) fn build_needed(&self, prefixes: &mut Prefixes, needed: &[bool]) -> Result<()> {
        let results: Vec<Result<()>> = prefixes
            .list
            .par_iter_mut()
            .zip(needed.par_iter())
            .filter(|(p, needed)| **needed && !p.built)
            .map(|(p, _)| {
                self.build_prefix(p)?;
                p.built = true;
                Ok(())
            })
            .collect();
        let errors: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::many(errors))
        }
    }
}
