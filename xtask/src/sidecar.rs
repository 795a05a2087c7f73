//! The typed sidecar the toolchain writes next to each generated crate,
//! `stencils/<triple>/stencil-set.json`: format version, triple, template set, inputs
//! digest, a digest of each generated file and the set's counts. Tools read it instead of
//! scraping the generated `lib.rs`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The sidecar format this reader understands.
pub const FORMAT: u32 = 1;

/// The file name, inside the crate directory.
pub const FILE: &str = "stencil-set.json";

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    pub format: u32,
    pub triple: String,
    pub template_set: String,
    /// `sha256:<hex>` over everything the set was generated from.
    pub inputs_digest: String,
    /// `sha256:<hex>` of each generated file, by path relative to the crate directory.
    pub files: BTreeMap<String, String>,
    pub counts: Counts,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub stencils: u64,
    pub code_bytes: u64,
    /// Bytes of `code_bytes` in the stencils' cold parts.
    pub cold_bytes: u64,
    /// Stencils that continue; `elided_jumps` of them fall through.
    pub continuing: u64,
    pub data_bytes: u64,
    pub holes: u64,
    pub elided_jumps: u64,
}

impl Sidecar {
    /// Reads `<crate_dir>/stencil-set.json` and checks it describes `triple`.
    pub fn load(crate_dir: &Path, triple: &str) -> Result<Sidecar, String> {
        let path = crate_dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: cannot read: {e}; run cargo xtask build-stencils",
                path.display()
            )
        })?;
        Sidecar::parse(&path.display().to_string(), &text, triple)
    }

    pub fn parse(file: &str, text: &str, triple: &str) -> Result<Sidecar, String> {
        let s: Sidecar = serde_json::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        if s.format != FORMAT {
            return Err(format!(
                "{file}: format {} (this xtask reads format {FORMAT})",
                s.format
            ));
        }
        if s.triple != triple {
            return Err(format!("{file}: describes `{}`, not `{triple}`", s.triple));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/stencil-set.json");

    #[test]
    fn reads_the_fixture() {
        let s = Sidecar::parse("fixture", FIXTURE, "test-triple").unwrap();
        assert_eq!(s.template_set, "default");
        assert_eq!(s.counts.stencils, 105);
        assert_eq!(s.counts.elided_jumps, 90);
        assert_eq!(s.counts.continuing, 95);
        assert!(s.files["src/lib.rs"].starts_with("sha256:"));
        assert!(s.inputs_digest.starts_with("sha256:"));
    }

    #[test]
    fn rejects_other_triples_formats_and_keys() {
        let e = Sidecar::parse("f", FIXTURE, "other").unwrap_err();
        assert!(e.contains("not `other`"), "{e}");
        let v2 = FIXTURE.replace("\"format\": 1", "\"format\": 2");
        assert!(Sidecar::parse("f", &v2, "test-triple")
            .unwrap_err()
            .contains("format 2"));
        let extra = FIXTURE.replacen('{', "{\"colour\": 1, ", 1);
        assert!(Sidecar::parse("f", &extra, "test-triple")
            .unwrap_err()
            .contains("colour"));
    }
}
