//! Small process and path helpers shared by the tasks.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// Sets the kit checkout every task acts on (`main`, from `--kit`, `CPJIT_KIT` or the
/// current directory: [`crate::kit::find`]).
pub fn set_root(root: PathBuf) {
    let _ = ROOT.set(root);
}

/// The kit checkout the tasks act on: as [`set_root`] set it, else (in unit tests) the one
/// holding the current directory. Never the checkout xtask was compiled in (see `kit.rs`).
pub fn root() -> PathBuf {
    ROOT.get_or_init(|| {
        let cwd = std::env::current_dir().expect("the current directory is readable");
        let explicit = std::env::var_os(crate::kit::ENV).map(PathBuf::from);
        crate::kit::find(explicit.as_deref(), &cwd).unwrap_or_else(|e| panic!("{e}"))
    })
    .clone()
}

/// Runs `cmd`, failing with the command line and exit status if it does not succeed.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}

/// `cargo` as invoked by the user (respects `$CARGO`), with each Rust target's linker,
/// runner and C compiler from the target files (`cargo_env.rs`). Target files that do not
/// load give no settings here: the task that reads them reports why.
pub fn cargo() -> Command {
    cargo_in(&root())
}

/// [`cargo`] for the checkout `root`: run in it, with the settings of its target files.
pub fn cargo_in(root: &std::path::Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root);
    if let Ok(vars) = crate::cargo_env::all_variables(root) {
        cmd.envs(vars);
    }
    cmd
}

/// User plus system CPU seconds of every child process waited for so far (and of their
/// waited-for descendants: cargo, rustc, clang, the tests), from `getrusage`.
pub fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) != 0 {
            return 0.0;
        }
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The string at `keys` (e.g. `["package", "name"]`) in the TOML file at `path`; an
/// unreadable or invalid file, or a missing key, is an error naming the file (and the key).
pub fn toml_string(path: &std::path::Path, keys: &[&str]) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    keys.iter()
        .try_fold(&value, |v, key| v.get(key))
        .and_then(toml::Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{}: no string `{}`", path.display(), keys.join(".")))
}
