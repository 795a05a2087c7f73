//! The matrix definition, read from `ci/matrix.toml` and checked against the `[test]`
//! sections of `targets/<triple>.toml`.

use super::toml::{self, Table, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// How a row's stencils meet a real process (see `ci/matrix.toml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    Native,
    Qemu,
    Wine,
    HostAbi,
}

impl Execution {
    pub fn parse(s: &str) -> Option<Execution> {
        Some(match s {
            "native" => Execution::Native,
            "qemu" => Execution::Qemu,
            "wine" => Execution::Wine,
            "host-abi" => Execution::HostAbi,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Execution::Native => "native",
            Execution::Qemu => "qemu",
            Execution::Wine => "wine",
            Execution::HostAbi => "host-abi",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Suite {
    pub name: String,
    pub package: String,
    pub args: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The stencils' target triple (the `CPJIT_STENCILS` value).
    pub triple: String,
    pub execution: Execution,
    /// The Rust target whose test binaries execute the stencils.
    pub rust_target: String,
    /// Names of entries in [`Matrix::suites`].
    pub suites: Vec<String>,
    /// Extra environment for the row's test binaries.
    pub env: BTreeMap<String, String>,
}

/// A slower native test run of `cargo xtask ci`, outside the matrix rows (e.g. the VM's
/// full differential suite): `cargo test [--release] -p <package> -- <args>` with `env`.
#[derive(Clone, Debug, PartialEq)]
pub struct LongRun {
    pub name: String,
    pub package: String,
    pub release: bool,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub suites: BTreeMap<String, Suite>,
    /// Command prefix (relative to the repo root for paths with a slash) per Rust target.
    pub runners: BTreeMap<String, Vec<String>>,
    pub rows: Vec<Row>,
    pub check_packages: Vec<String>,
    pub check_targets: Vec<String>,
    pub self_test_break: String,
    pub self_test_suites: Vec<String>,
    pub long: Vec<LongRun>,
    /// Build the test binaries with `--release` (`[build] profile = "release"`).
    pub release: bool,
}

impl Matrix {
    pub fn load(root: &Path) -> Result<Matrix, String> {
        let path = root.join("ci/matrix.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let matrix = Matrix::parse("ci/matrix.toml", &text)?;
        for row in &matrix.rows {
            let file = format!("targets/{}.toml", row.triple);
            match std::fs::read_to_string(root.join(&file)) {
                Ok(text) => matrix.check_target_file(row, &file, &text)?,
                Err(e) => {
                    return Err(format!(
                        "ci/matrix.toml: row {}: cannot read {file}: {e}",
                        row.triple
                    ))
                }
            }
        }
        Ok(matrix)
    }

    pub fn parse(file: &str, text: &str) -> Result<Matrix, String> {
        let root = toml::parse(file, text)?;
        let ctx = |what: &str| format!("{file}: {what}");

        let mut suites = BTreeMap::new();
        for (name, v) in table(&root, "suites", &ctx("top level"))? {
            let where_ = ctx(&format!("[suites.{name}]"));
            let t = as_table(v, &where_)?;
            known_keys(t, &["package", "args"], &where_)?;
            suites.insert(
                name.clone(),
                Suite {
                    name: name.clone(),
                    package: string(t, "package", &where_)?,
                    args: strings_or_empty(t, "args", &where_)?,
                },
            );
        }

        let mut runners = BTreeMap::new();
        for (target, v) in table(&root, "runners", &ctx("top level"))? {
            let cmd = as_strings(v, &ctx(&format!("[runners] {target}")))?;
            if cmd.is_empty() {
                return Err(ctx(&format!("[runners] {target}: empty command")));
            }
            runners.insert(target.clone(), cmd);
        }

        let Some(Value::Array(raw_rows)) = root.get("row") else {
            return Err(ctx("no [[row]] entries"));
        };
        let mut rows = Vec::new();
        for (i, v) in raw_rows.iter().enumerate() {
            let where_ = ctx(&format!("[[row]] #{}", i + 1));
            let t = as_table(v, &where_)?;
            known_keys(
                t,
                &["triple", "execution", "rust_target", "suites", "env"],
                &where_,
            )?;
            let triple = string(t, "triple", &where_)?;
            let where_ = ctx(&format!("row {triple}"));
            let execution_name = string(t, "execution", &where_)?;
            let execution = Execution::parse(&execution_name).ok_or_else(|| {
                format!(
                    "{where_}: unknown execution `{execution_name}` (native, qemu, wine, host-abi)"
                )
            })?;
            let row_suites = strings_or_empty(t, "suites", &where_)?;
            if row_suites.is_empty() {
                return Err(format!("{where_}: no suites"));
            }
            for s in &row_suites {
                if !suites.contains_key(s) {
                    return Err(format!("{where_}: unknown suite `{s}`"));
                }
            }
            let env = env_table(t, &where_)?;
            if rows.iter().any(|r: &Row| r.triple == triple) {
                return Err(format!("{where_}: duplicate row"));
            }
            rows.push(Row {
                triple,
                execution,
                rust_target: string(t, "rust_target", &where_)?,
                suites: row_suites,
                env,
            });
        }

        let check_where = ctx("[check]");
        let check = as_table(
            root.get("check").ok_or_else(|| ctx("missing [check]"))?,
            &check_where,
        )?;
        known_keys(check, &["packages", "targets"], &check_where)?;
        let self_where = ctx("[self_test]");
        let self_test = as_table(
            root.get("self_test")
                .ok_or_else(|| ctx("missing [self_test]"))?,
            &self_where,
        )?;
        known_keys(self_test, &["break", "suites"], &self_where)?;
        let mut long = Vec::new();
        if let Some(v) = root.get("long") {
            let Value::Array(items) = v else {
                return Err(ctx("long must be an array of tables ([[long]])"));
            };
            for (i, v) in items.iter().enumerate() {
                let where_ = ctx(&format!("[[long]] #{}", i + 1));
                let t = as_table(v, &where_)?;
                known_keys(t, &["name", "package", "release", "args", "env"], &where_)?;
                long.push(LongRun {
                    name: string(t, "name", &where_)?,
                    package: string(t, "package", &where_)?,
                    release: match t.get("release") {
                        None => false,
                        Some(Value::Boolean(b)) => *b,
                        Some(_) => return Err(format!("{where_}: release must be a boolean")),
                    },
                    args: strings_or_empty(t, "args", &where_)?,
                    env: env_table(t, &where_)?,
                });
            }
        }
        let release = match root.get("build") {
            None => false,
            Some(v) => {
                let where_ = ctx("[build]");
                let t = as_table(v, &where_)?;
                known_keys(t, &["profile"], &where_)?;
                match string(t, "profile", &where_)?.as_str() {
                    "dev" => false,
                    "release" => true,
                    other => {
                        return Err(format!(
                            "{where_}: profile `{other}` is not `dev` or `release`"
                        ))
                    }
                }
            }
        };
        let matrix = Matrix {
            release,
            long,
            suites,
            runners,
            rows,
            check_packages: strings_or_empty(check, "packages", &check_where)?,
            check_targets: strings_or_empty(check, "targets", &check_where)?,
            self_test_break: string(self_test, "break", &self_where)?,
            self_test_suites: strings_or_empty(self_test, "suites", &self_where)?,
        };
        if matrix.row(&matrix.self_test_break).is_none() {
            return Err(format!(
                "{self_where}: break = `{}` is not a row",
                matrix.self_test_break
            ));
        }
        for s in &matrix.self_test_suites {
            if !matrix.suites.contains_key(s) {
                return Err(format!("{self_where}: unknown suite `{s}`"));
            }
        }
        Ok(matrix)
    }

    pub fn row(&self, triple: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.triple == triple)
    }

    /// The `[test]` section of `targets/<triple>.toml` must agree with the row, and its
    /// `check_target` (if any) must be checked by `[check]`.
    fn check_target_file(&self, row: &Row, file: &str, text: &str) -> Result<(), String> {
        let t = toml::parse(file, text)?;
        let Some(Value::Table(test)) = t.get("test") else {
            return Ok(());
        };
        let mismatch = |key: &str, theirs: &str, ours: &str| {
            format!(
                "ci/matrix.toml: row {}: {key} = `{ours}` but {file} [test] says `{theirs}`",
                row.triple
            )
        };
        if let Some(Value::String(e)) = test.get("execution") {
            if e != row.execution.name() {
                return Err(mismatch("execution", e, row.execution.name()));
            }
        }
        if let Some(Value::String(r)) = test.get("rust_target") {
            if *r != row.rust_target {
                return Err(mismatch("rust_target", r, &row.rust_target));
            }
        }
        if let Some(Value::String(c)) = test.get("check_target") {
            if !self.check_targets.contains(c) {
                return Err(format!(
                    "ci/matrix.toml: [check] targets lacks `{c}`, the check_target of {file}"
                ));
            }
        }
        Ok(())
    }
}

fn env_table(t: &Table, where_: &str) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    if let Some(v) = t.get("env") {
        for (k, v) in as_table(v, &format!("{where_}: env"))? {
            let Value::String(s) = v else {
                return Err(format!("{where_}: env.{k} must be a string"));
            };
            env.insert(k.clone(), s.clone());
        }
    }
    Ok(env)
}

fn table<'t>(root: &'t Table, key: &str, where_: &str) -> Result<&'t Table, String> {
    match root.get(key) {
        Some(v) => as_table(v, &format!("{where_}: {key}")),
        None => Err(format!("{where_}: missing [{key}]")),
    }
}

fn as_table<'t>(v: &'t Value, where_: &str) -> Result<&'t Table, String> {
    match v {
        Value::Table(t) => Ok(t),
        other => Err(format!(
            "{where_}: expected a table, found a {}",
            other.type_name()
        )),
    }
}

fn known_keys(t: &Table, known: &[&str], where_: &str) -> Result<(), String> {
    match t.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{where_}: unknown key `{k}` (expected one of: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

fn string(t: &Table, key: &str, where_: &str) -> Result<String, String> {
    match t.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "{where_}: {key} must be a string, not a {}",
            other.type_name()
        )),
        None => Err(format!("{where_}: missing {key}")),
    }
}

fn as_strings(v: &Value, where_: &str) -> Result<Vec<String>, String> {
    let Value::Array(items) = v else {
        return Err(format!("{where_}: expected an array of strings"));
    };
    items
        .iter()
        .map(|i| match i {
            Value::String(s) => Ok(s.clone()),
            other => Err(format!(
                "{where_}: expected strings, found a {}",
                other.type_name()
            )),
        })
        .collect()
}

fn strings_or_empty(t: &Table, key: &str, where_: &str) -> Result<Vec<String>, String> {
    match t.get(key) {
        Some(v) => as_strings(v, &format!("{where_}: {key}")),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_matrix_is_valid_and_matches_the_target_files() {
        let root = crate::util::root();
        let m = Matrix::load(&root).unwrap();
        assert_eq!(m.rows.len(), 6);
        for row in &m.rows {
            assert!(root.join(format!("targets/{}.toml", row.triple)).exists());
            if row.execution == Execution::Native || row.execution == Execution::Qemu {
                assert_eq!(row.triple, row.rust_target);
            }
        }
        assert!(m.row(&m.self_test_break).is_some());
    }

    const MINIMAL: &str = r#"
[suites.a]
package = "p"
[runners]
[[row]]
triple = "t"
execution = "native"
rust_target = "t"
suites = ["a"]
[check]
targets = []
[self_test]
break = "t"
[[long]]
name = "full"
package = "p"
release = true
args = ["--ignored"]
env = { N = "10" }
"#;

    #[test]
    fn minimal_matrix_parses() {
        let m = Matrix::parse("m.toml", MINIMAL).unwrap();
        assert_eq!(m.rows[0].suites, ["a"]);
        assert_eq!(m.suites["a"].package, "p");
        assert_eq!(m.long[0].args, ["--ignored"]);
        assert!(m.long[0].release);
        assert_eq!(m.long[0].env["N"], "10");
        assert!(!m.release);
        let release = format!("{MINIMAL}[build]\nprofile = \"release\"\n");
        assert!(Matrix::parse("m.toml", &release).unwrap().release);
        let bad = format!("{MINIMAL}[build]\nprofile = \"fast\"\n");
        assert!(Matrix::parse("m.toml", &bad)
            .unwrap_err()
            .contains("profile `fast`"));
    }

    #[test]
    fn errors_name_the_row_and_key() {
        let bad = MINIMAL.replace("suites = [\"a\"]", "suites = [\"b\"]");
        let e = Matrix::parse("m.toml", &bad).unwrap_err();
        assert!(
            e.contains("row t") && e.contains("unknown suite `b`"),
            "{e}"
        );
        let bad = MINIMAL.replace("\"native\"", "\"docker\"");
        let e = Matrix::parse("m.toml", &bad).unwrap_err();
        assert!(e.contains("unknown execution `docker`"), "{e}");
        let bad = MINIMAL.replace("break = \"t\"", "break = \"u\"");
        assert!(Matrix::parse("m.toml", &bad)
            .unwrap_err()
            .contains("not a row"));
        let bad = MINIMAL.replace("package = \"p\"", "package = \"p\"\npackages = 1");
        assert!(Matrix::parse("m.toml", &bad)
            .unwrap_err()
            .contains("unknown key `packages`"));
    }

    #[test]
    fn disagreeing_target_file_is_an_error() {
        let m = Matrix::parse("m.toml", MINIMAL).unwrap();
        let e = m
            .check_target_file(
                &m.rows[0],
                "targets/t.toml",
                "[test]\nexecution = \"qemu\"\n",
            )
            .unwrap_err();
        assert!(
            e.contains("execution = `native`") && e.contains("says `qemu`"),
            "{e}"
        );
        let e = m
            .check_target_file(
                &m.rows[0],
                "targets/t.toml",
                "[test]\ncheck_target = \"z\"\n",
            )
            .unwrap_err();
        assert!(e.contains("lacks `z`"), "{e}");
    }
}
