//! Every lowering agrees with the stencil it mirrors (short traces ending in each op, run
//! by copy-and-patch and every variant), the loop's checksum matches, and bad traces are
//! refused with the instance named.
use super::*;
use crate::copy_patch;
use crate::workload::{counting_loop, resolve, straight, take_checksum, Instance};

fn inst(stencil: &'static str, operands: &[u64], target: Option<usize>) -> Instance {
    Instance {
        stencil,
        operands: ["OPERAND0", "OPERAND1"]
            .into_iter()
            .zip(operands.iter().copied())
            .collect(),
        targets: target.map(|t| ("JUMP_TARGET", t)).into_iter().collect(),
    }
}

fn spec(body: Vec<Instance>) -> TraceSpec {
    let mut instances = vec![inst("cpjit_entry", &[], None)];
    instances.extend(body);
    instances.push(inst("op_test_exit", &[], None));
    TraceSpec {
        name: "t".into(),
        instances,
        stack_slots: 16,
    }
}

/// (status, checksum) by copy-and-patch and by every variant; all must agree.
fn agree(spec: &TraceSpec) {
    let jit = copy_patch::jit().unwrap();
    let trace = copy_patch::compile(&jit, spec).unwrap();
    take_checksum();
    let expected = (copy_patch::run(&trace, spec), take_checksum());
    for variant in Variant::ALL {
        let mut c = Compiler::new(variant, resolve).unwrap();
        let compiled = c.compile_spec(spec).unwrap();
        // SAFETY: the compiler is alive and not recycled.
        let got = (unsafe { compiled.run(spec) }, take_checksum());
        assert_eq!(got, expected, "{variant:?} on {:?}", spec.instances);
    }
}

#[test]
fn each_op_computes_what_its_stencil_computes() {
    agree(&spec(vec![inst("op_test_push", &[41], None)]));
    agree(&spec(vec![inst("op_test_push2", &[5, 9], None)]));
    agree(&spec(vec![
        inst("op_test_push2", &[40, 2], None),
        inst("op_test_add", &[], None),
    ]));
    agree(&spec(vec![
        inst("op_test_push2", &[6, 7], None),
        inst("op_test_push", &[8], None),
        inst("op_test_helper", &[], None),
    ]));
    for x in 0..9 {
        agree(&spec(vec![
            inst("op_test_push", &[x], None),
            inst("op_test_table", &[], None),
        ]));
    }
    // Two counters: each instance has its own; the second sees 5 + (5 + 5).
    agree(&spec(vec![
        inst("op_test_push", &[5], None),
        inst("op_test_counter", &[], None),
        inst("op_test_push", &[5], None),
        inst("op_test_counter", &[], None),
        inst("op_test_add", &[], None),
        inst("op_test_counter", &[], None),
    ]));
    agree(&spec(vec![
        inst("op_test_push", &[30], None),
        inst("op_test_addr_addend", &[], None),
        inst("op_test_add", &[], None),
    ]));
    agree(&spec(vec![
        inst("op_test_push2", &[1, 2], None),
        inst("op_test_pop", &[], None),
    ]));
    // Not taken (1 - 1 == 0: the table op maps 0 to 3000009) and taken over the table
    // op (3 - 1 != 0: exits with 2).
    for top in [1, 3] {
        agree(&spec(vec![
            inst("op_test_push", &[top], None),
            inst("op_test_dec_jump_nz", &[], Some(4)),
            inst("op_test_table", &[], None),
        ]));
    }
}

/// Batches compute what single compiles do: copy-and-patch's `TraceBatch` and
/// Cranelift's many functions with one finalize, every function of each.
#[test]
fn batches_agree_with_single_compiles() {
    let jit = copy_patch::jit().unwrap();
    for spec in [straight(10), counting_loop(100)] {
        let plan = copy_patch::plan(&jit, &spec).unwrap();
        let single = copy_patch::stitch(&jit, &plan).unwrap();
        take_checksum();
        let expected = (copy_patch::run(&single, &spec), take_checksum());
        let traces = copy_patch::stitch_batch(&jit, &plan, 5).unwrap();
        assert_eq!(traces.len(), 5);
        for t in &traces {
            assert_eq!((copy_patch::run(t, &spec), take_checksum()), expected);
        }
        for variant in Variant::ALL {
            let mut c = Compiler::new(variant, resolve).unwrap();
            let compiled = c.compile_batch(&op_list(&spec).unwrap(), 5).unwrap();
            assert_eq!(compiled.len(), 5);
            for f in &compiled {
                // SAFETY: the compiler is alive and not recycled.
                let got = (unsafe { f.run(&spec) }, take_checksum());
                assert_eq!(got, expected, "{variant:?} on {}", spec.name);
            }
        }
    }
}

#[test]
fn bench_traces_agree_with_copy_and_patch() {
    for n in [3, 10, 101] {
        agree(&straight(n));
    }
    agree(&counting_loop(1000));
}

#[test]
fn bad_traces_are_refused_with_the_instance_named() {
    let mut c = Compiler::new(Variant::ALL[0], resolve).unwrap();
    let err = |s: TraceSpec, c: &mut Compiler| c.compile_spec(&s).err().unwrap();
    let e = err(spec(vec![inst("op_test_push", &[], None)]), &mut c);
    assert!(
        e.contains("instance 1 (op_test_push): no value for operand OPERAND0"),
        "{e}"
    );
    let e = err(spec(vec![inst("op_vm_add", &[], None)]), &mut c);
    assert!(
        e.contains("no Cranelift lowering for stencil op_vm_add"),
        "{e}"
    );
    let e = err(spec(vec![inst("op_test_add", &[], None)]), &mut c);
    assert!(
        e.contains("instance 1 (op_test_add) reads 2 stack value(s) but 0"),
        "{e}"
    );
    let mut open = spec(vec![inst("op_test_push", &[1], None)]);
    open.instances.pop();
    let e = err(open, &mut c);
    assert!(e.contains("continues past the end of the trace"), "{e}");
    // A loop whose body pushes: its head would be entered at two depths.
    let e = err(
        spec(vec![
            inst("op_test_push", &[3], None),
            inst("op_test_push", &[1], None),
            inst("op_test_dec_jump_nz", &[], Some(2)),
        ]),
        &mut c,
    );
    assert!(
        e.contains("instance 2 is entered with 1 and 2 stack values"),
        "{e}"
    );
}
