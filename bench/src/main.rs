//! `cpjit-bench`: the benchmarks behind `cargo xtask bench` (a benchmark, never a test: it
//! asserts correctness of what it runs, never timing).
//!
//! Three kinds of groups, each runnable alone (`--only`, or `--only kit` / `--only vm`):
//!
//! - the kit's: `toolchain` (stencil builds, run as child processes), `stitch` and `memory`
//!   (the copy-and-patch runtime), `peer` (the same synthetic traces through LLVM -O0/-O2
//!   and Cranelift as JITs, [`cranelift`]);
//! - the reference VM's, a client of the kit: `vm-peer` (every example program with LLVM
//!   -O0/-O2 as the VM's trace compiler, `cpjit_vm::Config::compiler`, see
//!   [`peer_compiler`], next to copy-and-patch and the interpreter), `exec` (the examples in
//!   every mode) and `pyvm` (the examples against CPython and PyPy running their Python
//!   versions, [`pyvm`]);
//! - the examples' groups, clients built from outside the workspace: `ebpf`
//!   (`examples/ebpf-jit` against rbpf 0.4's interpreter and JITs, [`ebpf`]).
//!
//! Results go to `bench/report/results.json` and stdout as markdown; `--report` also
//! rewrites `BENCHMARKS.md` and the plot.

mod cached;
mod copy_patch;
mod cranelift;
mod ebpf;
mod examples;
mod exec;
mod harness;
mod peer;
mod peer_bench;
mod peer_compiler;
mod peer_vm;
mod plot;
mod profile;
mod pyvm;
mod report;
mod results;
mod stitch;
mod synth;
mod toolchain;
mod workload;

use cpjit_runtime::JitOptions;
use results::Results;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
usage: cpjit-bench [--quick] [--report] [--only GROUP[,GROUP...]] [--toolchain PATH]
                   [--vm PATH]
       cpjit-bench --render
       cpjit-bench --profile-stitch TRACE [--alias] [--select] [--batch] [--rounds N]

  --quick           fewer runs and smaller workloads (a smoke run, figures are noisier)
  --report          rewrite BENCHMARKS.md and bench/report/*.svg from this run
  --render          measure nothing: rewrite BENCHMARKS.md and the plots from the figures in
                    bench/report/results.json (after editing bench/report/notes.md)
  --only GROUPS     run only these of the kit's groups toolchain, stitch, memory, peer
                    the VM's groups vm-peer, exec, pyvm, and the examples' group ebpf
                    (`kit`, `vm`: all of one kind)
  --toolchain PATH  the cpjit toolchain binary (default: next to this executable)
  --vm PATH         the cpjit-vm binary, for `pyvm` (default: next to this executable)
  --profile-stitch  measure nothing else: stitch TRACE (straight-N or counting-loop) with
                    copy-and-patch as the peer bench times it, N rounds (default 200), for a
                    profiler (`--alias`: through the persistent alias; `--select`: end to
                    end from the op list, the kit's selection + push + finish; `--batch`:
                    batches of 100 traces); prints thread CPU time per instance and
                    the instances stitched, timed and in all (2 warm-up rounds)
";

/// The kit's groups (its toolchain, runtime and peers on the same synthetic traces).
const KIT_GROUPS: [&str; 4] = ["toolchain", "stitch", "memory", "peer"];
/// The reference VM's groups (a client: its examples against LLVM, CPython and PyPy).
const VM_GROUPS: [&str; 3] = ["vm-peer", "exec", "pyvm"];
/// The outside examples' groups (examples/ebpf-jit against rbpf).
const EXAMPLE_GROUPS: [&str; 1] = ["ebpf"];
const GROUPS: [&str; 8] = [
    "toolchain",
    "stitch",
    "memory",
    "peer",
    "vm-peer",
    "exec",
    "pyvm",
    "ebpf",
];

/// The groups `--only` names: groups, or `kit`/`vm` for all of one kind.
fn groups_named(value: &str) -> Result<Vec<String>, String> {
    let mut groups: Vec<String> = Vec::new();
    for name in value.split(',') {
        let expanded: Vec<&str> = match name {
            "kit" => KIT_GROUPS.to_vec(),
            "vm" => VM_GROUPS.to_vec(),
            g if GROUPS.contains(&g) => vec![g],
            bad => {
                return Err(format!(
                    "unknown group `{bad}` (the kit's: {}; the VM's: {}; the examples': {}; \
                     or `kit`, `vm`)",
                    KIT_GROUPS.join(", "),
                    VM_GROUPS.join(", "),
                    EXAMPLE_GROUPS.join(", ")
                ))
            }
        };
        for g in expanded {
            if !groups.iter().any(|x| x == g) {
                groups.push(g.to_string());
            }
        }
    }
    Ok(groups)
}

struct Options {
    quick: bool,
    report: bool,
    render: bool,
    groups: Vec<String>,
    toolchain: PathBuf,
    vm: PathBuf,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let next_to_exe =
        |name: &str| exe.with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let mut o = Options {
        quick: false,
        report: false,
        render: false,
        groups: GROUPS.iter().map(|g| g.to_string()).collect(),
        toolchain: next_to_exe("cpjit"),
        vm: next_to_exe("cpjit-vm"),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => o.quick = true,
            "--report" => o.report = true,
            "--render" => o.render = true,
            "--only" => {
                let v = it.next().ok_or("`--only` needs a value")?;
                o.groups = groups_named(v)?;
            }
            "--toolchain" => {
                o.toolchain = PathBuf::from(it.next().ok_or("`--toolchain` needs a value")?)
            }
            "--vm" => o.vm = PathBuf::from(it.next().ok_or("`--vm` needs a value")?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

/// The workspace root (the parent of `bench/`).
/// The kit checkout the bench reads and writes: `CPJIT_KIT` (set by `cargo xtask bench`),
/// else the one holding the current directory; never the checkout this binary was built in,
/// which in a target directory shared by two checkouts may be the other one.
fn root() -> PathBuf {
    let cwd = std::env::current_dir().expect("the current directory is readable");
    let explicit = std::env::var_os(cpjit_toolchain::cli::KIT_ENV).map(PathBuf::from);
    cpjit_toolchain::cli::find_kit(explicit.as_deref(), &cwd).unwrap_or_else(|e| panic!("{}", e.0))
}

fn run(o: &Options) -> Result<(), String> {
    let root = root();
    if o.render {
        return render(&root);
    }
    let mut r = Results {
        machine: report::machine(),
        command: format!(
            "cargo xtask bench{}{}{}",
            if o.quick { " --quick" } else { "" },
            if o.report { " --report" } else { "" },
            if o.groups.len() < GROUPS.len() {
                format!(" --only {}", o.groups.join(","))
            } else {
                String::new()
            }
        ),
        ..Results::default()
    };
    let on = |g: &str| o.groups.iter().any(|x| x == g);
    let sizes: &[usize] = if o.quick {
        &[10, 100, 1000]
    } else {
        &[10, 100, 1000, 10_000]
    };
    if on("toolchain") {
        eprintln!("bench: toolchain ...");
        r.toolchain = toolchain::run(&root, &o.toolchain, o.quick)?;
    }
    if on("stitch") {
        eprintln!("bench: stitching ...");
        r.stitch = stitch::stitching(sizes, o.quick)?;
    }
    if on("memory") {
        eprintln!("bench: memory ...");
        let small = JitOptions {
            chunk_bytes: 64 << 10,
            ..JitOptions::default()
        };
        r.memory = vec![
            stitch::memory("tiny traces", 1000, 3, JitOptions::default())?,
            stitch::memory("tiny traces, 64 KiB chunks", 1000, 3, small)?,
            stitch::memory("large traces", 100, 1000, JitOptions::default())?,
        ];
    }
    if on("peer") {
        eprintln!("bench: LLVM and Cranelift peers ...");
        r.peer = peer_bench::run(&root, sizes, o.quick, &mut r.skipped)?;
    }
    if on("vm-peer") {
        eprintln!("bench: LLVM peer on the VM examples' traces ...");
        r.peer.extend(peer_vm::run(&root, o.quick)?);
    }
    if on("exec") {
        eprintln!("bench: examples ...");
        r.exec = exec::run(&root, o.quick)?;
    }
    if on("pyvm") {
        eprintln!("bench: examples against CPython and PyPy ...");
        let setup = pyvm::Setup {
            root: root.clone(),
            vm: o.vm.clone(),
        };
        r.pyvm = pyvm::run(&setup, o.quick, &mut r.skipped)?;
    }
    if on("ebpf") {
        eprintln!("bench: examples/ebpf-jit against rbpf ...");
        r.ebpf = ebpf::run(&root, o.quick, &mut r.skipped)?;
    }
    let out_dir = root.join("bench/report");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let json = out_dir.join("results.json");
    carry_over(&mut r, &json, &on)?;
    let text = serde_json::to_string_pretty(&r).map_err(|e| format!("results.json: {e}"))?;
    std::fs::write(&json, text + "\n").map_err(|e| format!("{}: {e}", json.display()))?;
    print!("{}", r.markdown());
    eprintln!("bench: wrote {}", json.display());
    if o.report {
        write_report(&root, &out_dir, &r)?;
    }
    Ok(())
}

/// BENCHMARKS.md and the plots, from `r`.
fn write_report(root: &Path, out_dir: &Path, r: &Results) -> Result<(), String> {
    let plots = plot::write_all(r, out_dir)?;
    let md = root.join("BENCHMARKS.md");
    std::fs::write(&md, report::benchmarks_md(r, &plots))
        .map_err(|e| format!("{}: {e}", md.display()))?;
    eprintln!("bench: wrote {} and {} plot(s)", md.display(), plots.len());
    Ok(())
}

/// `--render`: BENCHMARKS.md and the plots from the last `results.json`, unchanged.
fn render(root: &Path) -> Result<(), String> {
    let out_dir = root.join("bench/report");
    let json = out_dir.join("results.json");
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    let r: Results = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    write_report(root, &out_dir, &r)
}

/// Groups not run this time keep the figures of the previous `results.json` (if any), so a
/// partial run (`--only`) updates the report instead of emptying the other tables; each
/// carried-over group is listed with the command that measured it.
fn carry_over(r: &mut Results, json: &Path, ran: &dyn Fn(&str) -> bool) -> Result<(), String> {
    if GROUPS.iter().all(|g| ran(g)) {
        return Ok(());
    }
    let Ok(text) = std::fs::read_to_string(json) else {
        return Ok(()); // no earlier run
    };
    let old: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    // What a carried-over group skipped stays said (entries are named `group` or
    // `group: what`).
    let skipped_group = |name: &str| name.split(':').next().unwrap_or(name).to_string();
    r.skipped.extend(
        old.skipped
            .iter()
            .filter(|(g, _)| !ran(&skipped_group(g)))
            .cloned(),
    );
    let earlier = |group: &str| {
        old.carried_over
            .iter()
            .find(|(g, _)| g == group)
            .map_or(old.command.clone(), |(_, c)| c.clone())
    };
    let mut carried = Vec::new();
    let mut take = |group: &str, present: bool| {
        if !ran(group) && present {
            carried.push((group.to_string(), earlier(group)));
            true
        } else {
            false
        }
    };
    if take("toolchain", !old.toolchain.is_empty()) {
        r.toolchain = old.toolchain;
    }
    if take("stitch", !old.stitch.is_empty()) {
        r.stitch = old.stitch;
    }
    if take("memory", !old.memory.is_empty()) {
        r.memory = old.memory;
    }
    // The peer table holds both kinds of rows: the kit's synthetic traces (`peer`) and the
    // VM's examples (`vm-peer`), each carried over on its own, the kit's first.
    let (old_vm, old_kit): (Vec<_>, Vec<_>) = old.peer.into_iter().partition(results::is_vm_row);
    if take("peer", !old_kit.is_empty()) {
        r.peer.extend(old_kit);
    }
    if take("vm-peer", !old_vm.is_empty()) {
        r.peer.extend(old_vm);
    }
    r.peer.sort_by_key(results::is_vm_row);
    if take("exec", !old.exec.is_empty()) {
        r.exec = old.exec;
    }
    if take("pyvm", !old.pyvm.is_empty()) {
        r.pyvm = old.pyvm;
    }
    if take("ebpf", !old.ebpf.is_empty()) {
        r.ebpf = old.ebpf;
    }
    r.carried_over = carried;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("--profile-stitch") => profile::parse(&args[1..]).and_then(|o| profile::run(&o)),
        _ => parse(&args).and_then(|o| run(&o)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cpjit-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::ExecRow;

    fn exec_row(example: &str) -> ExecRow {
        ExecRow {
            example: example.into(),
            mode: "jit".into(),
            run: harness::Sample::from_times(vec![1.0], 1),
            traces: 1,
            uops: 2,
            compile_ns: 3.0,
            warm_compile: None,
            code_bytes: 4,
        }
    }

    #[test]
    fn only_names_groups_or_all_of_one_kind() {
        assert_eq!(groups_named("kit").unwrap(), KIT_GROUPS);
        assert_eq!(groups_named("vm").unwrap(), VM_GROUPS);
        assert_eq!(
            groups_named("stitch,peer,stitch").unwrap(),
            ["stitch", "peer"]
        );
        assert_eq!(groups_named("ebpf,vm-peer").unwrap(), ["ebpf", "vm-peer"]);
        let err = groups_named("peers").unwrap_err();
        assert!(
            err.contains("`peers`") && err.contains("vm-peer") && err.contains("ebpf"),
            "{err}"
        );
        let all: Vec<&str> = KIT_GROUPS
            .iter()
            .chain(&VM_GROUPS)
            .chain(&EXAMPLE_GROUPS)
            .copied()
            .collect();
        assert_eq!(all, GROUPS);
    }

    #[test]
    fn the_committed_results_parse() {
        let text = std::fs::read_to_string(root().join("bench/report/results.json")).unwrap();
        serde_json::from_str::<Results>(&text).unwrap();
    }

    #[test]
    fn a_partial_run_carries_the_other_groups_over_with_their_command() {
        let dir = std::env::temp_dir().join(format!("cpjit-bench-carry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("results.json");
        // An earlier partial run that itself carried `exec` over from a full run.
        let old = Results {
            command: "cargo xtask bench --only exec".into(),
            exec: vec![exec_row("sum")],
            carried_over: vec![("memory".into(), "cargo xtask bench".into())],
            skipped: vec![
                ("exec: a mode".into(), "why".into()),
                ("peer: a size".into(), "why".into()),
            ],
            ..Results::default()
        };
        std::fs::write(&json, serde_json::to_string(&old).unwrap()).unwrap();
        let mut r = Results {
            command: "cargo xtask bench --only peer".into(),
            ..Results::default()
        };
        carry_over(&mut r, &json, &|g: &str| g == "peer").unwrap();
        assert_eq!(r.exec.len(), 1);
        // What a carried-over group skipped is still said; the group that ran says its own.
        assert_eq!(r.skipped, [("exec: a mode".to_string(), "why".to_string())]);
        // Only groups with figures are carried over, each with the command that measured it.
        assert_eq!(
            r.carried_over,
            [(
                "exec".to_string(),
                "cargo xtask bench --only exec".to_string()
            )]
        );
        // The peer table's two kinds of rows are carried over each with its own group.
        let peer = |trace: &str| results::PeerRow {
            trace: trace.into(),
            ..results::PeerRow::default()
        };
        let old = Results {
            command: "cargo xtask bench".into(),
            peer: vec![peer("straight-10"), peer("vm/examples/sum.vm: 1 trace(s)")],
            ..Results::default()
        };
        std::fs::write(&json, serde_json::to_string(&old).unwrap()).unwrap();
        let mut r = Results {
            peer: vec![peer("straight-100")],
            ..Results::default()
        };
        carry_over(&mut r, &json, &|g: &str| g == "peer").unwrap();
        let traces: Vec<&str> = r.peer.iter().map(|p| p.trace.as_str()).collect();
        assert_eq!(traces, ["straight-100", "vm/examples/sum.vm: 1 trace(s)"]);
        let mut r = Results {
            peer: vec![peer("vm/examples/fib.vm: 2 trace(s)")],
            ..Results::default()
        };
        carry_over(&mut r, &json, &|g: &str| g == "vm-peer").unwrap();
        let traces: Vec<&str> = r.peer.iter().map(|p| p.trace.as_str()).collect();
        assert_eq!(traces, ["straight-10", "vm/examples/fib.vm: 2 trace(s)"]);
        // A full run carries nothing over.
        let mut full = Results::default();
        carry_over(&mut full, &json, &|_: &str| true).unwrap();
        assert!(full.carried_over.is_empty() && full.exec.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
