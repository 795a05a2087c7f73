//! No page of the process is ever writable and executable at once, data pages are not
//! executable, and no mapping of a JIT's code is writable except a keyed alias that only a
//! thread inside a write window may write: checked in `/proc/self/maps` (keys from
//! `/proc/self/smaps`) after every state change, counting what each check saw (Linux only;
//! qemu-user emulates `maps` for the guest).
#![cfg(target_os = "linux")]

use crate::common;
use common::{resolve, run, Frame, SET};
use cpjit_runtime::{Jit, JitOptions};

/// One mapping of the process: its range, permissions, name and protection key (0
/// where the kernel shows none: no keys).
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    name: String,
    key: u32,
}

/// Every mapping of the process: ranges, permissions and names from `/proc/self/maps`
/// (which qemu-user emulates for the guest: its `smaps` is the host's, with the emulator's
/// own read-write-execute translation buffer in it), keys from `/proc/self/smaps` where it
/// has the same range.
fn smaps() -> Vec<Mapping> {
    let keys = keys_by_range();
    let text = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut out: Vec<Mapping> = text.lines().filter_map(mapping_line).collect();
    for m in &mut out {
        m.key = keys.get(&(m.start, m.end)).copied().unwrap_or(0);
    }
    out
}

/// The protection key of each range of `/proc/self/smaps` that shows one.
fn keys_by_range() -> std::collections::HashMap<(usize, usize), u32> {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut keys = std::collections::HashMap::new();
    let mut range = None;
    for line in text.lines() {
        if let Some(key) = line.strip_prefix("ProtectionKey:") {
            keys.insert(range.unwrap(), key.trim().parse().unwrap());
        } else if let Some(m) = mapping_line(line) {
            range = Some((m.start, m.end));
        }
    }
    keys
}

/// A mapping's header line (`start-end perms offset dev inode [name]`), `None` for the
/// `Key: value` lines of `smaps` (whose keys may have a dash).
fn mapping_line(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (a, b) = fields.next()?.split_once('-')?;
    let (Ok(start), Ok(end)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
        return None;
    };
    let perms = fields.next()?.to_string();
    let name = fields.nth(3).unwrap_or("").to_string();
    Some(Mapping {
        start,
        end,
        perms,
        name,
        key: 0,
    })
}

/// What audits checked: mappings, those of JIT code objects, and of those the executable
/// views and the keyed aliases (with the keys seen), summed over `audits` audits.
#[derive(Debug, Default)]
struct Audit {
    audits: usize,
    mappings: usize,
    code_mappings: usize,
    code_views: usize,
    keyed_aliases: usize,
    keys: std::collections::BTreeSet<u32>,
}

impl Audit {
    /// Checks every mapping of the process: none is writable and executable; a mapping of
    /// a JIT code object (`memfd:cpjit-code`, or `memfd:cpjit-code-keyed` for one written
    /// in windows) is an executable view with key 0, a reserved (`---`) range, or, for a
    /// keyed object only, a read-write alias under a key other than 0 (which every thread's
    /// PKRU denies outside write windows). Adds what it saw to the counts.
    fn check(&mut self, when: &str) -> &mut Audit {
        self.audits += 1;
        let before = self.mappings;
        for m in smaps() {
            self.mappings += 1;
            let (a, b, p) = (m.start, m.end, &m.perms);
            assert!(
                !(p.contains('w') && p.contains('x')),
                "{when}: {a:#x}-{b:#x} is {p}"
            );
            if !m.name.starts_with("/memfd:cpjit-code") {
                continue;
            }
            self.code_mappings += 1;
            let keyed = m.name.starts_with("/memfd:cpjit-code-keyed");
            if p.starts_with("r-x") {
                assert_eq!(
                    m.key, 0,
                    "{when}: the executable view {a:#x}-{b:#x} has a key"
                );
                self.code_views += 1;
            } else if p.starts_with("rw-") && keyed && m.key != 0 {
                self.keyed_aliases += 1;
                self.keys.insert(m.key);
            } else if !p.starts_with("---") {
                panic!(
                    "{when}: code mapped {p} under key {} at {a:#x}-{b:#x} ({})",
                    m.key, m.name
                );
            }
        }
        assert!(self.mappings > before, "{when}: no mappings read");
        self
    }

    /// [`check`](Audit::check), and that `jit`'s code is mapped as its mode says: an
    /// executable view, and a keyed alias exactly when it writes with a key (that key).
    fn check_jit(&mut self, when: &str, jit: &Jit<'_>) {
        let (views, aliases) = (self.code_views, self.keyed_aliases);
        self.check(when);
        assert!(
            self.code_views > views,
            "{when}: no executable view of code"
        );
        match jit.protection_key() {
            Some(key) => {
                assert!(self.keyed_aliases > aliases, "{when}: no keyed alias");
                assert_eq!(self.keys, [key].into(), "{when}: the aliases' keys");
            }
            None => assert_eq!(self.keyed_aliases, 0, "{when}: a keyed alias without a key"),
        }
    }
}

fn assert_no_wx(when: &str) {
    Audit::default().check(when);
}

/// (start, end, permissions) of every mapping.
fn maps() -> Vec<(usize, usize, String)> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next().unwrap();
            let perms = fields.next().unwrap().to_string();
            let (a, b) = range.split_once('-').unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
                perms,
            )
        })
        .collect()
}

fn perms_at(maps: &[(usize, usize, String)], address: usize) -> &str {
    maps.iter()
        .find(|(a, b, _)| (*a..*b).contains(&address))
        .map(|(_, _, p)| p.as_str())
        .unwrap_or_else(|| panic!("{address:#x} is not mapped"))
}

#[test]
fn no_page_is_ever_writable_and_executable() {
    assert_no_wx("at start");
    // Small chunks, so that the test also sees the arena grow.
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut audit = Audit::default();
    audit.check("after Jit::new");
    let mut traces = Vec::new();
    for i in 0..120u64 {
        let (trace, shim) = common::returning_trace(
            &jit,
            &[
                ("op_load_got", &[i]),
                ("op_data_counter", &[]),
                ("op_add_got", &[i, 1]),
            ],
        );
        audit.check_jit("after finish", &jit);
        let m = maps();
        let code = perms_at(&m, trace.code_range().start);
        assert!(code.starts_with("r-x"), "code mapped {code}");
        let data = perms_at(&m, trace.data_range().start);
        assert!(data.starts_with("rw-"), "data mapped {data}");
        assert_eq!(run(&trace, shim, &mut Frame::default()) as u64, 2 * i + 1);
        audit.check("after running");
        traces.push(trace);
    }
    let chunks = jit.memory_stats().chunks;
    assert!(chunks > 1, "the arena grew: {:?}", jit.memory_stats());
    while let Some(trace) = traces.pop() {
        drop(trace);
        audit.check("after free");
    }
    drop(jit);
    audit.check("after dropping the Jit");
    // Every state change was audited, and the audits saw the arena's chunks: 120 traces'
    // executable views (keyed aliases too where the JIT writes with a key).
    assert_eq!(audit.audits, 1 + 120 * 2 + 120 + 1, "{audit:?}");
    assert!(audit.code_views >= 120, "{audit:?}");
    eprintln!("audited: {audit:?}");
}

#[test]
fn chunks_are_reserved_inaccessible_and_committed_only_as_far_as_used() {
    let jit = Jit::new(SET, resolve).unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let (trace, shim) =
        common::returning_trace(&jit, &[("op_load_got", &[7]), ("op_data_counter", &[])]);
    assert_eq!(run(&trace, shim, &mut Frame::default()), 7);
    assert!(!trace.data_range().is_empty());
    let m = maps();
    let code = trace.code_range();
    let data = trace.data_range();
    assert!(perms_at(&m, code.start).starts_with("r-x"));
    assert!(perms_at(&m, data.start).starts_with("rw-"));
    // The rest of the 1 MiB code and data parts is reserved but not accessible.
    let code_next = (code.end - 1) / page * page + page;
    let data_next = (data.end - 1) / page * page + page;
    for (what, address) in [("code", code_next), ("data", data_next)] {
        let p = perms_at(&m, address);
        assert!(
            p.starts_with("---"),
            "{what} past the committed page is {p}"
        );
    }
    let stats = jit.memory_stats();
    assert_eq!((stats.code_mapped, stats.data_mapped), (page, page));
    assert_eq!(stats.reserved(), 2 << 20);
    assert_no_wx("with one trace");
}

#[test]
fn no_writable_view_of_code_remains_after_finish_or_drop_but_a_keyed_alias() {
    let jit = Jit::new(SET, resolve).unwrap();
    let mut audit = Audit::default();
    let mut traces = Vec::new();
    for i in 0..20u64 {
        let (trace, shim) =
            common::returning_trace(&jit, &[("op_load_got", &[i]), ("op_call_helper", &[])]);
        audit.check_jit("after finish", &jit);
        assert_eq!(run(&trace, shim, &mut Frame::default()), 1000 + i as i64);
        traces.push(trace);
    }
    // Dropping a trace writes traps over its code, through a window that is gone after.
    traces.truncate(5);
    audit.check_jit("after drop", &jit);
    assert_eq!(audit.audits, 21, "{audit:?}");
    eprintln!("audited: {audit:?}");
}

#[test]
fn batches_keep_code_never_writable_and_data_never_executable() {
    assert_no_wx("at start");
    let options = JitOptions {
        chunk_bytes: 4096,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut audit = Audit::default();
    let mut kept = Vec::new();
    for round in 0..6u64 {
        let mut batch = jit.batch();
        // More than a 4 KiB chunk holds: the batch gets a chunk of its own.
        for i in 0..40 {
            let t = batch.trace();
            t.push_shim().unwrap();
            t.push_named("op_load_got", &[round * 100 + i], &[])
                .unwrap();
            t.push_named("op_data_counter", &[], &[]).unwrap();
            t.push_named("op_add_got", &[i, 1], &[]).unwrap();
            t.push_named("op_return", &[], &[]).unwrap();
        }
        let traces = batch.finish().unwrap();
        audit.check_jit("after finishing a batch", &jit);
        let m = maps();
        for (i, trace) in traces.iter().enumerate() {
            let code = perms_at(&m, trace.code_range().start);
            assert!(code.starts_with("r-x"), "code mapped {code}");
            let data = perms_at(&m, trace.data_range().start);
            assert!(data.starts_with("rw-"), "data mapped {data}");
            let shim = cpjit_runtime::InstanceId::from_index(0);
            let expected = round * 100 + 2 * i as u64 + 1;
            assert_eq!(run(trace, shim, &mut Frame::default()) as u64, expected);
        }
        audit.check("after running a batch");
        // Half of each batch is freed at once, half kept to the end.
        kept.extend(traces.into_iter().step_by(2));
        audit.check("after freeing part of a batch");
    }
    drop(kept);
    audit.check("after freeing every batch");
    assert_eq!(audit.audits, 6 * 3 + 1, "{audit:?}");
    eprintln!("audited: {audit:?}");
}
