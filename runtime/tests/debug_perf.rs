//! The perf map and jitdump outputs: every line and record is checked against the trace's
//! real instance addresses, sizes and code bytes (perf itself is not needed).
#![cfg(target_os = "linux")]

use crate::common;
use common::{exit_address, resolve, run, Frame, SET};
use cpjit_runtime::debug::perf::{self, JITDUMP_MAGIC, JIT_CODE_LOAD, JIT_CODE_LOAD_FIXED};
use cpjit_runtime::{Jit, JitOptions, Target, Trace};

fn options() -> JitOptions {
    JitOptions {
        perf_map: true,
        jitdump: true,
        ..JitOptions::default()
    }
}

/// A trace with a loop, a helper call, a tail jump to a far continuation (a veneer when
/// the exit function is out of reach is not guaranteed, so its presence is not assumed).
fn sample(jit: &Jit<'_>) -> Trace {
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[3], &[]).unwrap();
    let top = t.push_named("op_call_helper", &[], &[]).unwrap();
    t.push_named("op_dec_jump_nz", &[], &[Target::Instance(top)])
        .unwrap();
    t.push_named("op_exit_to", &[], &[Target::Address(exit_address())])
        .unwrap();
    t.finish().unwrap()
}

/// (start, size, name) of every symbol the trace should have, from its own tables.
fn expected(trace: &Trace, names: &[&str]) -> Vec<(u64, u64, String)> {
    let id = trace.debug_id().expect("debug options on");
    let base = trace.code_range().start as u64;
    let mut v: Vec<_> = names
        .iter()
        .zip(trace.instance_offsets())
        .map(|(name, &o)| {
            let size = SET.get(name).unwrap().code.len() as u64;
            (base + o as u64, size, format!("trace{id}:{name}"))
        })
        .collect();
    if trace.veneers() > 0 {
        let size = trace.veneers() as u64 * 16;
        v.push((
            trace.code_range().end as u64 - size,
            size,
            format!("trace{id}:veneers"),
        ));
    }
    v
}

const NAMES: [&str; 5] = [
    "cpjit_entry",
    "op_load_got",
    "op_call_helper",
    "op_dec_jump_nz",
    "op_exit_to",
];

#[test]
fn perf_map_lines_are_the_instances_addresses_and_sizes() {
    let jit = Jit::with_options(SET, resolve, options()).unwrap();
    let trace = sample(&jit);
    let mut frame = Frame {
        counter: 3,
        ..Frame::default()
    };
    run(&trace, cpjit_runtime::InstanceId::from_index(0), &mut frame);
    assert_eq!(frame.helper_calls, 3, "the registered trace still runs");

    let id = trace.debug_id().unwrap();
    let prefix = format!("trace{id}:");
    let text = std::fs::read_to_string(perf::perf_map_path()).unwrap();
    let lines: Vec<(u64, u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let start = u64::from_str_radix(f.next()?, 16).expect("hex start");
            let size = u64::from_str_radix(f.next()?, 16).expect("hex size");
            let name = f.next()?.to_string();
            name.starts_with(&prefix).then_some((start, size, name))
        })
        .collect();
    assert_eq!(lines, expected(&trace, &NAMES));
    // Every line lies inside the trace's code and lines do not overlap.
    let code = trace.code_range();
    for w in lines.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "{w:?} overlap");
    }
    for (start, size, _) in &lines {
        assert!(code.start as u64 <= *start && start + size <= code.end as u64);
    }
}

#[test]
fn a_trace_with_a_continuation_has_a_tail_line() {
    let jit = Jit::with_options(SET, resolve, options()).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    t.push_named("op_load_got", &[7], &[]).unwrap();
    t.continue_at(Target::Address(exit_address()));
    let trace = t.finish().unwrap();
    let id = trace.debug_id().unwrap();
    let text = std::fs::read_to_string(perf::perf_map_path()).unwrap();
    let tail = text
        .lines()
        .find(|l| l.ends_with(&format!(" trace{id}:tail")))
        .expect("tail line");
    let end_of_last = trace.code_range().start as u64
        + trace.instance_offsets()[1] as u64
        + SET.get("op_load_got").unwrap().code.len() as u64;
    assert!(tail.starts_with(&format!("{end_of_last:x} ")), "{tail}");
    assert_eq!(
        run(
            &trace,
            cpjit_runtime::InstanceId::from_index(0),
            &mut Frame::default()
        ),
        14
    );
}

/// One parsed JIT_CODE_LOAD record.
#[derive(Debug, PartialEq)]
struct Load {
    pid: u32,
    vma: u64,
    code_addr: u64,
    index: u64,
    name: String,
    code: Vec<u8>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}

fn parse_jitdump(bytes: &[u8]) -> Vec<Load> {
    assert_eq!(u32_at(bytes, 0), JITDUMP_MAGIC);
    assert_eq!(u32_at(bytes, 4), 1, "version");
    let header = u32_at(bytes, 8) as usize;
    assert_eq!(header, 40);
    let machine = u32_at(bytes, 12);
    assert_eq!(
        machine,
        if cfg!(target_arch = "aarch64") {
            183
        } else {
            62
        }
    );
    assert_eq!(u32_at(bytes, 20), std::process::id());
    let mut loads = Vec::new();
    let mut at = header;
    while at < bytes.len() {
        let id = u32_at(bytes, at);
        let size = u32_at(bytes, at + 4) as usize;
        assert!(
            at + size <= bytes.len(),
            "record at {at} runs past the file"
        );
        assert_eq!(id, JIT_CODE_LOAD, "record at {at}");
        let r = &bytes[at..at + size];
        let code_size = u64_at(r, 40) as usize;
        let name_end = JIT_CODE_LOAD_FIXED
            + r[JIT_CODE_LOAD_FIXED..]
                .iter()
                .position(|&c| c == 0)
                .unwrap();
        assert_eq!(name_end + 1 + code_size, size, "record size at {at}");
        loads.push(Load {
            pid: u32_at(r, 16),
            vma: u64_at(r, 24),
            code_addr: u64_at(r, 32),
            index: u64_at(r, 48),
            name: String::from_utf8(r[JIT_CODE_LOAD_FIXED..name_end].to_vec()).unwrap(),
            code: r[name_end + 1..].to_vec(),
        });
        at += size;
    }
    loads
}

#[test]
fn jitdump_records_carry_each_instances_address_name_and_bytes() {
    let jit = Jit::with_options(SET, resolve, options()).unwrap();
    let trace = sample(&jit);
    let bytes = std::fs::read(perf::jitdump_path()).unwrap();
    let loads = parse_jitdump(&bytes);
    // Code indices are unique and increasing over the whole file.
    for w in loads.windows(2) {
        assert!(w[0].index < w[1].index);
    }
    let id = trace.debug_id().unwrap();
    let mine: Vec<_> = loads
        .iter()
        .filter(|l| l.name.starts_with(&format!("trace{id}:")))
        .collect();
    let want = expected(&trace, &NAMES);
    assert_eq!(mine.len(), want.len());
    let base = trace.code_range().start as u64;
    for (load, (start, size, name)) in mine.iter().zip(&want) {
        assert_eq!(load.pid, std::process::id());
        assert_eq!((load.vma, load.code_addr), (*start, *start));
        assert_eq!(&load.name, name);
        let at = (start - base) as usize;
        assert_eq!(
            load.code,
            trace.code_bytes()[at..at + *size as usize],
            "{name}"
        );
    }
}

#[test]
fn options_are_off_by_default_and_then_nothing_is_registered() {
    let jit = Jit::new(SET, resolve).unwrap();
    let trace = sample(&jit);
    assert_eq!(trace.debug_id(), None);
    assert_eq!(trace.listing(), None);
}
