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
    let cache = Cache::disabled();
    let (clang_version, llvm_version) = (clang::version().unwrap(), llvm::version().unwrap());
    let pipeline = Pipeline {
        manifest: &manifest,
        clang_version: &clang_version,
        llvm_version: &llvm_version,
        cache: &cache,
        hashes: FileHashes::for_set(&manifest.root),
        preprocessed: Default::default(),
    };
    llvm::initialize();
    let pchs = pipeline.prepare_pchs(&jobs).unwrap();
    // One thread: per target, 3 units and 4 members in groups of 4, units and members
    // together in the first.
    let tasks = pipeline.plan(&jobs, &pchs, 1);
    let groups: Vec<&Vec<usize>> = tasks
        .iter()
        .map(|t| match t {
            Task::Group(g) => g,
            Task::Job(i) => panic!("job {i} not in a group without a cache"),
        })
        .collect();
    assert_eq!(groups.len(), 2 * targets.len());
    assert!(matches!(jobs[groups[0][0]].work, Work::Unit(_)));
    assert!(matches!(jobs[groups[0][3]].work, Work::Member(_)));
    let grouped = pipeline.run_all(&jobs, 1).unwrap();
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
