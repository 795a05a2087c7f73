//! The `/init` of a full-system QEMU row's guest: mounts what tests read (`/proc`, `/dev`,
//! `/sys`, a `/tmp`), reads the host's plan, runs each test of each run in its own process
//! (`--exact`), writes one JSON [`Line`] per result to the results port, and powers the
//! machine off. Run as anything but process 1, it refuses.

use cpjit_qemu_guest::{listed_tests, Line, Outcome, Plan, Run, TestResult, PLAN_PATH};
use std::io::Write;
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::time::Instant;

fn main() {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        eprintln!("cpjit-qemu-guest is the /init of the matrix's QEMU guests (cargo xtask test-matrix), not a program to run");
        std::process::exit(2);
    }
    let mut port: Option<std::fs::File> = None;
    if let Err(message) = run(&mut port) {
        eprintln!("cpjit-qemu-guest: {message}");
        if let Some(port) = &mut port {
            let _ = write_line(port, &Line::Error { message });
        }
    }
    // SAFETY: flushing file systems and powering off is what process 1 does last here.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
}

fn run(port: &mut Option<std::fs::File>) -> Result<(), String> {
    mount_all()?;
    let plan = std::fs::read_to_string(format!("/{PLAN_PATH}"))
        .map_err(|e| format!("/{PLAN_PATH}: {e}"))?;
    let plan: Plan = serde_json::from_str(&plan).map_err(|e| format!("/{PLAN_PATH}: {e}"))?;
    let out = port.insert(open_port(&plan.results)?);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let guest = Line::Guest {
        kernel: kernel.trim().to_string(),
        cpu_flags: flags
            .split_whitespace()
            .skip(2)
            .map(str::to_string)
            .collect(),
    };
    write_line(out, &guest)?;
    let mut tests = 0;
    for r in &plan.runs {
        tests += run_tests(r, plan.jobs.max(1), out)?;
    }
    write_line(out, &Line::Done { tests })
}

/// Mounts the file systems the tests read or write (the initramfs has only the files).
fn mount_all() -> Result<(), String> {
    for (kind, at) in [
        ("proc", "/proc"),
        ("sysfs", "/sys"),
        ("devtmpfs", "/dev"),
        ("tmpfs", "/tmp"),
    ] {
        std::fs::create_dir_all(at).map_err(|e| format!("mkdir {at}: {e}"))?;
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (kind_c, at_c) = (c(kind), c(at));
        // SAFETY: NUL-terminated strings; no data argument.
        let done = unsafe {
            libc::mount(
                kind_c.as_ptr(),
                at_c.as_ptr(),
                kind_c.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if done != 0 {
            return Err(format!(
                "mount {kind} on {at}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The results port, in raw mode (no `\n` to `\r\n`, no echo).
fn open_port(path: &str) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let port = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: termios calls on a descriptor we own, with a struct they fill.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(port.as_raw_fd(), &mut t) == 0 {
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(port.as_raw_fd(), libc::TCSANOW, &t);
        }
    }
    Ok(port)
}

fn write_line(port: &mut std::fs::File, line: &Line) -> Result<(), String> {
    let mut text = serde_json::to_string(line).map_err(|e| e.to_string())?;
    text.push('\n');
    port.write_all(text.as_bytes())
        .and_then(|()| port.flush())
        .map_err(|e| format!("writing a result: {e}"))
}

/// The binary's tests (`--list`), less its ignored ones (`--ignored --list`).
fn list(r: &Run) -> Result<(Vec<String>, Vec<String>), String> {
    let listed = |ignored: bool| -> Result<Vec<String>, String> {
        let mut cmd = Command::new(&r.binary);
        cmd.args(["--list", "--format", "terse"]).envs(&r.env);
        if ignored {
            cmd.arg("--ignored");
        }
        let out = cmd.output().map_err(|e| format!("{}: {e}", r.binary))?;
        if !out.status.success() {
            return Err(format!("{} --list: {}", r.binary, out.status));
        }
        Ok(listed_tests(&String::from_utf8_lossy(&out.stdout)))
    };
    let ignored = listed(true)?;
    let all = listed(false)?;
    Ok((all, ignored))
}

/// Runs every test of `r`, `jobs` at a time, each in its own process; writes each result.
fn run_tests(r: &Run, jobs: usize, port: &mut std::fs::File) -> Result<usize, String> {
    let (mut all, ignored) = list(r)?;
    all.retain(|t| r.only.is_empty() || r.only.iter().any(|p| t.starts_with(p.as_str())));
    let queue = Mutex::new(all.clone());
    let (send, results) = mpsc::channel();
    let count = all.len();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let (queue, ignored, send) = (&queue, &ignored, send.clone());
            scope.spawn(move || loop {
                let Some(name) = queue.lock().unwrap().pop() else {
                    return;
                };
                let result = if ignored.contains(&name) {
                    done(r, name, Outcome::Ignored, 0.0, String::new())
                } else if let Some(why) = r.skip.get(&name) {
                    done(r, name, Outcome::Skipped, 0.0, why.clone())
                } else {
                    run_one(r, name)
                };
                if send.send(result).is_err() {
                    return;
                }
            });
        }
        drop(send);
        for result in results {
            write_line(port, &Line::Test(result))?;
        }
        Ok::<(), String>(())
    })?;
    Ok(count)
}

fn run_one(r: &Run, name: String) -> TestResult {
    let start = Instant::now();
    let out = Command::new(&r.binary)
        .args(["--exact", &name, "--test-threads", "1"])
        .envs(&r.env)
        .output();
    let seconds = start.elapsed().as_secs_f64();
    match out {
        Ok(out) if out.status.success() => done(r, name, Outcome::Passed, seconds, String::new()),
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text += &String::from_utf8_lossy(&out.stderr);
            text += &format!("\n({})", out.status);
            let tail = text.len().saturating_sub(4000);
            let tail = (tail..text.len())
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            done(r, name, Outcome::Failed, seconds, text[tail..].to_string())
        }
        Err(e) => done(
            r,
            name,
            Outcome::Failed,
            seconds,
            format!("{}: {e}", r.binary),
        ),
    }
}

fn done(r: &Run, name: String, outcome: Outcome, seconds: f64, output: String) -> TestResult {
    TestResult {
        run: r.name.clone(),
        name,
        outcome,
        seconds,
        output,
    }
}
