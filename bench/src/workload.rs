//! Synthetic traces of the test ops (`templates/testing/holes.c`), described once and
//! compiled by every backend: copy-and-patch (`cpjit-runtime`) and the LLVM peer.
//!
//! A trace is a list of instances; instance 0 is the entry shim. Jump targets name instance
//! indices. The helper `cpjit_test_mul_add` keeps a checksum of its results so that runs of
//! the same trace by different backends can be compared.

use std::cell::Cell;

/// One stencil instance: the stencil's name, its operand values and its jump targets
/// (instance indices), by hole name (`OPERAND0`, `JUMP_TARGET`). Names rather than positions,
/// so that each backend matches them to what its input (stencil or IR) actually uses.
#[derive(Clone, Debug)]
pub struct Instance {
    pub stencil: &'static str,
    pub operands: Vec<(&'static str, u64)>,
    pub targets: Vec<(&'static str, usize)>,
}

impl Instance {
    /// The value of operand hole `name`; `at` names the instance in the error.
    pub fn operand(&self, name: &str, at: impl Fn() -> String) -> Result<u64, String> {
        self.operands
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
            .ok_or_else(|| format!("{}: no value for operand {name}", at()))
    }

    /// The instance index jump target `name` names; `at` names the instance in the error.
    pub fn target(&self, name: &str, at: impl Fn() -> String) -> Result<usize, String> {
        self.targets
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, t)| t)
            .ok_or_else(|| format!("{}: no instance for jump target {name}", at()))
    }
}

/// A trace: instance 0 is the entry shim; the last instance returns.
#[derive(Clone, Debug)]
pub struct TraceSpec {
    pub name: String,
    pub instances: Vec<Instance>,
    /// Value-stack slots the trace needs.
    pub stack_slots: usize,
}

fn inst(stencil: &'static str, operands: &[u64], targets: &[usize]) -> Instance {
    const OPERANDS: [&str; 2] = ["OPERAND0", "OPERAND1"];
    Instance {
        stencil,
        operands: OPERANDS
            .iter()
            .copied()
            .zip(operands.iter().copied())
            .collect(),
        targets: targets.iter().map(|&t| ("JUMP_TARGET", t)).collect(),
    }
}

/// A straight-line trace of exactly `n` instances (n ≥ 3), cycling through stack-neutral
/// groups that use every hole kind of the test ops: operands, a helper call, a read-only
/// table, writable data, symbol + addend, and a (forward) jump target.
pub fn straight(n: usize) -> TraceSpec {
    assert!(
        n >= 3,
        "a straight trace needs the shim, one op and the exit"
    );
    let mut v = vec![
        inst("cpjit_entry", &[], &[]),
        inst("op_test_push", &[0], &[]),
    ];
    let mut k = 0u64;
    while v.len() < n - 1 {
        let room = n - 1 - v.len();
        let at = v.len();
        let group: Vec<Instance> = match k % 3 {
            0 => vec![
                inst("op_test_push2", &[k, k + 1], &[]),
                inst("op_test_add", &[], &[]),
                inst("op_test_table", &[], &[]),
                inst("op_test_counter", &[], &[]),
                inst("op_test_pop", &[], &[]),
            ],
            1 => vec![
                inst("op_test_push2", &[2, 3], &[]),
                inst("op_test_push", &[k], &[]),
                inst("op_test_helper", &[], &[]),
                inst("op_test_addr_addend", &[], &[]),
                inst("op_test_add", &[], &[]),
                inst("op_test_pop", &[], &[]),
            ],
            _ => vec![
                inst("op_test_push", &[2], &[]),
                // 2 - 1 != 0: jumps to the next instance (a jump-target hole, taken).
                inst("op_test_dec_jump_nz", &[], &[at + 2]),
                inst("op_test_pop", &[], &[]),
            ],
        };
        if group.len() <= room {
            v.extend(group);
        } else {
            // Fill the rest with pushes (the exit returns the top of the stack).
            v.extend((0..room).map(|i| inst("op_test_push", &[i as u64], &[])));
        }
        k += 1;
    }
    v.push(inst("op_test_exit", &[], &[]));
    TraceSpec {
        name: format!("straight-{n}"),
        stack_slots: n + 8,
        instances: v,
    }
}

/// A counting loop of `iterations` rounds (≥ 1) whose body is 8 instances: operands, an
/// add, a helper call, a table read, writable data and the loop's jump back.
pub fn counting_loop(iterations: u64) -> TraceSpec {
    assert!(iterations >= 1, "the loop decrements before testing");
    let head = 2;
    let instances = vec![
        inst("cpjit_entry", &[], &[]),
        inst("op_test_push", &[iterations], &[]),
        inst("op_test_push2", &[7, 9], &[]), // head
        inst("op_test_add", &[], &[]),
        inst("op_test_push2", &[3, 5], &[]),
        inst("op_test_helper", &[], &[]),
        inst("op_test_table", &[], &[]),
        inst("op_test_counter", &[], &[]),
        inst("op_test_pop", &[], &[]),
        inst("op_test_dec_jump_nz", &[], &[head]),
        inst("op_test_exit", &[], &[]),
    ];
    TraceSpec {
        name: "counting-loop".into(),
        stack_slots: 16,
        instances,
    }
}

/// Micro-ops executed per loop round by [`counting_loop`].
pub const LOOP_BODY_INSTANCES: u64 = 8;

thread_local! {
    /// Per thread, so that concurrent runs (parallel tests) do not mix their sums.
    static CHECKSUM: Cell<u64> = const { Cell::new(0) };
}

/// The test ops' external helper: `a * b + c`, also added to the checksum.
pub extern "C" fn cpjit_test_mul_add(a: i64, b: i64, c: i64) -> i64 {
    let r = a.wrapping_mul(b).wrapping_add(c);
    CHECKSUM.with(|c| c.set(c.get().wrapping_add(r as u64)));
    r
}

/// Resets the checksum and returns the previous value.
pub fn take_checksum() -> u64 {
    CHECKSUM.with(|c| c.replace(0))
}

/// The symbol table shared by both backends.
pub fn resolve(name: &str) -> Option<u64> {
    match name {
        "cpjit_test_mul_add" => Some(cpjit_test_mul_add as *const () as u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straight_traces_have_exactly_n_instances() {
        for n in [3, 4, 10, 11, 100, 1000] {
            let t = straight(n);
            assert_eq!(t.instances.len(), n, "{}", t.name);
            assert_eq!(t.instances[0].stencil, "cpjit_entry");
            assert_eq!(t.instances[n - 1].stencil, "op_test_exit");
            for (i, x) in t.instances.iter().enumerate() {
                assert!(x.targets.iter().all(|&(_, t)| t < n && t > i), "{i}: {x:?}");
            }
        }
    }

    #[test]
    fn the_loop_jumps_back_to_its_head() {
        let t = counting_loop(5);
        let jump = t
            .instances
            .iter()
            .find(|i| i.stencil == "op_test_dec_jump_nz")
            .unwrap();
        assert_eq!(jump.targets, [("JUMP_TARGET", 2)]);
        assert_eq!(
            t.instances.len() as u64 - 3,
            LOOP_BODY_INSTANCES,
            "body = all but shim, initial push and exit"
        );
    }
}
