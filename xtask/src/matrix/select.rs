//! Which rows and checks a run of the matrix takes: the rows of the target files, or with
//! `--native` those this host's own processes can run; the compile-only checks of the
//! selected rows; and, per Rust target, the row that runs the tests ignoring
//! `CPJIT_STENCILS`.

use super::config::{Matrix, Row};
use super::Options;
use crate::targets::Execution;
use cpjit_model::{Arch, Host, Os};
use std::collections::BTreeMap;

/// The compile-only checks of a run: the `check_target`s of the selected `rows` (so
/// `--target` restricts them too), sorted and once each; none with `--no-check` or
/// `--native` (whose host need not have the other targets' standard libraries).
pub(super) fn check_targets(opts: &Options, rows: &[Row]) -> Vec<String> {
    if opts.no_check || opts.native {
        return Vec::new();
    }
    let targets: std::collections::BTreeSet<&String> = rows
        .iter()
        .filter_map(|r| r.check_target.as_ref())
        .collect();
    targets.into_iter().cloned().collect()
}

/// For each Rust target, the row that runs the suites ignoring `CPJIT_STENCILS`: the row
/// of the Rust target's own stencils when selected, else its first row.
pub(super) fn stencil_free_rows(rows: &[Row]) -> BTreeMap<&str, &str> {
    let mut chosen: BTreeMap<&str, &str> = BTreeMap::new();
    for row in rows.iter().rev() {
        let current = chosen.get(row.rust_target.as_str());
        if current.is_none_or(|t| *t != row.rust_target) {
            chosen.insert(&row.rust_target, &row.triple);
        }
    }
    chosen
}

/// The rows a self-test breaking `broken` runs (`--self-test`): those whose process can
/// run `broken`'s stencils ([`Host::runs`]). Such a process could select the broken set, so
/// each of these rows proves that `CPJIT_BREAK` breaks its named set only; any other
/// process never selects that set (the conformance tests run only what the host rule
/// allows), so its rows would rerun what the matrix has just run. Breaking the x86-64
/// macOS row runs the three x86-64 Linux rows natively instead of nine, qemu's and wine's
/// among them.
pub(super) fn self_test_rows(
    rows: &[Row],
    broken: &crate::targets::TargetFacts,
) -> Result<Vec<String>, String> {
    let reserved: Vec<&str> = broken
        .reserved_registers
        .iter()
        .map(String::as_str)
        .collect();
    let mut able = Vec::new();
    for row in rows {
        let process = Host::of_triple(&row.rust_target).ok_or_else(|| {
            format!(
                "self-test: row {}: no host for its Rust target {}",
                row.triple, row.rust_target
            )
        })?;
        if process.runs(broken.arch, broken.abi, &reserved) {
            able.push(row.triple.clone());
        }
    }
    Ok(able)
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

/// The rows to run. With `--native`, every row whose stencils a process of the host's own
/// target can run ([`Host::runs`]), executed by that process; otherwise the rows as the
/// target files define them, which need an x86_64 Linux host with qemu and wine.
pub(super) fn select_rows(matrix: &Matrix, opts: &Options, host: &str) -> Result<Vec<Row>, String> {
    let listed = |names: &mut dyn Iterator<Item = &str>| names.collect::<Vec<_>>().join(", ");
    let known = || listed(&mut matrix.rows.iter().map(|r| r.triple.as_str()));
    for t in &opts.targets {
        if matrix.row(t).is_none() && !matrix.system.iter().any(|s| &s.name == t) {
            return Err(format!(
                "no target `{t}` (targets/*.toml has: {}), nor a full-system row ({})",
                known(),
                listed(&mut matrix.system.iter().map(|s| s.name.as_str())),
            ));
        }
    }
    let mut rows: Vec<Row> = matrix
        .rows
        .iter()
        .filter(|r| opts.targets.is_empty() || opts.targets.contains(&r.triple))
        .cloned()
        .collect();
    let this = Host::of_triple(host)
        .ok_or_else(|| format!("no stencils are built for this host's architecture ({host})"))?;
    if opts.native {
        let root = crate::util::root();
        let facts = crate::targets::load_all(&root.join("targets"))?;
        rows.retain(|r| {
            facts.iter().any(|f| {
                let reserved: Vec<&str> = f.reserved_registers.iter().map(String::as_str).collect();
                f.triple == r.triple && this.runs(f.arch, f.abi, &reserved)
            })
        });
        for r in &mut rows {
            r.execution = if r.triple == host {
                Execution::Native
            } else {
                Execution::HostAbi
            };
            r.rust_target = host.to_string();
        }
        if !rows.iter().any(|r| r.triple == host) {
            return Err(format!(
                "--native: host {host} has no target file, or --target left out its row \
                 (targets/*.toml has: {})",
                known()
            ));
        }
    } else if this
        != (Host {
            arch: Arch::X86_64,
            os: Os::Linux,
        })
    {
        return Err(format!(
            "the emulated matrix needs an x86_64 Linux host (this is {host}); use --native"
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-test reruns the rows whose process could select the broken set, and no other.
    #[test]
    fn a_self_test_runs_the_rows_whose_process_can_run_the_broken_set() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let facts = crate::targets::load_all(&crate::util::root().join("targets")).unwrap();
        let fact = |triple: &str| facts.iter().find(|f| f.triple == triple).unwrap();
        for broken in &m.rows {
            let rows = self_test_rows(&m.rows, fact(&broken.triple)).unwrap();
            // Its own row, and only rows of processes of the broken set's architecture.
            assert!(rows.contains(&broken.triple), "{}", broken.triple);
            for row in &rows {
                assert_eq!(fact(row).arch, fact(&broken.triple).arch, "{row}");
            }
        }
        // The default break on the host of a native row runs no emulator: the rows of that
        // architecture's Linux processes (native) and the broken host-abi row.
        let native = m.rows.iter().find(|r| r.execution == Execution::Native);
        let broken = m.self_test_row(&native.unwrap().rust_target).unwrap();
        let rows = self_test_rows(&m.rows, fact(&broken.triple)).unwrap();
        assert!(rows.len() >= 2, "{rows:?}");
        for row in &rows {
            let row = m.row(row).unwrap();
            assert!(
                row.execution == Execution::Native || row.triple == broken.triple,
                "{} ({:?})",
                row.triple,
                row.execution
            );
        }
        // The wine row's set (Win64) is run by no Linux process: its self-test is its row.
        let wine = m
            .rows
            .iter()
            .find(|r| r.execution == Execution::Wine)
            .unwrap();
        assert_eq!(
            self_test_rows(&m.rows, fact(&wine.triple)).unwrap(),
            std::slice::from_ref(&wine.triple)
        );
    }

    #[test]
    fn native_selection_follows_the_host_rule() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let native = Options {
            native: true,
            ..Default::default()
        };
        let facts = crate::targets::load_all(&crate::util::root().join("targets")).unwrap();
        // The Linux processes of the native and qemu rows.
        let hosts: Vec<&str> = facts
            .iter()
            .filter(|f| matches!(f.test.execution, Execution::Native | Execution::Qemu))
            .map(|f| f.test.rust_target.as_str())
            .collect();
        assert!(hosts.len() >= 2, "{hosts:?}");
        for host in hosts {
            let rows = select_rows(&m, &native, host).unwrap();
            let this = Host::of_triple(host).unwrap();
            for f in &facts {
                let reserved: Vec<&str> = f.reserved_registers.iter().map(String::as_str).collect();
                let selected = rows.iter().any(|r| r.triple == f.triple);
                assert_eq!(
                    selected,
                    this.runs(f.arch, f.abi, &reserved),
                    "{host} {}",
                    f.triple
                );
            }
            for r in &rows {
                assert_eq!(r.rust_target, host);
                let want = if r.triple == host {
                    Execution::Native
                } else {
                    Execution::HostAbi
                };
                assert_eq!(r.execution, want);
            }
        }
        assert!(select_rows(&m, &Options::default(), "aarch64-apple-ios").is_err());
        assert!(select_rows(&m, &native, "x86_64-unknown-netbsd")
            .unwrap_err()
            .contains("has no target file"));
        let bad = Options {
            targets: vec!["riscv64".into()],
            ..Default::default()
        };
        assert!(select_rows(&m, &bad, "x86_64-alpine-linux-musl")
            .unwrap_err()
            .contains("no target `riscv64`"));
    }

    /// `--target` restricts the compile-only checks to the selected rows' `check_target`s;
    /// without it every target file's are checked.
    #[test]
    fn the_selected_targets_restrict_the_compile_only_checks() {
        let m = Matrix::load(&crate::util::root()).unwrap();
        let host = m
            .rows
            .iter()
            .find(|r| r.execution == Execution::Native)
            .map(|r| r.rust_target.clone())
            .unwrap();
        let plan = |targets: Vec<String>, no_check: bool| {
            let opts = Options {
                targets,
                no_check,
                ..Default::default()
            };
            check_targets(&opts, &select_rows(&m, &opts, &host).unwrap())
        };
        assert_eq!(plan(vec![], false), m.check_targets);
        assert!(m.check_targets.len() >= 2, "{:?}", m.check_targets);
        let checked = m.rows.iter().find(|r| r.check_target.is_some()).unwrap();
        let unchecked = m.rows.iter().find(|r| r.check_target.is_none()).unwrap();
        assert_eq!(
            plan(vec![checked.triple.clone()], false),
            [checked.check_target.clone().unwrap()]
        );
        assert!(plan(vec![unchecked.triple.clone()], false).is_empty());
        let both = vec![checked.triple.clone(), unchecked.triple.clone()];
        assert_eq!(plan(both.clone(), false).len(), 1);
        assert!(plan(both, true).is_empty());
        let native = Options {
            native: true,
            ..Default::default()
        };
        assert!(check_targets(&native, &select_rows(&m, &native, &host).unwrap()).is_empty());
    }

    #[test]
    fn stencil_free_suites_run_once_per_rust_target_preferably_in_its_own_row() {
        let row = |triple: &str, rust_target: &str| Row {
            triple: triple.into(),
            execution: Execution::HostAbi,
            rust_target: rust_target.into(),
            check_target: None,
            suites: None,
        };
        let rows = [
            row("a-other", "a-own"),
            row("a-own", "a-own"),
            row("b-x", "b-y"),
            row("b-z", "b-y"),
        ];
        let chosen = stencil_free_rows(&rows);
        assert_eq!(chosen["a-own"], "a-own");
        assert_eq!(chosen["b-y"], "b-x");
        assert_eq!(chosen.len(), 2);
        assert_eq!(stencil_free_rows(&rows[..1])["a-own"], "a-other");
    }
}
