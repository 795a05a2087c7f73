//! The LLVM peer on the VM's own traces: every example program is run in `jit` mode, the
//! traces it compiled are taken from its executors, and each is compiled again by
//! copy-and-patch (the VM's own `Backend`) and by LLVM -O0/-O2 from the VM ops' template IR.
//! Compile time only: running an LLVM-compiled trace needs a live VM frame, which the VM
//! does not let an outside backend provide (see the report).

use crate::harness::{measure, Sample};
use crate::peer::{self, library, Level};
use crate::results::PeerRow;
use crate::workload::{Instance, TraceSpec};
use cpjit_vm::{ops, Config, Mode, Vm};
use inkwell::context::Context;
use std::collections::BTreeSet;
use std::path::Path;

/// Helper addresses of the VM (what its copy-and-patch backend resolves too).
fn resolve(name: &str) -> Option<u64> {
    cpjit_vm::helpers::symbols()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a as u64)
}

/// One VM trace as a [`TraceSpec`]: the shim, then micro-op `i` as instance `i + 1`, with
/// the VM's operand and target conventions (`ARG0`/`ARG1`; `JUMP_TARGET` and `EXIT_TARGET`
/// both go to `Inst::target`, as in the VM's own backend).
fn spec(name: String, trace: &cpjit_vm::trace::Trace) -> TraceSpec {
    let mut instances = vec![Instance {
        stencil: "cpjit_entry",
        operands: vec![],
        targets: vec![],
    }];
    for u in &trace.uops {
        let target = u.target as usize + 1;
        instances.push(Instance {
            stencil: ops::info(u.op).stencil,
            operands: vec![("ARG0", u.arg0), ("ARG1", u.arg1)],
            targets: vec![("JUMP_TARGET", target), ("EXIT_TARGET", target)],
        });
    }
    TraceSpec {
        name,
        instances,
        stack_slots: 0,
    }
}

pub fn run(root: &Path, quick: bool) -> Result<Vec<PeerRow>, String> {
    let set = cpjit_vm::jit::set_for(library::TRIPLE)
        .ok_or_else(|| format!("the VM has no {} stencil set linked", library::TRIPLE))?;
    let backend = cpjit_vm::jit::Backend::new(set)?;
    let dir = root.join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".vm")
                .map(String::from)
        })
        .collect();
    names.sort();
    // Every example's traces.
    let mut programs = Vec::new();
    for name in &names {
        let path = dir.join(format!("{name}.vm"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let program = cpjit_vm::parse(&text).map_err(|e| format!("examples/{name}.vm: {e}"))?;
        let functions = program.functions.len();
        let vm = Vm::new(
            program,
            Config {
                mode: Mode::Jit,
                ..Config::default()
            },
        )
        .map_err(|e| format!("examples/{name}.vm: {e}"))?;
        let _ = vm.run(); // a runtime error (overflow.vm) still leaves its traces
        let traces: Vec<cpjit_vm::trace::Trace> = (0..functions)
            .flat_map(|f| {
                vm.function_state(f)
                    .executors
                    .borrow()
                    .iter()
                    .map(|e| e.trace.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        if !traces.is_empty() {
            programs.push((name.clone(), traces));
        }
    }
    let mut specs = Vec::new();
    let mut stencils = BTreeSet::from(["cpjit_entry"]);
    for (name, traces) in &programs {
        let s: Vec<TraceSpec> = traces
            .iter()
            .enumerate()
            .map(|(i, t)| spec(format!("{name}#{i}"), t))
            .collect();
        for x in s.iter().flat_map(|s| &s.instances) {
            stencils.insert(x.stencil);
        }
        specs.push(s);
    }
    let ir = library::template_bitcode(
        &root.join("templates"),
        &root.join("targets"),
        &["shim.c", "vm/ops.c"],
    )?;
    let context = Context::create();
    let stencils: Vec<&str> = stencils.into_iter().collect();
    let lib = library::Library::new(&context, &ir, &stencils)?;
    let runs = if quick { 1 } else { 5 };
    let mut rows = Vec::new();
    for ((name, traces), specs) in programs.iter().zip(&specs) {
        let uops: usize = traces.iter().map(|t| t.uops.len()).sum();
        let label = format!("examples/{name}.vm: {} trace(s)", traces.len());
        let mut failure = None;
        let cp = measure(2, runs * 3, || {
            traces
                .iter()
                .map(|t| backend.compile(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| failure = Some(format!("{label}: copy-and-patch: {e}")))
                .ok()
        });
        let mut push = |backend: &str, compile: Sample| {
            rows.push(PeerRow {
                trace: label.clone(),
                backend: backend.into(),
                instances: uops + traces.len(),
                compile,
                run: None,
                run_unit: String::new(),
            })
        };
        push("copy-and-patch", cp);
        for level in [Level::O0, Level::O2] {
            let sample = measure(0, runs, || {
                specs
                    .iter()
                    .map(|s| peer::compile(&context, &lib, s, level, resolve))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| failure = Some(e))
                    .ok()
            });
            push(level.name(), sample);
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(rows)
}
