//! `cpjit-vm run --perf-map` and `--gdb`: the perf map of a real run names every instance
//! with its stencil's exact size, and GDB's backtrace from a helper called by a trace names
//! the calling stencil. (The GDB runs keep the callees interpreted, `--call-threshold`, so
//! that the traces' calls go through the `vm_call` helper instead of into compiled code.)
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::process::Command;

const VM: &str = env!("CARGO_BIN_EXE_cpjit-vm");

#[test]
fn perf_map_names_every_instance_with_its_stencils_size() {
    let child = Command::new(VM)
        .args(["run", "examples/calls.vm", "--perf-map", "--no-inline"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let path = format!("/tmp/perf-{pid}.map");
    let map = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // The set the VM child stitched (it inherits CPJIT_STENCILS from the matrix row).
    let set = cpjit_vm::jit::selected_set().unwrap();
    let mut instances = 0;
    for line in map.lines() {
        let mut f = line.split(' ');
        let (_start, size, name) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        let (trace, stencil) = name.split_once(':').expect("trace<N>:<name>");
        assert!(trace.starts_with("trace"), "{line}");
        if let Some(s) = set.get(stencil) {
            // An instance's hot code, or its cold part (laid after the trace's hot code,
            // named as its instance).
            let size = usize::from_str_radix(size, 16).unwrap();
            let cold = s.cold_len as usize;
            assert!(
                size == s.hot_len() || (cold > 0 && size == cold),
                "{line}: the stencil's hot part is {} bytes, its cold part {cold}",
                s.hot_len()
            );
            instances += usize::from(size == s.hot_len());
        } else {
            assert!(stencil == "tail" || stencil == "veneers", "{line}");
        }
    }
    assert!(
        map.contains(":vm_entry\n") && map.contains(":op_CALL_JIT\n"),
        "{map}"
    );
    assert!(instances > 10, "{map}");
}

/// GDB's `backtrace` (e.g. `bt 4`) at the 301st call of the `vm_call` helper in a run of
/// examples/calls.vm with `--gdb` and `flags`: its standard output.
fn gdb_backtrace(backtrace: &str, flags: &[&str]) -> String {
    let out = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-ex",
            "break vm_call",
            "-ex",
            "ignore 1 300",
        ])
        .args(["-ex", "run", "-ex", backtrace, "-ex", "kill", "--args", VM])
        .args(["run", "examples/calls.vm", "--no-inline", "--gdb"])
        .args(["--call-threshold", "1000000000"])
        .args(flags)
        .output()
        .expect("gdb must be installed (ci/setup.sh installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn gdb_backtrace_from_a_helper_names_the_calling_stencil() {
    let text = gdb_backtrace("bt 4", &[]);
    let frames: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        frames.first().is_some_and(|f| f.contains("vm_call")),
        "{text}"
    );
    assert!(
        frames.get(1).is_some_and(|f| f.contains(":op_CALL_JIT ()")),
        "frame #1 should be an op_CALL_JIT instance:\n{text}"
    );
}

/// With `--unwind` as well, GDB walks from the helper through the trace (op, then the
/// shim) to the Rust code that entered it, using the `.eh_frame` built from the set's
/// generated frame layouts; without it, the walk is lost after the op.
#[test]
fn gdb_backtrace_with_unwind_reaches_the_rust_caller() {
    // The set the VM child stitches (CPJIT_STENCILS of the matrix row): only ELF sets have
    // frame layouts (the others are refused, see below).
    let set = cpjit_vm::jit::selected_set().unwrap();
    if set.format != cpjit_model::ObjectFormat::Elf {
        eprintln!("skipped: {} has no frame layouts", set.target);
        return;
    }
    for unwind in [true, false] {
        let text = gdb_backtrace("bt 8", if unwind { &["--unwind"] } else { &[] });
        let frames: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert!(
            frames.get(1).is_some_and(|f| f.contains(":op_CALL_JIT ()")),
            "{text}"
        );
        // Frame #3 on is the VM's Rust code (names are short in release builds: `run ()
        // at vm/src/jit.rs:…`, `run_executor () at vm/src/vm.rs:…`).
        let reached = frames.get(2).is_some_and(|f| f.contains(":vm_entry ()"))
            && frames
                .get(3)
                .is_some_and(|f| f.contains("vm/src/jit.rs") || f.contains("CompiledTrace::run"));
        assert_eq!(
            reached,
            unwind,
            "unwind {unwind}: frames #2 and #3 should {}be the shim and the VM's CompiledTrace::run:\n{text}",
            if unwind { "" } else { "not " }
        );
    }
}

/// `--unwind` with a set that has no frame layouts is refused when the VM starts.
#[test]
fn unwind_with_a_set_without_layouts_is_refused() {
    let Some(set) =
        cpjit_vm_stencils::runnable().find(|s| s.format != cpjit_model::ObjectFormat::Elf)
    else {
        return;
    };
    let out = Command::new(VM)
        .args(["run", "examples/calls.vm", "--unwind", "--no-inline"])
        .env("CPJIT_STENCILS", set.target)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("has none"), "{err}");
}

/// `perf record` → `perf inject --jit` → `perf report` attributes samples in stitched code
/// to `trace<N>:<stencil>` (through the jitdump file). Skipped, saying so, where `perf`
/// cannot record (not installed, or no permission for a software clock event).
#[test]
fn perf_inject_names_stitched_code_by_stencil() {
    let dir = std::env::temp_dir().join(format!("cpjit-perf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("perf.data");
    let record = Command::new("perf")
        .args(["record", "-k", "mono", "-e", "cpu-clock", "-o"])
        .arg(&data)
        .args(["--", VM, "run", "examples/mandelbrot.vm", "--jitdump"])
        .env("HOME", &dir) // perf inject writes its jitted-*.so files under $HOME/.debug
        .env("TMPDIR", &dir) // where the VM writes jit-<pid>.dump
        .output();
    match record {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!(
                "skipped: perf record failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: no perf ({e})");
            return;
        }
    }
    let injected = dir.join("perf.jit.data");
    let inject = Command::new("perf")
        .args(["inject", "--jit", "-i"])
        .arg(&data)
        .arg("-o")
        .arg(&injected)
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(
        inject.status.success(),
        "{}",
        String::from_utf8_lossy(&inject.stderr)
    );
    let report = Command::new("perf")
        .args(["report", "--stdio", "--sort", "symbol", "-i"])
        .arg(&injected)
        .env("HOME", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    let stencil_lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("[.] trace") && l.contains(":op_"))
        .count();
    assert!(
        stencil_lines >= 3,
        "samples in stitched code should be named trace<N>:op_…:\n{text}"
    );
}
