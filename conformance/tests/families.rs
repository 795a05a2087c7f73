//! Stencil families (`templates/families/arith.c`, `[[family]] test_arith` in the kit's
//! manifest): every member runs on every stencil set this process can execute (narrowed by
//! `CPJIT_STENCILS`), found through the generated table (`cpjit_stencils::families`) by
//! element and parameter-value indices, never by formatting a name; the table must agree
//! with the naming rule, and the skipped combinations must be absent.

use crate::common;

use cpjit_model::StencilSet;
use cpjit_runtime::Jit;

const OPS: [&str; 3] = ["add", "sub", "xor"];

/// `((top OP operand) * scale) << shift`, what `arith.c` computes.
fn reference(op: &str, top: u64, operand: u64, scale: u64, shift: u32) -> u64 {
    let x = match op {
        "add" => top.wrapping_add(operand),
        "sub" => top.wrapping_sub(operand),
        _ => top ^ operand,
    };
    x.wrapping_mul(scale) << shift
}

fn check(set: &'static StencilSet<'static>) -> Result<usize, String> {
    let target = set.target;
    let families = cpjit_stencils::families(set);
    let family = families
        .iter()
        .find(|f| f.name == "test_arith")
        .ok_or_else(|| format!("{target}: no family test_arith"))?;
    let jit = Jit::new(set, |_| None).map_err(|e| format!("{target}: {e}"))?;
    let push = set.index_of("op_test_push").ok_or("no op_test_push")?;
    let exit = set.index_of("op_test_exit").ok_or("no op_test_exit")?;
    let mut checks = 0;
    for (e, op) in OPS.iter().enumerate() {
        if family.element_index(op) != Some(e) {
            return Err(format!("{target}: element {op} is not at {e}"));
        }
        for scale in 0..3 {
            for shift in 0..3 {
                let found = family.stencil(e, &[scale, shift]);
                let skipped = scale == 2 && shift == 2; // SCALE = 3, SHIFT = 2
                let Some(index) = found else {
                    if skipped {
                        continue;
                    }
                    return Err(format!("{target}: {op} ({scale}, {shift}) missing"));
                };
                if skipped {
                    return Err(format!("{target}: skipped {op} (3, 2) present"));
                }
                let (s, sh) = (scale as u64 + 1, shift as u32);
                let name = format!("op_test_family_{op}_{s}_{sh}");
                if set.stencils[index].name != name {
                    return Err(format!(
                        "{target}: table gives {} for {name}",
                        set.stencils[index].name
                    ));
                }
                for (top, operand) in [(5u64, 3u64), (u64::MAX, 0x8000_0000), (0, u64::MAX)] {
                    let mut b = jit.trace();
                    let shim = b.push_shim().map_err(|e| e.to_string())?;
                    b.push(push, &[top], &[]).map_err(|e| e.to_string())?;
                    b.push(index, &[operand], &[])
                        .map_err(|e| format!("{target}: {name}: {e}"))?;
                    b.push(exit, &[], &[]).map_err(|e| e.to_string())?;
                    let trace = b.finish().map_err(|e| format!("{target}: {name}: {e}"))?;
                    let mut memory = [0u64; 4];
                    let mut frame = [0u64; 4];
                    // SAFETY: a trace of test ops using one value of `memory`; `shim` is
                    // the entry shim.
                    let got = unsafe {
                        trace.entry_fn(shim).unwrap()(
                            frame.as_mut_ptr().cast(),
                            memory.as_mut_ptr(),
                        )
                    } as u64;
                    let want = reference(op, top, operand, s, sh);
                    common::expect_eq(&mut checks, got, want, || {
                        format!("{target}: {name} top {top:#x} operand {operand:#x}")
                    })?;
                }
            }
        }
    }
    Ok(checks)
}

#[test]
fn family_members_found_through_the_table_compute_their_variant() {
    common::check_every_executable_set("family", check);
}
