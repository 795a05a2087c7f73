//! `Trace::listing`: instance boundaries at the real addresses, stencil names, the stitched
//! bytes exactly, and every hole's value.

use crate::common;
use common::{exit_address, resolve, SET};
use cpjit_runtime::{Jit, JitOptions, Target};

#[test]
fn listing_shows_each_instance_its_bytes_and_its_holes_values() {
    let options = JitOptions {
        listing: true,
        ..JitOptions::default()
    };
    let jit = Jit::with_options(SET, resolve, options).unwrap();
    let mut t = jit.trace();
    t.push_shim().unwrap();
    let top = t
        .push_named("op_load_abs", &[0x1234_5678_9abc], &[])
        .unwrap();
    t.push_named("op_dec_jump_nz", &[], &[Target::Instance(top)])
        .unwrap();
    t.push_named("op_exit_to", &[], &[Target::Address(exit_address())])
        .unwrap();
    let trace = t.finish().unwrap();
    let listing = trace.listing().expect("listing option on").to_string();
    let base = trace.code_range().start;
    let offsets = trace.instance_offsets();
    let names = ["cpjit_entry", "op_load_abs", "op_dec_jump_nz", "op_exit_to"];
    for (i, name) in names.iter().enumerate() {
        let header = format!("[{i}] {name} at {:#x} ", base + offsets[i] as usize);
        assert!(listing.contains(&header), "no `{header}` in\n{listing}");
    }
    // The hex lines are the trace's code, byte for byte and in order.
    let mut bytes = Vec::new();
    for line in listing.lines().filter(|l| l.starts_with("  0x")) {
        let mut fields = line.split_whitespace();
        let address = usize::from_str_radix(&fields.next().unwrap()[2..], 16).unwrap();
        let offset = usize::from_str_radix(&fields.next().unwrap()[1..], 16).unwrap();
        assert_eq!(address, base + offset, "{line}");
        assert_eq!(offset, bytes.len(), "lines are contiguous: {line}");
        bytes.extend(fields.map(|b| u8::from_str_radix(b, 16).unwrap()));
    }
    assert_eq!(bytes, trace.code_bytes());
    // Hole values: the operand, the loop target instance, the outside exit, the shim's
    // continuation.
    assert!(listing.contains(": OPERAND0 = 0x123456789abc"), "{listing}");
    let top_at = base + offsets[1] as usize;
    assert!(
        listing.contains(&format!(": JUMP_TARGET = {top_at:#x} (instance 1)")),
        "{listing}"
    );
    assert!(
        listing.contains(&format!(": EXIT_TARGET = {:#x}", exit_address())),
        "{listing}"
    );
    assert!(
        listing.contains(&format!(": continue = {top_at:#x} (instance 1)")),
        "{listing}"
    );
    assert!(listing.starts_with(&format!("trace{}: 4 instances", trace.debug_id().unwrap())));
}
