//! The build's progress line (a stage of `pipeline`): on a terminal, once a build has run
//! for a second, how many jobs are done and which are being compiled.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

/// A status line on a terminal, once a build has run for [`Progress::DELAY`]: short (cached)
/// builds stay quiet, long ones say how far they are and what is being compiled.
pub(crate) struct Progress {
    enabled: bool,
    start: Instant,
    total: usize,
    done: AtomicUsize,
    /// Jobs in flight, by description (`<triple> <unit>`), in start order.
    running: std::sync::Mutex<Vec<String>>,
    shown: AtomicBool,
}

impl Progress {
    const DELAY: std::time::Duration = std::time::Duration::from_secs(1);

    pub(crate) fn new(enabled: bool, start: Instant, total: usize) -> Progress {
        Progress {
            enabled,
            start,
            total,
            done: AtomicUsize::new(0),
            running: std::sync::Mutex::new(Vec::new()),
            shown: AtomicBool::new(false),
        }
    }

    pub(crate) fn begin(&self, what: &str) {
        self.running
            .lock()
            .expect("no panics while held")
            .push(what.to_string());
    }

    /// `what` is no longer running; `jobs` of the build are done with it.
    pub(crate) fn end(&self, what: &str, jobs: usize) {
        self.running
            .lock()
            .expect("no panics while held")
            .retain(|w| w != what);
        self.done.fetch_add(jobs, Ordering::Relaxed);
    }

    /// The status line to print now, if any.
    pub(crate) fn status(&self) -> Option<String> {
        if !self.enabled || self.start.elapsed() < Self::DELAY {
            return None;
        }
        let running = self.running.lock().expect("no panics while held");
        let current = match running.as_slice() {
            [] => String::new(),
            [one] => format!(" compiling {one}"),
            [first, rest @ ..] => format!(" compiling {first} (+{} more)", rest.len()),
        };
        self.shown.store(true, Ordering::Relaxed);
        Some(format!(
            "\r\x1b[K[{}/{} done, {:.0} s]{current}",
            self.done.load(Ordering::Relaxed),
            self.total,
            self.start.elapsed().as_secs_f64()
        ))
    }

    pub(crate) fn shown(&self) -> bool {
        self.shown.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_on_a_terminal_and_after_a_second() {
        let now = Instant::now();
        let quiet = Progress::new(true, now, 4);
        quiet.begin("t a.c");
        assert_eq!(quiet.status(), None, "not within the first second");
        let earlier = now.checked_sub(std::time::Duration::from_secs(2)).unwrap();
        assert_eq!(
            Progress::new(false, earlier, 4).status(),
            None,
            "not without a tty"
        );
        let p = Progress::new(true, earlier, 4);
        p.begin("target-a vm/ops.c");
        p.begin("target-a shim.c");
        p.end("target-a shim.c", 1);
        p.begin("target-b shim.c");
        let line = p.status().unwrap();
        assert!(
            line.starts_with("\r\x1b[K[1/4 done, ")
                && line.ends_with("s] compiling target-a vm/ops.c (+1 more)"),
            "{line:?}"
        );
        assert!(p.shown());
    }
}
