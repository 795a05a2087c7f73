//! The cache traffic of one attempt at a unit ([`Attempt`]).

use crate::cache::Cache;
use std::path::PathBuf;

/// The cache traffic of one attempt at a unit: entries read (rejected together if the
/// attempt fails) and entries to store (only once the whole unit has passed).
pub(crate) struct Attempt {
    use_cache: bool,
    pub(crate) read: Vec<(&'static str, String)>,
    /// The files the last bitcode was compiled from (its dependency list).
    pub(crate) inputs: Vec<PathBuf>,
    pending: Vec<(&'static str, String, Vec<u8>)>,
}

impl Attempt {
    pub(crate) fn new(use_cache: bool) -> Attempt {
        Attempt {
            use_cache,
            read: Vec::new(),
            inputs: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(crate) fn get(&mut self, cache: &Cache, kind: &'static str, key: &str) -> Option<Vec<u8>> {
        if !self.use_cache {
            return None;
        }
        let value = cache.get(kind, key)?;
        self.read.push((kind, key.to_string()));
        Some(value)
    }

    /// An entry read only to be extended (not one the attempt's output depends on).
    pub(super) fn peek(&self, cache: &Cache, kind: &'static str, key: &str) -> Option<Vec<u8>> {
        self.use_cache.then(|| cache.get(kind, key)).flatten()
    }

    pub(crate) fn put(&mut self, kind: &'static str, key: &str, value: &[u8]) {
        self.pending.push((kind, key.to_string(), value.to_vec()));
    }

    /// Stores the pending entries (the unit passed every check).
    pub(crate) fn store(self, cache: &Cache) {
        for (kind, key, value) in self.pending {
            cache.put(kind, &key, &value);
        }
    }
}
