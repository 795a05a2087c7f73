//! Precompiled headers (`precompiled_header` in the manifest): built once per target and
//! build, keyed on what they were built from, and used by every unit of that target.

use super::*;

/// A target's precompiled header, ready to use: the file clang loads and the key that
/// names its content (part of every unit's cache keys).
pub struct PreparedPch {
    pub path: PathBuf,
    pub key: String,
    /// What the header was built from, as in every checkout of the set (see
    /// `cache_deps::portable`): the part of its units' bitcode keys. The header itself is
    /// built per checkout: it names the files it was built from by their paths.
    pub portable: String,
    /// The header the toolchain generated for a family's prefix (`prefix.rs`), in a
    /// scratch directory: left out of the dependency lists of the units compiled after it
    /// (its text is in `portable`).
    pub generated: Option<PathBuf>,
}

/// The precompiled headers of one build, by target triple, in a directory that lives as
/// long as the build.
pub(super) struct Pchs {
    _dir: Option<tempfile::TempDir>,
    pub(super) by_target: std::collections::HashMap<String, PreparedPch>,
}

impl Pipeline<'_> {
    /// The precompiled header of every target among `jobs`, if the set has one.
    pub(super) fn prepare_pchs(&self, jobs: &[Job]) -> Result<Pchs> {
        let Some(header) = &self.manifest.precompiled_header else {
            return Ok(Pchs {
                _dir: None,
                by_target: Default::default(),
            });
        };
        let dir = tempfile::Builder::new()
            .prefix("cpjit-pch-")
            .tempdir()
            .map_err(|e| Error(format!("cannot create a temporary directory: {e}")))?;
        let targets = jobs.iter().map(|j| j.target).collect();
        let by_target = per_target(targets, |t| {
            let out = dir.path().join(format!("{}.pch", t.triple));
            self.pch(t, header, out).map_err(|e| {
                e.context(format!(
                    "{}: precompiled_header `{header}` (manifest.toml)",
                    t.triple
                ))
            })
        })?;
        Ok(Pchs {
            _dir: Some(dir),
            by_target,
        })
    }

    /// One target's precompiled header, written to `out`: from the cache when every file
    /// it was built from is unchanged, else built (and cached).
    fn pch(&self, target: &Target, header: &str, out: PathBuf) -> Result<PreparedPch> {
        let path = self.manifest.root.join(header);
        if !path.is_file() {
            return Err(Error(format!("{} is not a file", path.display())));
        }
        let flags = clang::compile_flags(self.manifest, target);
        let dep_key = cache::key(&[
            PCH_DEPS.as_bytes(),
            self.clang_version.as_bytes(),
            flags.join("\0").as_bytes(),
            path.to_string_lossy().as_bytes(),
        ]);
        let pch_key = |entry: &DepEntry| cache::key(&[dep_key.as_bytes(), &entry.encode()]);
        // The same header of the same set in any checkout: its units' bitcode keys.
        let identity = cache::key(&[
            b"pchid",
            self.clang_version.as_bytes(),
            self.portable(&flags.join("\0")).as_bytes(),
            header.as_bytes(),
        ]);
        let portable = |entry: &DepEntry| cache::key(&[identity.as_bytes(), &entry.encode()]);
        let write = |bytes: &[u8]| {
            std::fs::write(&out, bytes)
                .map_err(|e| Error(format!("cannot write {}: {e}", out.display())))
        };
        let previous = self
            .cache
            .get(PCH_DEPS, &dep_key)
            .and_then(|b| DepList::decode(&b));
        for entry in previous.iter().flat_map(|list| list.fresh(&self.hashes)) {
            let key = pch_key(entry);
            if let Some(bytes) = self.cache.get("pch", &key) {
                write(&bytes)?;
                let portable = portable(entry);
                return Ok(PreparedPch {
                    path: out,
                    key,
                    portable,
                    generated: None,
                });
            }
        }
        let inputs = clang::precompile_header_within(
            &flags,
            &path,
            &out,
            self.manifest.limits.clang_time(),
        )?;
        let Some(entry) = self.dep_entry(&inputs) else {
            // An input vanished while clang ran: usable once, keyed so that it is never reused.
            let key = cache::key(&[b"uncached", dep_key.as_bytes()]);
            return Ok(PreparedPch {
                path: out,
                portable: key.clone(),
                key,
                generated: None,
            });
        };
        let key = pch_key(&entry);
        let portable = portable(&entry);
        // Clang's output is checked by clang when it loads the header; a PCH that fails
        // there fails its units, which are then rebuilt without the cache (see `run`).
        if let Ok(bytes) = std::fs::read(&out) {
            self.cache.put("pch", &key, &bytes);
            self.cache
                .put(PCH_DEPS, &dep_key, &DepList::with(previous, entry).encode());
        }
        Ok(PreparedPch {
            path: out,
            key,
            portable,
            generated: None,
        })
    }
}
