//! Steps of `cargo xtask ci` that run beside others: each a process tree whose output goes
//! to its own log, printed whole when it ends, and whose CPU time is its own (`wait4`), so
//! the summary keeps one line per step.
//!
//! On two cores a step that leaves one idle for long stretches costs wall time for nothing.
//! The outside-crate examples (`examples/<name>/ci.sh`): one test binary under qemu running
//! one test, a link, the crate every other one waits for; one after another bf-jit,
//! ebpf-jit and stack-jit took 19.7 + 172.9 + 30.3 s of wall time for 26.8 + 246.0 + 49.9 s
//! of CPU (idle machine, clean clone, wave 22), so they run side by side. Beside the test
//! matrix at the same priority they took 365 s and stretched it from 306 s to 582 s (its
//! CPU from 552 s to 735 s: both cores were already busy with its archive builds), and the
//! whole run took 1,027 s (wave 22, idle); after it they would add their own 175 s or so.
//! So they start as soon as the toolchain binary they run is built and run at the lowest
//! priority ([`NICE`]) beside the stencil check (248 s for 268 + 88 s of CPU with clippy:
//! about 140 core-seconds idle), the native tests, the matrix and its self-test: they take
//! what those leave idle and little else. The long runs of `ci/matrix.toml` (one test, one
//! thread: 39.7 s for 63.5 s of CPU with its build) run beside the test matrix. Clippy
//! (83.4 s for 159.9 s of CPU) runs beside `build-stencils --check` (148.6 s for 243.8 s of
//! CPU, its clang jobs few at the end of each set).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The examples, by directory under `examples/`.
pub const EXAMPLES: [&str; 3] = ["bf-jit", "ebpf-jit", "stack-jit"];

/// The examples' niceness (`nice -n`), the lowest priority: they take the CPU the steps
/// beside them leave idle and little else, so they never stretch those steps much.
pub const NICE: &str = "19";

/// Where the output of step `name` run beside others goes: `target/ci/<slug>.log`.
pub fn log_path(root: &Path, name: &str) -> PathBuf {
    root.join("target/ci")
        .join(format!("{}.log", super::slug(name)))
}

/// How one process tree ended.
pub struct Finished {
    pub name: String,
    pub ok: bool,
    /// Wall time from its start to its end.
    pub seconds: f64,
    /// User + system CPU of the process tree.
    pub cpu: f64,
}

/// A started process tree with its output in a log.
pub struct Logged {
    name: String,
    log: PathBuf,
    child: Child,
    started: Instant,
    /// When it ended, as a watcher learns it without reaping it ([`watch_end`]): it is
    /// reaped when asked for, so that its CPU counts in no other step's `RUSAGE_CHILDREN`.
    ended: Arc<OnceLock<Instant>>,
}

/// Notes in `ended` when process `pid` ends, leaving it unreaped (`WNOWAIT`).
fn watch_end(pid: u32, ended: Arc<OnceLock<Instant>>) {
    std::thread::spawn(move || {
        // SAFETY: `info` is a zeroed `siginfo_t` that waitid fills.
        let got = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        // On an error the end is taken when it is reaped instead.
        if got == 0 {
            let _ = ended.set(Instant::now());
        }
    });
}

impl Logged {
    /// Starts `cmd` with stdout and stderr in `log` (created, with its directory).
    pub fn start(name: &str, cmd: &mut Command, log: &Path) -> Result<Logged, String> {
        let dir = log.parent().expect("a log lives in a directory");
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        eprintln!(
            "ci: {name}: started beside the next steps (log {})",
            log.display()
        );
        let ended = Arc::new(OnceLock::new());
        watch_end(child.id(), Arc::clone(&ended));
        Ok(Logged {
            name: name.to_string(),
            log: log.to_path_buf(),
            child,
            started: Instant::now(),
            ended,
        })
    }

    /// Whether it has ended, without blocking: its success and its tree's CPU seconds.
    /// `wait4` rather than `Child::try_wait`, which reaps without the resource usage.
    fn try_end(&self) -> Result<Option<(bool, f64)>, String> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(|e| format!("process id: {e}"))?;
        let mut status = 0;
        // SAFETY: `usage` is a zeroed `rusage` that wait4 fills; `status` is a valid int.
        let (got, usage) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let got = libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage);
            (got, usage)
        };
        match got {
            0 => Ok(None),
            p if p == pid => {
                let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
                Ok(Some((
                    ok,
                    seconds(usage.ru_utime) + seconds(usage.ru_stime),
                )))
            }
            _ => Err(format!("wait4: {}", std::io::Error::last_os_error())),
        }
    }

    /// `Some` once it has ended (its log printed), `None` while it runs.
    pub fn poll(&self) -> Option<Finished> {
        let ended = match self.try_end() {
            Ok(None) => return None,
            Ok(Some(ended)) => ended,
            Err(e) => {
                eprintln!("ci: {}: {e}", self.name);
                (false, 0.0)
            }
        };
        let log = std::fs::read(&self.log).unwrap_or_default();
        println!("\n== {} ({})", self.name, self.log.display());
        print!("{}", String::from_utf8_lossy(&log));
        if !ended.0 {
            eprintln!("ci: {} failed (log above)", self.name);
            let saw_no_space = super::disk::contains(&log, super::disk::NO_SPACE.as_bytes());
            let dirs = super::disk::written_dirs(&crate::util::root());
            if let Some(full) = super::disk::full_disk_line(&self.name, &dirs, saw_no_space) {
                eprintln!("ci: {full}");
            }
        }
        Some(Finished {
            name: self.name.clone(),
            ok: ended.0,
            seconds: self
                .ended
                .get()
                .map_or_else(|| self.started.elapsed(), |end| *end - self.started)
                .as_secs_f64(),
            cpu: ended.1,
        })
    }

    /// Waits for it to end (its log printed).
    pub fn finish(self) -> Finished {
        loop {
            if let Some(done) = self.poll() {
                return done;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The examples' CIs, started at once.
pub struct Examples {
    running: Vec<Logged>,
    finished: Vec<Finished>,
}

impl Examples {
    /// Starts `examples/<name>/ci.sh` of every name with niceness `nice` (`cargo xtask
    /// ci`: [`NICE`]), each logged to its [`log_path`], with `CPJIT` naming the toolchain
    /// binary `cpjit` if given (the script builds its own without).
    pub fn start(root: &Path, names: &[&str], cpjit: Option<&Path>, nice: &str) -> Examples {
        let mut examples = Examples {
            running: Vec::new(),
            finished: Vec::new(),
        };
        for &name in names {
            let step = format!("examples/{name}/ci.sh");
            let mut cmd = Command::new("nice");
            cmd.args(["-n", nice, "bash"]).arg(root.join(&step));
            if let Some(cpjit) = cpjit {
                cmd.env("CPJIT", cpjit);
            }
            match Logged::start(&step, &mut cmd, &log_path(root, &step)) {
                Ok(r) => examples.running.push(r),
                Err(e) => {
                    eprintln!("ci: {step}: {e}");
                    examples.finished.push(Finished {
                        name: step,
                        ok: false,
                        seconds: 0.0,
                        cpu: 0.0,
                    });
                }
            }
        }
        examples
    }

    /// Waits for every one to end and returns them in the order they ended.
    pub fn finish(mut self) -> Vec<Finished> {
        while !self.running.is_empty() {
            let mut i = 0;
            while i < self.running.len() {
                match self.running[i].poll() {
                    None => i += 1,
                    Some(done) => {
                        self.running.swap_remove(i);
                        self.finished.push(done);
                    }
                }
            }
            if !self.running.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_run_at_once_each_with_its_outcome_cpu_and_log() {
        let root = std::env::temp_dir().join(format!("xtask-examples-{}", std::process::id()));
        let scripts = [
            // Some CPU of its own (tens of milliseconds), little wall time.
            (
                "busy",
                "i=0; while ((i < 30000)); do i=$((i+1)); done; echo busy done",
            ),
            ("fails", "sleep 2; echo broken >&2; exit 3"),
            ("sleeps", "sleep 2; echo slept"),
            // Its priority and the toolchain it was given.
            ("tells", "echo \"$(nice) $CPJIT\""),
        ];
        // Timed at the test's own priority: at the lowest, on a busy machine, the busy
        // one would wait for seconds.
        let own = "0";
        for (name, body) in scripts {
            let dir = root.join("examples").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("ci.sh"), body).unwrap();
        }
        let start = Instant::now();
        let cpjit = Path::new("/built/cpjit");
        let done = Examples::start(&root, &["sleeps", "fails", "busy"], Some(cpjit), own).finish();
        let wall = start.elapsed().as_secs_f64();
        let by_name = |n: &str| {
            let step = format!("examples/{n}/ci.sh");
            done.iter().find(|f| f.name == step).unwrap()
        };
        assert_eq!(done.len(), 3);
        assert!(by_name("busy").ok && by_name("sleeps").ok && !by_name("fails").ok);
        // At once: the two sleeps overlap (one after the other would take 4 s and more).
        assert!(wall < 3.9, "took {wall:.2} s");
        assert!(by_name("sleeps").seconds >= 2.0);
        assert!(by_name("busy").cpu > by_name("sleeps").cpu);
        let log =
            |n: &str| std::fs::read_to_string(log_path(&root, &format!("examples/{n}/ci.sh")));
        assert_eq!(log("fails").unwrap(), "broken\n");
        assert_eq!(log("sleeps").unwrap(), "slept\n");
        let told = Examples::start(&root, &["tells"], Some(cpjit), NICE).finish();
        assert!(told[0].ok);
        assert_eq!(log("tells").unwrap(), format!("{NICE} /built/cpjit\n"));
        // Waited for long after it ended, a step still reports its own end.
        let quick = root.join("examples/quick");
        std::fs::create_dir_all(&quick).unwrap();
        std::fs::write(quick.join("ci.sh"), "true").unwrap();
        let late = Examples::start(&root, &["quick"], None, own);
        std::thread::sleep(Duration::from_millis(1500));
        let late = late.finish();
        assert!(
            late[0].ok && late[0].seconds < 1.4,
            "{:.2} s",
            late[0].seconds
        );
        let missing = Examples::start(&root, &["absent"], None, own).finish();
        assert!(
            !missing[0].ok,
            "a missing ci.sh fails (bash cannot read it)"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
