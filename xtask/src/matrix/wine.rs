//! The wine row's held wine server.
//!
//! Every wine process of a prefix talks to one wine server, which `qemu/run-wine` starts
//! with a linger (`wineserver -p30`): the server exits 30 s after its last process. When
//! the linger ends the server closes its socket at once, so a process whose connection it
//! has not yet accepted gets `recvmsg: Connection reset by peer` and dies before `main`;
//! nextest starts one process per test, and on a loaded machine the gaps between tests
//! stretch towards the linger.
//!
//! The matrix therefore holds the server for the whole wine row: `<runner> --hold` is a
//! wine process that lives until it is released (its stdin closed), so the server never
//! reaches its linger while the row's tests run. Starting the hold can itself hit the
//! window, so it is tried up to [`HOLD_ATTEMPTS`] times; the tests are never retried.
//! (The other death before `main`, `failed to map the shared user data: c0000018`, does
//! not involve the server: it is the randomized heap that `qemu/run-wine` turns off.)
//!
//! The runner is the one nextest uses for the Rust target: `CARGO_TARGET_<TARGET>_RUNNER`
//! if the user set it, else the `[test] runner` of the target files (`cargo_env.rs`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often starting the hold is tried before the row fails.
pub const HOLD_ATTEMPTS: u32 = 3;
/// How long a starting hold may take to print `ready` (a fresh server on a loaded machine
/// takes seconds); only a hang guard.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a released hold may take to exit before it is killed; only a hang guard.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the runner writes one log per wine process of a row's run (`CPJIT_WINE_LOG_DIR`).
pub fn log_dir(root: &Path, triple: &str) -> PathBuf {
    root.join("target/nextest")
        .join(super::PROFILE)
        .join("wine-logs")
        .join(triple)
}

/// The cargo runner of `rust_target` (program and arguments), as nextest finds it:
/// `CARGO_TARGET_<TARGET>_RUNNER` if the user set it, else the `runner` of the target files
/// naming that Rust target (which xtask passes to cargo in that variable, `cargo_env.rs`).
pub fn runner(root: &Path, rust_target: &str) -> Result<Vec<String>, String> {
    let var = runner_variable(rust_target);
    let from_env = std::env::var(&var).ok();
    let targets = crate::targets::load_all(&root.join("targets"))?;
    let settings = crate::cargo_env::rust_targets(&targets)?;
    let from_files = settings
        .get(rust_target)
        .and_then(|s| s.runner_command(root));
    runner_from(from_env.as_deref(), &var, from_files, rust_target)
}

/// `CARGO_TARGET_<TARGET>_RUNNER`: the target upper-cased, `-` and `.` as `_`.
fn runner_variable(rust_target: &str) -> String {
    format!(
        "CARGO_TARGET_{}_RUNNER",
        rust_target.to_uppercase().replace(['-', '.'], "_")
    )
}

/// The runner from the environment variable `var` (value `from_env`) if set, else the
/// target files' (`from_files`, resolved).
fn runner_from(
    from_env: Option<&str>,
    var: &str,
    from_files: Option<Vec<String>>,
    rust_target: &str,
) -> Result<Vec<String>, String> {
    if let Some(value) = from_env {
        let words: Vec<String> = value.split_whitespace().map(String::from).collect();
        if words.is_empty() {
            return Err(format!("{var} is set but empty"));
        }
        return Ok(words);
    }
    from_files.ok_or_else(|| {
        format!(
            "no target file with rust_target `{rust_target}` has a [test] runner (nor is {var} \
             set): the {rust_target} tests need one"
        )
    })
}

/// A running `<runner> --hold`: the wine server stays up until this is released (dropped),
/// also when the row fails or panics.
pub struct Hold {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Hold {
    /// Starts `runner --hold` with `env` and waits until it prints `ready`, trying up to
    /// [`HOLD_ATTEMPTS`] times. Its stderr is appended to `stderr_log`.
    pub fn start(
        runner: &[String],
        env: &BTreeMap<String, String>,
        stderr_log: &Path,
    ) -> Result<Hold, String> {
        let mut failures = Vec::new();
        for attempt in 1..=HOLD_ATTEMPTS {
            match Hold::try_start(runner, env, stderr_log) {
                Ok(hold) => {
                    if attempt > 1 {
                        eprintln!(
                            "matrix: the wine server hold started on attempt {attempt} \
                             (before: {})",
                            failures.join("; ")
                        );
                    }
                    return Ok(hold);
                }
                Err(e) => failures.push(format!("attempt {attempt}: {e}")),
            }
        }
        Err(format!(
            "`{} --hold` (holds the wine server for the row) did not start in \
             {HOLD_ATTEMPTS} attempts: {}; its stderr is in {}",
            runner.join(" "),
            failures.join("; "),
            stderr_log.display()
        ))
    }

    fn try_start(
        runner: &[String],
        env: &BTreeMap<String, String>,
        stderr_log: &Path,
    ) -> Result<Hold, String> {
        let (program, args) = runner.split_first().ok_or("the runner is empty")?;
        if let Some(dir) = stderr_log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr_log)
            .map_err(|e| format!("cannot open {}: {e}", stderr_log.display()))?;
        let mut child = Command::new(program)
            .args(args)
            .arg("--hold")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        // The first line, read on a thread so that a hold that dies (or hangs) is noticed.
        // The thread then drains stdout: wine's helper processes may keep the pipe open.
        let (first_line, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let read = reader.read_line(&mut line).map(|_| line);
            let _ = first_line.send(read);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let mut hold = Hold { child, stdin };
        let started = Instant::now();
        loop {
            match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(line)) if line.trim() == "ready" => return Ok(hold),
                Ok(Ok(line)) if line.is_empty() => {}
                Ok(Ok(line)) => return Err(format!("printed `{}`, not `ready`", line.trim())),
                Ok(Err(e)) => return Err(format!("cannot read its output: {e}")),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Stdout ended without a line: the hold is exiting.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100))
                }
            }
            // Dropping `hold` on the error paths releases (and if need be kills) it.
            if let Ok(Some(status)) = hold.child.try_wait() {
                return Err(format!("exited with {status} before it was ready"));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!("not ready after {} s", READY_TIMEOUT.as_secs()));
            }
        }
    }

    /// Lets the wine server go: it exits after its linger unless other processes use it.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // Closing stdin ends `set /p`, so the hold's `cmd` exits.
        drop(self.stdin.take());
        let deadline = Instant::now() + RELEASE_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    eprintln!(
                        "matrix: the wine server hold did not exit within {} s of its \
                         release; killing it",
                        RELEASE_TIMEOUT.as_secs()
                    );
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::Execution;
    use std::os::unix::fs::MetadataExt;

    /// The Rust target of the committed matrix's wine row.
    fn wine_rust_target() -> String {
        let m = super::super::Matrix::load(&crate::util::root()).unwrap();
        let row = m.rows.iter().find(|r| r.execution == Execution::Wine);
        row.expect("the matrix has a wine row").rust_target.clone()
    }

    #[test]
    fn the_runner_comes_from_the_target_files() {
        let root = crate::util::root();
        let target = wine_rust_target();
        // The committed target file's runner, resolved against the root: a script there.
        let got = runner_from(None, "V", None, &target).unwrap_err();
        assert!(got.contains("no target file with rust_target"), "{got}");
        if std::env::var_os(runner_variable(&target)).is_none() {
            let got = runner(&root, &target).unwrap();
            assert!(got[0].starts_with(&*root.to_string_lossy()), "{got:?}");
            assert!(Path::new(&got[0]).is_file(), "{got:?}");
        }
        // The environment variable wins, as for cargo and nextest.
        let files = Some(vec!["/kit/run".to_string()]);
        let got = runner_from(Some("/x/run -v"), "V", files.clone(), &target);
        assert_eq!(got.unwrap(), ["/x/run", "-v"]);
        assert_eq!(
            runner_from(None, "V", files, &target).unwrap(),
            ["/kit/run"]
        );
        assert_eq!(
            runner_variable("a-b.c_d"),
            "CARGO_TARGET_A_B_C_D_RUNNER".to_string()
        );
        let e = runner_from(Some(" "), "V", None, "t-x").unwrap_err();
        assert!(e.contains("V is set but empty"), "{e}");
    }

    /// The process id of the wine server of `prefix`: a `wineserver` process whose
    /// working directory is the prefix's server directory, `server-<dev>-<inode>`.
    fn server_pid(prefix: &Path) -> Option<u32> {
        let meta = std::fs::metadata(prefix).ok()?;
        let dir = format!("server-{:x}-{:x}", meta.dev(), meta.ino());
        std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .find_map(|entry| {
                let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
                let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
                let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
                (comm.starts_with("wineserver") && cwd.file_name()? == dir.as_str()).then_some(pid)
            })
    }

    /// A private copy of the wine prefix `from` in `to` (its own server, so that other
    /// wine users cannot keep it up): the programs are hard links, everything else (the
    /// registry, which the server rewrites in place when a file has several links) is
    /// copied.
    fn copy_prefix(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let (src, dst) = (entry.path(), to.join(entry.file_name()));
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
            } else if kind.is_dir() {
                copy_prefix(&src, &dst);
            } else {
                let name = entry.file_name().to_string_lossy().to_lowercase();
                if name.ends_with(".dll") || name.ends_with(".exe") {
                    std::fs::hard_link(&src, &dst).unwrap();
                } else {
                    std::fs::copy(&src, &dst).unwrap();
                }
            }
        }
    }

    /// A private copy of the shared prefix in a temporary directory beside it (hard links
    /// need the same file system): the directory and the prefix in it.
    fn private_prefix(shared: &Path) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix(".wine-cpjit-test")
            .tempdir_in(shared.parent().unwrap())
            .unwrap();
        let prefix = dir.path().join("prefix");
        copy_prefix(shared, &prefix);
        (dir, prefix)
    }

    /// The shared wine prefix, or `None` (with the reason printed) where wine is not set
    /// up; under CI (`CI=true`), which always sets it up, its absence fails the test.
    fn wine_prefix_or_skip() -> Option<PathBuf> {
        let prefix = match std::env::var_os("WINEPREFIX") {
            Some(p) => PathBuf::from(p),
            None => PathBuf::from(std::env::var_os("HOME")?).join(".wine-cpjit"),
        };
        let has_wine = Command::new("wine")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let missing = if !has_wine {
            "wine is not installed".to_string()
        } else if !prefix.join("system.reg").is_file() {
            format!("there is no wine prefix at {}", prefix.display())
        } else {
            return Some(prefix);
        };
        let reason = format!("{missing} (bash ci/setup.sh sets it up)");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI: {reason}"
        );
        println!("skipped: {reason}");
        None
    }

    /// With a 2 s linger, the held server is still the same process well past its linger,
    /// and exits once the hold is released. Without the hold (or with a hold that does not
    /// hold) the server would be gone after the pause.
    #[test]
    fn a_held_wine_server_outlives_its_linger_and_exits_after_release() {
        let Some(shared) = wine_prefix_or_skip() else {
            return;
        };
        let runner = runner(&crate::util::root(), &wine_rust_target()).unwrap();
        let (dir, prefix) = private_prefix(&shared);
        let linger = 2;
        let env = BTreeMap::from([
            ("WINEPREFIX".to_string(), prefix.display().to_string()),
            ("CPJIT_WINE_LINGER".to_string(), linger.to_string()),
        ]);
        let hold = Hold::start(&runner, &env, &dir.path().join("hold.stderr")).unwrap();
        let server = server_pid(&prefix).expect("a wine server runs while the hold is ready");

        std::thread::sleep(Duration::from_secs(linger + 3));
        assert_eq!(
            server_pid(&prefix),
            Some(server),
            "the held server (pid {server}, linger {linger} s) is gone {} s after the hold \
             was ready",
            linger + 3
        );

        hold.release();
        // Hang guard only: the server exits `linger` seconds after the release.
        let deadline = Instant::now() + Duration::from_secs(120);
        while server_pid(&prefix).is_some() {
            assert!(
                Instant::now() < deadline,
                "the wine server (pid {server}) still runs 120 s after the hold's release"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `personality(2)`'s flag that turns address-space randomization off.
    const ADDR_NO_RANDOMIZE: u32 = 0x0040000;
    /// Where wine maps KUSER_SHARED_DATA; the range from 0x7ff00000 to 0x7fff0000 around it
    /// is reserved for it.
    const SHARED_USER_DATA_RESERVE: u64 = 0x7ff0_0000;

    /// A wine process started by the runner runs without address randomization, so its
    /// brk heap lies right after wine's non-PIE loader, below the page of KUSER_SHARED_DATA;
    /// randomized, the heap lands anywhere in the 1 GiB above the loader and covers that
    /// page in about one process in 8,000, which then dies before main (c0000018).
    #[test]
    fn a_wine_process_keeps_its_heap_below_the_shared_user_data_page() {
        let Some(shared) = wine_prefix_or_skip() else {
            return;
        };
        let runner = runner(&crate::util::root(), &wine_rust_target()).unwrap();
        let (dir, prefix) = private_prefix(&shared);
        let env = BTreeMap::from([("WINEPREFIX".to_string(), prefix.display().to_string())]);
        let hold = Hold::start(&runner, &env, &dir.path().join("hold.stderr")).unwrap();
        // The runner execs wine, so the hold's process is the wine process.
        let proc_dir = PathBuf::from(format!("/proc/{}", hold.child.id()));
        let personality = std::fs::read_to_string(proc_dir.join("personality")).unwrap();
        let personality = u32::from_str_radix(personality.trim(), 16).unwrap();
        let maps = std::fs::read_to_string(proc_dir.join("maps")).unwrap();
        hold.release();
        assert!(
            personality & ADDR_NO_RANDOMIZE != 0,
            "wine runs with address randomization (personality {personality:#x})"
        );
        let heap = maps
            .lines()
            .find(|l| l.ends_with("[heap]"))
            .expect("the wine process has a brk heap");
        let range = heap.split_whitespace().next().unwrap();
        let (start, end) = range.split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        assert!(
            start < end && end <= SHARED_USER_DATA_RESERVE,
            "the heap {range} reaches into the shared user data reserve at \
             {SHARED_USER_DATA_RESERVE:#x}"
        );
    }
}
