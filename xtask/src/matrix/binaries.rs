//! Building test binaries once per Rust target (`cargo test --no-run`) and finding them in
//! cargo's JSON messages, so that each row only runs binaries.

use super::json;
use crate::util::cargo;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;

/// One libtest executable of a package (its lib unit tests, or one integration test).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestBinary {
    pub package: String,
    /// The cargo target name, e.g. `cpjit_runtime` or `patch_fixtures`.
    pub name: String,
    pub path: PathBuf,
    /// Directory of the package's Cargo.toml (the working directory cargo would use).
    pub manifest_dir: PathBuf,
}

/// The host's target triple (`rustc -vV`).
pub fn host_triple() -> Result<String, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", rustc.to_string_lossy()))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| "`rustc -vV` printed no host line".to_string())
}

/// Workspace package names mapped to their manifest directories (`cargo metadata`).
pub fn workspace_packages() -> Result<BTreeMap<String, PathBuf>, String> {
    let out = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", out.status));
    }
    let meta = json::parse(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| format!("cargo metadata: {e}"))?;
    let mut packages = BTreeMap::new();
    for p in meta.get("packages").as_array() {
        let (Some(name), Some(manifest)) =
            (p.get("name").as_str(), p.get("manifest_path").as_str())
        else {
            return Err("cargo metadata: package without name or manifest_path".into());
        };
        let dir = PathBuf::from(manifest)
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        packages.insert(name.to_string(), dir);
    }
    Ok(packages)
}

/// Builds the test binaries of `packages` for `rust_target` (no `--target` flag when it is
/// the host, so that the artifacts are shared with a plain `cargo test [--release]`) and
/// returns them.
pub fn build(
    rust_target: &str,
    host: &str,
    release: bool,
    packages: &[String],
    workspace: &BTreeMap<String, PathBuf>,
) -> Result<Vec<TestBinary>, String> {
    let mut cmd = cargo();
    cmd.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    if release {
        cmd.arg("--release");
    }
    if rust_target != host {
        cmd.args(["--target", rust_target]);
    }
    for p in packages {
        if !workspace.contains_key(p) {
            return Err(format!(
                "package `{p}` is not a workspace member (members: {})",
                workspace.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        cmd.args(["-p", p]);
    }
    let by_dir: BTreeMap<&PathBuf, &String> = workspace.iter().map(|(n, d)| (d, n)).collect();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo output: {e}"))?;
        if !line.starts_with('{') {
            continue;
        }
        let msg = json::parse(&line).map_err(|e| format!("cargo message: {e}: {line}"))?;
        if let Some(b) = test_binary(&msg, &by_dir)? {
            if packages.contains(&b.package) {
                binaries.push(b);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo test --no-run` for {rust_target} failed ({status})"
        ));
    }
    binaries.sort_by(|a, b| (&a.package, &a.name).cmp(&(&b.package, &b.name)));
    binaries.dedup();
    Ok(binaries)
}

/// A `compiler-artifact` message of a test-profile target with an executable.
fn test_binary(
    msg: &json::Json,
    by_dir: &BTreeMap<&PathBuf, &String>,
) -> Result<Option<TestBinary>, String> {
    if msg.get("reason").as_str() != Some("compiler-artifact")
        || msg.get("profile").get("test").as_bool() != Some(true)
    {
        return Ok(None);
    }
    let Some(exe) = msg.get("executable").as_str() else {
        return Ok(None);
    };
    let manifest = msg
        .get("manifest_path")
        .as_str()
        .ok_or("cargo artifact message without manifest_path")?;
    let dir = PathBuf::from(manifest)
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let Some(package) = by_dir.get(&dir) else {
        return Ok(None);
    };
    Ok(Some(TestBinary {
        package: package.to_string(),
        name: msg
            .get("target")
            .get("name")
            .as_str()
            .unwrap_or("?")
            .to_string(),
        path: PathBuf::from(exe),
        manifest_dir: dir,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_test_profile_executables_of_workspace_packages() {
        let dir = PathBuf::from("/w/runtime");
        let name = "cpjit-runtime".to_string();
        let by_dir = BTreeMap::from([(&dir, &name)]);
        let msg = |test: bool, exe: &str, manifest: &str| {
            json::parse(&format!(
                r#"{{"reason":"compiler-artifact","manifest_path":"{manifest}","target":{{"name":"cpjit_runtime","kind":["lib"]}},"profile":{{"test":{test}}},"executable":{exe}}}"#
            ))
            .unwrap()
        };
        let b = test_binary(
            &msg(true, "\"/t/deps/cpjit_runtime-1\"", "/w/runtime/Cargo.toml"),
            &by_dir,
        )
        .unwrap()
        .unwrap();
        assert_eq!(b.package, "cpjit-runtime");
        assert_eq!(b.path, PathBuf::from("/t/deps/cpjit_runtime-1"));
        assert_eq!(b.manifest_dir, dir);
        // A library built as a dependency, a test target without an executable (fresh
        // libs report null), and a foreign package are not test binaries.
        assert!(
            test_binary(&msg(false, "\"/t/x\"", "/w/runtime/Cargo.toml"), &by_dir)
                .unwrap()
                .is_none()
        );
        assert!(
            test_binary(&msg(true, "null", "/w/runtime/Cargo.toml"), &by_dir)
                .unwrap()
                .is_none()
        );
        assert!(
            test_binary(&msg(true, "\"/t/y\"", "/reg/libc/Cargo.toml"), &by_dir)
                .unwrap()
                .is_none()
        );
    }
}
