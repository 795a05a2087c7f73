//! Unit tests of `layout.rs`: the weights, the moved blocks, the split and the tail, and
//! the never-worse check (a module of its own to keep `layout.rs` short).

use super::*;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;

use crate::target::test_target;
use cpjit_model::{Arch, HoleValue, ObjectFormat};

/// A module for `TRIPLE` (replaced by a target file's LLVM triple).
const IR_FOR: &str = r#"
target triple = "TRIPLE"

declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr)
declare preserve_nonecc i64 @_JIT_EXIT_TARGET(ptr, ptr)

define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %exit, label %next
exit:
  %r = musttail call preserve_nonecc i64 @_JIT_EXIT_TARGET(ptr %f, ptr %sp)
  ret i64 %r
next:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

define preserve_nonecc i64 @op_expect(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %exit, label %next, !prof !0
exit:
  ret i64 7
next:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

define preserve_nonecc i64 @op_both_continue(ptr %f, ptr %sp) {
entry:
  %v = load i64, ptr %sp
  %c = icmp eq i64 %v, 0
  br i1 %c, label %a, label %b
a:
  store i64 1, ptr %sp
  br label %b
b:
  %s = musttail call preserve_nonecc i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}

!0 = !{!"branch_weights", i32 5, i32 6}
"#;

/// The test module for an x86-64 target.
fn ir() -> String {
    IR_FOR.replace(
        "TRIPLE",
        test_target(Arch::X86_64, ObjectFormat::Elf).llvm_triple(),
    )
}

fn printed(name: &str) -> String {
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir().as_bytes(), "t.ll");
    let module = context.create_module_from_ir(buffer).unwrap();
    let favoured = favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline);
    // op_guard's branch; op_guard's and op_expect's exit blocks.
    assert_eq!(
        (favoured.weighted, favoured.moved, favoured.counted),
        (1, 2, 0)
    );
    module.verify().unwrap();
    let text = module.print_to_string().to_string();
    let start = text.find(&format!("@{name}(")).unwrap();
    let end = text[start..].find("\n}").unwrap() + start;
    format!(
        "{}\n{}",
        &text[start..end],
        &text[text.find("\n!").unwrap_or(0)..]
    )
}

#[test]
fn no_plt_declarations_of_holes_become_direct() {
    let ir = ir().replace(
        "declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr)",
        "declare preserve_nonecc i64 @_JIT_CONTINUE(ptr, ptr) #0\ndeclare i64 @helper(ptr) #0\nattributes #0 = { nonlazybind }",
    );
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
    let module = context.create_module_from_ir(buffer).unwrap();
    let jump = |name: &str| name == "_JIT_CONTINUE";
    assert_eq!(direct_hole_calls(&module, jump), 1);
    let text = module.print_to_string().to_string();
    let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap().to_string();
    assert!(
        !line("declare preserve_nonecc i64 @_JIT_CONTINUE").contains('#'),
        "{text}"
    );
    assert!(
        line("declare i64 @helper").contains('#'),
        "helpers keep -fno-plt: {text}"
    );
    assert_eq!(direct_hole_calls(&module, jump), 0);
}

#[test]
fn the_exit_side_of_a_guard_is_unlikely() {
    let f = printed("op_guard");
    // true → exit (cold), false → continuation (hot)
    assert!(
        f.contains("br i1 %c, label %exit, label %next, !prof"),
        "{f}"
    );
    assert!(f.contains("!{!\"branch_weights\", i32 1, i32 2000}"), "{f}");
    // ... and laid out after the continuation path.
    assert!(
        f.find("\nnext:").unwrap() < f.find("\nexit:").unwrap(),
        "{f}"
    );
}

/// A stencil of `len` bytes, the last `cold` of them its cold part.
fn sized(name: &str, len: usize, cold: u32, falls_through: bool) -> StencilBuf {
    StencilBuf {
        code_align: 16,
        elided_continue: falls_through,
        cold_len: cold,
        ..StencilBuf::plain(name, vec![0x90; len])
    }
}

#[test]
fn the_kit_layout_is_worse_when_it_loses_the_fall_through_or_grows_for_nothing() {
    let own = sized("op", 155, 0, true);
    // Issue 43's binary op: larger and no fall-through.
    assert_eq!(
        worse(&sized("op", 175, 0, false), &own),
        Some(Worse::LostFallThrough)
    );
    assert_eq!(
        worse(&sized("op", 150, 0, false), &own),
        Some(Worse::LostFallThrough)
    );
    assert_eq!(worse(&sized("op", 160, 0, true), &own), Some(Worse::Larger));
    // A hot part split smaller is kept though the cold part adds bytes in all.
    assert_eq!(worse(&sized("op", 170, 40, true), &own), None);
    assert_eq!(worse(&sized("op", 154, 4, true), &own), None);
    // As large a hot part and more bytes in all: a cost without a gain.
    assert_eq!(
        worse(&sized("op", 165, 10, true), &own),
        Some(Worse::Larger)
    );
    // A fall-through gained at no size cost, and a smaller guard.
    let own_jumps = sized("op", 33, 0, false);
    assert_eq!(worse(&sized("op", 33, 0, true), &own_jumps), None);
    assert_eq!(worse(&sized("op", 28, 0, false), &own_jumps), None);
    assert_eq!(worse(&sized("op", 33, 0, false), &own_jumps), None);
}

#[test]
fn no_worse_keeps_the_kit_layout_per_stencil_unless_it_is_worse() {
    let kit = vec![sized("a", 28, 0, true), sized("b", 175, 0, false)];
    let own = vec![sized("b", 155, 0, true), sized("a", 33, 0, false)];
    let (chosen, kept) = no_worse(kit, own).unwrap();
    assert_eq!(
        chosen,
        vec![sized("a", 28, 0, true), sized("b", 155, 0, true)]
    );
    assert_eq!(kept, vec![("b".to_string(), Worse::LostFallThrough)]);
    let mismatch = no_worse(vec![sized("a", 1, 0, true)], vec![sized("c", 1, 0, true)]);
    assert!(mismatch
        .unwrap_err()
        .contains("stencil a has no counterpart"));
    let extra = no_worse(Vec::new(), vec![sized("c", 1, 0, true)]);
    assert!(extra
        .unwrap_err()
        .contains("stencil c of the set's own layout"));
}

#[test]
fn other_architectures_and_frame_pointers_are_left_alone() {
    let context = Context::create();
    let aarch64 = IR_FOR.replace(
        "TRIPLE",
        test_target(Arch::Aarch64, ObjectFormat::Elf).llvm_triple(),
    );
    let buffer = MemoryBuffer::create_from_memory_range_copy(aarch64.as_bytes(), "a.ll");
    let module = context.create_module_from_ir(buffer).unwrap();
    assert!(!favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline).changed());
    let fp = ir().replace(
        "define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) {",
        "define preserve_nonecc i64 @op_guard(ptr %f, ptr %sp) #0 {",
    ) + "attributes #0 = { \"frame-pointer\"=\"all\" }\n";
    let buffer = MemoryBuffer::create_from_memory_range_copy(fp.as_bytes(), "f.ll");
    let module = context.create_module_from_ir(buffer).unwrap();
    let favoured = favour_continuation(&module, "_JIT_CONTINUE", Cold::Inline);
    // op_guard is left alone; op_expect (no frame pointer) has its exit moved.
    assert_eq!((favoured.weighted, favoured.moved), (0, 1));
}

/// An op of the style "helper call, conditional exit, continue" (the exit path does
/// work of its own, so it is no conditional tail call): on each splitting target, and
/// on COFF and Mach-O (whose cold tail the reader moves), its exit path becomes
/// the stencil's cold part, and its hot path falls through.
#[test]
fn a_guarded_helper_call_splits_and_falls_through() {
    const IR: &str = r#"
target triple = "TRIPLE"
declare CC i64 @_JIT_CONTINUE(ptr, ptr)
declare CC i64 @_JIT_EXIT_TARGET(ptr, ptr)
declare i64 @helper(ptr)
define CC i64 @op_call_guard(ptr %f, ptr %sp) ATTRS {
entry:
  %h = call i64 @helper(ptr %f)
  %c = icmp eq i64 %h, 0
  br i1 %c, label %exit, label %next
exit:
  store i64 7, ptr %sp
  %r = musttail call CC i64 @_JIT_EXIT_TARGET(ptr %f, ptr %sp)
  ret i64 %r
next:
  store i64 %h, ptr %sp
  %s = musttail call CC i64 @_JIT_CONTINUE(ptr %f, ptr %sp)
  ret i64 %s
}
"#;
    crate::llvm::initialize();
    // RISC-V has no preserve_none (its ops use the C convention).
    for (arch, cc) in [
        (Arch::X86_64, "preserve_nonecc "),
        (Arch::Aarch64, "preserve_nonecc "),
        (Arch::Riscv64, ""),
    ] {
        let target = test_target(arch, ObjectFormat::Elf);
        let ir = IR
            .replace("TRIPLE", target.llvm_triple())
            .replace("CC ", cc)
            .replace("ATTRS", "uwtable");
        split_and_read(&target, &ir);
    }
    for (arch, format) in [Arch::Aarch64, Arch::X86_64]
        .into_iter()
        .flat_map(|a| [(a, ObjectFormat::Coff), (a, ObjectFormat::MachO)])
    {
        let target = test_target(arch, format);
        assert!(!splits_cold(&target) && moves_cold_tail(&target));
        // Built with unwind tables where the pipeline reads them (x64 COFF's `.pdata`).
        let attrs = if crate::frame::reads_unwind_tables(&target) {
            "uwtable"
        } else {
            "nounwind"
        };
        let ir = IR
            .replace("TRIPLE", target.llvm_triple())
            .replace("CC ", "preserve_nonecc ")
            .replace("ATTRS", attrs);
        split_and_read(&target, &ir);
    }
}

/// Compiles `ir` (one stencil function) for `target` as the pipeline does, and checks
/// that its exit is in its cold part and its hot part falls through.
fn split_and_read(target: &crate::target::Target, ir: &str) {
    let split = splits_cold(target);
    assert!(split || moves_cold_tail(target));
    let context = Context::create();
    let buffer = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "s.ll");
    let module = context.create_module_from_ir(buffer).unwrap();
    let is_stencil = |name: &str| name.starts_with("op_");
    let (cold, sections) = if split {
        (
            Cold::Split(&is_stencil),
            Some(&is_stencil as &dyn Fn(&str) -> bool),
        )
    } else {
        (Cold::Tail, None)
    };
    favour_continuation(&module, "_JIT_CONTINUE", cold);
    crate::llvm::function_sections(&module, target, sections);
    let object =
        crate::llvm::emit_object(&module, target, inkwell::OptimizationLevel::Default).unwrap();
    let select = |name: &str| !name.ends_with(".cold") && is_stencil(name);
    let limits = crate::manifest::Limits::default();
    let options = crate::object::ReadOptions {
        target: &target.triple,
        arch: target.arch,
        format: target.format,
        template: "s.ll",
        hole_prefix: "_JIT_",
        target_suffix: "_TARGET",
        select: &select,
        limits: &limits,
        move_cold_tail: !split,
    };
    let mut stencils = crate::object::read_stencils(&object, &options).unwrap();
    crate::frame::derive(target, &object, &mut stencils).unwrap();
    let [s] = &stencils[..] else {
        panic!("{stencils:?}")
    };
    // Split, both parts have a frame layout (on AArch64 the cold part's call-frame
    // program continues the hot part's, see `frame::eh_frame`; a moved x64 COFF tail
    // takes its function's state after the prologue). The other formats whose tails are
    // moved have no layouts read.
    let read = crate::frame::reads_unwind_tables(target);
    match &s.frame {
        Some(crate::frame::DerivedFrame::Functions(parts)) if read => {
            assert_eq!(parts.len(), 2, "{parts:?}");
            let cold = &parts[1];
            assert!(
                split
                    || parts[0].rows.last().map(|r| (r.cfa_register, r.cfa_offset))
                        == cold.rows.first().map(|r| (r.cfa_register, r.cfa_offset)),
                "{parts:?}"
            );
        }
        Some(crate::frame::DerivedFrame::Unknown(_)) if !read => {}
        other => panic!("{other:?}"),
    }
    assert!(s.cold_len > 0, "{}", s.to_text());
    assert!(s.elided_continue, "{}", s.to_text());
    let hot_len = (s.code.len() - s.cold_len as usize) as u32;
    // The hot part branches into the cold part, which holds the exit.
    let cold_branch = s.holes.iter().find(|h| h.value == HoleValue::Cold);
    assert!(
        cold_branch.is_some_and(|h| h.offset < hot_len),
        "{}",
        s.to_text()
    );
    let exit = s
        .holes
        .iter()
        .find(|h| matches!(h.value, HoleValue::Target(_)));
    assert!(exit.is_some_and(|h| h.offset >= hot_len), "{}", s.to_text());
}

#[test]
fn existing_weights_and_all_hot_branches_are_left_alone() {
    let f = printed("op_expect");
    assert!(f.contains("i32 5, i32 6"), "{f}");
    let g = printed("op_both_continue");
    assert!(g.contains("br i1 %c, label %a, label %b\n"), "{g}");
}
