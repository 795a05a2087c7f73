//! Unit tests of the compile pipeline.

use super::*;
use crate::family;
use cpjit_model::{Arch, ObjectFormat};

fn stencil(code: &[u8]) -> StencilBuf {
    StencilBuf {
        code_align: 4,
        ..StencilBuf::plain("op_x", code.to_vec())
    }
}

fn target(arch: Arch, format: ObjectFormat) -> Target {
    crate::target::test_target(arch, format)
}

#[test]
fn grouped_units_and_members_give_what_each_gives_compiled_alone_on_every_target() {
    let dir = tempfile::tempdir().unwrap();
    crate::scale_set::ScaleSet {
        ops: 2,
        header_lines: 200,
        batch_size: None,
    }
    .write(dir.path())
    .unwrap();
    std::fs::create_dir_all(dir.path().join("family")).unwrap();
    std::fs::write(
        dir.path().join("family/arith.c"),
        crate::scale_set::FAMILY_TEMPLATE,
    )
    .unwrap();
    let manifest_file = dir.path().join("manifest.toml");
    let mut text = std::fs::read_to_string(&manifest_file).unwrap();
    text.push_str(
        "\n[[family]]\nname = \"arith\"\nsource = \"family/arith.c\"\n\
         stencil = \"op_arith_{elem}_{N}\"\nlist = [\"add\", \"sub\"]\n\
         list_define = \"ELEM\"\n\n[family.params]\nN = [1, 2]\n",
    );
    std::fs::write(&manifest_file, text).unwrap();
    let manifest = Manifest::load(dir.path()).unwrap();
    assert!(manifest.precompiled_header.is_some(), "with the set's PCH");
    let targets =
        Target::load_all(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets"))
            .unwrap();
    let units = manifest.translation_units().unwrap();
    let members = family::all_members(&manifest.families, &manifest.root).unwrap();
    let jobs: Vec<Job> = targets
        .iter()
        .flat_map(|target| {
            let units = units.iter().map(move |u| Job {
                target,
                work: Work::Unit(u.clone()),
            });
            units.chain(members.iter().map(move |m| Job {
                target,
                work: Work::Member(m),
            }))
        })
        .collect();
    with_pipeline(&manifest, |pipeline| {
        grouped_equal_alone(pipeline, &jobs, targets.len())
    });
}

/// A pipeline of `manifest` without a cache, given to `f`.
fn with_pipeline(manifest: &Manifest, f: impl FnOnce(&Pipeline)) {
    let cache = Cache::disabled();
    let (clang_version, llvm_version) = (clang::version().unwrap(), llvm::version().unwrap());
    let pipeline = Pipeline {
        manifest,
        clang_version: &clang_version,
        llvm_version: &llvm_version,
        cache: &cache,
        hashes: FileHashes::for_set(&manifest.root),
        preprocessed: Default::default(),
    };
    llvm::initialize();
    f(&pipeline);
}

/// The units and members of `jobs` (on `targets` targets) planned and compiled in groups,
/// each against the job compiled alone.
fn grouped_equal_alone(pipeline: &Pipeline, jobs: &[Job], targets: usize) {
    let pchs = pipeline.prepare_pchs(jobs).unwrap();
    // One thread: per target, 3 units and 4 members in groups of 4, units and members
    // together in the first.
    let prefixes = pipeline.prepare_prefixes(jobs).unwrap();
    assert!(
        prefixes.list.is_empty(),
        "a set's own PCH leaves no room for prefixes"
    );
    let (tasks, _) = pipeline.plan(jobs, &pchs, &prefixes, 1);
    let groups: Vec<&Vec<usize>> = tasks
        .iter()
        .map(|t| match t {
            Task::Group(g) => g,
            Task::Job(i) => panic!("job {i} not in a group without a cache"),
        })
        .collect();
    assert_eq!(groups.len(), 2 * targets);
    assert!(matches!(jobs[groups[0][0]].work, Work::Unit(_)));
    assert!(matches!(jobs[groups[0][3]].work, Work::Member(_)));
    let grouped = pipeline.run_all(jobs, 1).unwrap();
    assert_eq!(grouped.len(), jobs.len());
    for (job, together) in jobs.iter().zip(&grouped) {
        let pch = pchs.by_target.get(&job.target.triple);
        let alone = pipeline.run_job(job, pch, None).unwrap();
        let [alone] = alone.as_slice() else {
            panic!("one output per job")
        };
        let what = format!("{} {}", job.target.triple, together.template);
        assert_eq!(together.template, alone.template, "{what}");
        assert_eq!(
            format!("{:?}", together.stencils),
            format!("{:?}", alone.stencils),
            "{what}"
        );
        assert_eq!(
            format!("{:?}", together.facts),
            format!("{:?}", alone.facts),
            "{what}"
        );
    }
}

/// A set of two families on one template whose prefix (`#define`, `#include "shared.h"`)
/// reads `WIDE`, which one family defines; `shared.h` includes `wide.h` under it.
fn prefix_set(dir: &std::path::Path, wide_h: &str) -> Manifest {
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/cpjit.h"), crate::cli::HEADER).unwrap();
    std::fs::write(
        dir.join("shared.h"),
        "#ifndef SHARED_H\n#define SHARED_H\n#include \"cpjit.h\"\n#ifdef WIDE\n\
         typedef int64_t num_t;\n#include \"wide.h\"\n#else\ntypedef int32_t num_t;\n#endif\n\
         static inline num_t scaled(num_t x) { return x * SHARED_K; }\n#endif\n",
    )
    .unwrap();
    std::fs::write(dir.join("wide.h"), wide_h).unwrap();
    std::fs::write(
        dir.join("plain.c"),
        "#include \"cpjit.h\"\n\
         CPJIT_CC int64_t op_plain(struct cpjit_frame *frame, uint64_t *sp) {\n\
         CPJIT_CONTINUE(frame, sp);\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("fam.c"),
        "/* The family template. */\n#define SHARED_K 3\n#include \"shared.h\"\n\
         CPJIT_DECLARE_OPERAND(OPERAND0);\nenum { one = 1, two = 2 };\n\
         CPJIT_CC int64_t op_fam(struct cpjit_frame *frame, uint64_t *sp) {\n\
         sp[-1] = (uint64_t)scaled((num_t)(sp[-1] + ELEM + CPJIT_OPERAND(OPERAND0))) << N;\n\
         CPJIT_CONTINUE(frame, sp);\n}\n",
    )
    .unwrap();
    let family = |name: &str, defines: &str| {
        format!(
            "[[family]]\nname = \"{name}\"\nsource = \"fam.c\"\n\
             stencil = \"op_{name}_{{elem}}_{{N}}\"\nlist = [\"one\", \"two\"]\n\
             list_define = \"ELEM\"\n{defines}\n[family.params]\nN = [1, 2]\n\n"
        )
    };
    std::fs::write(
        dir.join("manifest.toml"),
        format!(
            "name = \"prefix\"\nsources = [\"plain.c\"]\ninclude_dirs = [\"include\"]\ncflags = [\"-O2\"]\n\n\
             [stencils]\nfunctions = \"op_*\"\n\n{}{}",
            family("narrow", ""),
            family("wide", "defines = [\"WIDE=1\"]")
        ),
    )
    .unwrap();
    Manifest::load(dir).unwrap()
}

/// Every member of `manifest`'s families on the host's x86-64 ELF target and `f` of the
/// pipeline and those jobs.
fn with_member_jobs(manifest: &Manifest, f: impl FnOnce(&Pipeline, &[Job])) {
    let targets =
        Target::load_all(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets"))
            .unwrap();
    let target = targets
        .iter()
        .find(|t| t.arch == Arch::X86_64 && t.format == ObjectFormat::Elf)
        .unwrap();
    let members = family::all_members(&manifest.families, &manifest.root).unwrap();
    let jobs: Vec<Job> = members
        .iter()
        .map(|m| Job {
            target,
            work: Work::Member(m),
        })
        .collect();
    with_pipeline(manifest, |pipeline| f(pipeline, &jobs));
}

#[test]
fn members_after_a_shared_prefix_give_what_each_gives_alone() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = prefix_set(dir.path(), "#define WIDE_TYPE int64_t\n");
    with_member_jobs(&manifest, |pipeline, jobs| {
        let after = pipeline.run_all(jobs, 2).unwrap();
        for (job, after) in jobs.iter().zip(&after) {
            let alone = pipeline.run_job(job, None, None).unwrap();
            assert_eq!(
                format!("{:?}", after.stencils),
                format!("{:?}", alone[0].stencils),
                "{}",
                after.template
            );
        }
        let prefixes = pipeline.prepare_prefixes(jobs).unwrap();
        // One prefix per value of the define it reads: WIDE unset, WIDE=1.
        assert_eq!(prefixes.list.len(), 2);
        assert_eq!(prefixes.by_job, [0, 0, 0, 0, 1, 1, 1, 1].map(Some));
    });
}

#[test]
fn a_prefix_that_reads_a_varying_define_is_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    // wide.h, read only with WIDE=1, names N: the members of `wide` differ in it.
    let manifest = prefix_set(dir.path(), "#define WIDE_SHIFT N\n");
    with_member_jobs(&manifest, |pipeline, jobs| {
        let prefixes = pipeline.prepare_prefixes(jobs).unwrap();
        assert_eq!(prefixes.list.len(), 1);
        assert_eq!(prefixes.by_job[..4], [Some(0); 4]);
        assert_eq!(prefixes.by_job[4..], [None; 4]);
    });
}

#[test]
fn a_prefix_clang_rejects_names_the_family_the_template_and_clangs_message() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = prefix_set(dir.path(), "");
    std::fs::write(dir.path().join("shared.h"), "#error shared.h is broken\n").unwrap();
    with_member_jobs(&manifest, |pipeline, jobs| {
        let err = pipeline.prepare_prefixes(jobs).err().unwrap().0;
        assert!(
            err.contains("family narrow, wide (the prefix of fam.c")
                && err.contains("shared.h:1:2: error: shared.h is broken"),
            "{err}"
        );
    });
}

#[test]
fn reserved_register_use_names_target_stencil_offset_and_instruction() {
    // nop; mov w18, #1
    let code = [0x1f, 0x20, 0x03, 0xd5, 0x32, 0x00, 0x80, 0x52];
    let apple = target(Arch::Aarch64, ObjectFormat::MachO);
    let err = check_reserved_registers(&apple, "t.c", &[stencil(&code)]).unwrap_err();
    assert_eq!(
        err.0,
        format!(
            "{}: t.c: stencil `op_x`: code offset 0x4: `mov w18, #0x1` uses the reserved register w18",
            apple.triple
        )
    );
    check_reserved_registers(
        &target(Arch::Aarch64, ObjectFormat::Elf),
        "t.c",
        &[stencil(&code)],
    )
    .unwrap();
    check_reserved_registers(
        &target(Arch::Aarch64, ObjectFormat::Coff),
        "t.c",
        &[stencil(&code[..4])],
    )
    .unwrap();
}

#[test]
fn riscv_stencils_may_not_touch_gp_or_tp() {
    let riscv = target(Arch::Riscv64, ObjectFormat::Elf);
    // c.mv a1, a2 ; mv a0, tp ; ret — the compressed move must decode too.
    let code = [0xb2, 0x85, 0x13, 0x05, 0x02, 0x00, 0x82, 0x80];
    let err = check_reserved_registers(&riscv, "t.c", &[stencil(&code)]).unwrap_err();
    assert_eq!(
        err.0,
        format!(
            "{}: t.c: stencil `op_x`: code offset 0x2: `mv a0, tp` uses the reserved register tp",
            riscv.triple
        )
    );
    // c.addi gp, 1: compressed, gp.
    let err = check_reserved_registers(&riscv, "t.c", &[stencil(&[0x85, 0x01])]).unwrap_err();
    assert!(err.0.contains("reserved register"), "{}", err.0);
    check_reserved_registers(&riscv, "t.c", &[stencil(&code[..2])]).unwrap();
}
