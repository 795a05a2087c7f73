//! The build pipeline for one (translation unit, target) pair, and the parallel driver over
//! all pairs: `clang -E` (skipped on a direct-mode cache hit) → `clang` to bitcode (cached
//! by preprocessed text) → inkwell parse + validation → object emission (cached by bitcode)
//! → object reader → reserved-register check.

use crate::cache::{self, Cache, DepEntry};
use crate::clang;
use crate::disasm;
use crate::error::{Error, Result};
use crate::instructions;
use crate::layout;
use crate::llvm;
use crate::manifest::Manifest;
use crate::object::{self, ReadOptions};
use crate::stencil::StencilBuf;
use crate::target::Target;
use crate::validate::{self, IrFacts, Site};
use inkwell::context::Context;
use rayon::prelude::*;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Everything the jobs share.
pub struct Pipeline<'a> {
    pub manifest: &'a Manifest,
    pub clang_version: &'a str,
    pub llvm_version: &'a str,
    pub cache: &'a Cache,
}

/// The result of one (translation unit, target) job.
#[derive(Debug)]
pub struct UnitOutput {
    /// The unit's path relative to the manifest, `/`-separated (e.g. `testing/holes.c`).
    pub template: String,
    pub stencils: Vec<StencilBuf>,
    pub facts: IrFacts,
    /// Time spent in this job (seconds).
    pub seconds: f64,
}

/// What to compile: a target and a translation unit (relative to the manifest).
pub struct Job<'a> {
    pub target: &'a Target,
    pub unit: PathBuf,
}

impl Pipeline<'_> {
    /// Runs all jobs on `threads` threads; results are in job order. Errors of all jobs are
    /// collected.
    pub fn run_all(&self, jobs: &[Job], threads: usize) -> Result<Vec<UnitOutput>> {
        llvm::initialize();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| Error(format!("cannot start worker threads: {e}")))?;
        let progress = std::io::stderr().is_terminal();
        let done = AtomicUsize::new(0);
        let results: Vec<Result<UnitOutput>> = pool.install(|| {
            jobs.par_iter()
                .map(|job| {
                    let r = self.run(job.target, &job.unit);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if progress {
                        let mut err = std::io::stderr().lock();
                        let _ = write!(
                            err,
                            "\r\x1b[K[{n}/{}] {} {}",
                            jobs.len(),
                            job.target.triple,
                            job.unit.display()
                        );
                        let _ = err.flush();
                    }
                    r
                })
                .collect()
        });
        if progress {
            eprint!("\r\x1b[K");
        }
        let mut outputs = Vec::new();
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(o) => outputs.push(o),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(outputs)
        } else {
            Err(Error::many(errors))
        }
    }

    /// One translation unit for one target.
    pub fn run(&self, target: &Target, unit: &std::path::Path) -> Result<UnitOutput> {
        let start = Instant::now();
        let template = unit
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let at = |e: Error| e.context(format!("{}: {template}", target.triple));
        let flags = clang::compile_flags(self.manifest, target);
        let bitcode = self.bitcode(unit, &flags).map_err(at)?;

        let context = Context::create();
        let module = llvm::parse_bitcode(&context, &bitcode, &template).map_err(at)?;
        let site = Site {
            target: &target.triple,
            template: &template,
        };
        let facts = validate::validate(&module, self.manifest, &site).map_err(Error::many)?;
        // Exits cold, the continuation a fall-through (see `layout`; part of `machine_key`).
        layout::favour_continuation(&module, &format!("{}CONTINUE", self.manifest.hole_prefix));

        let level = llvm::opt_level(&flags);
        let obj_key = cache::key(&[
            b"obj",
            self.llvm_version.as_bytes(),
            llvm::machine_key(target, level).as_bytes(),
            &bitcode,
        ]);
        let object_bytes = match self.cache.get("obj", &obj_key) {
            Some(bytes) => bytes,
            None => {
                let bytes = llvm::emit_object(&module, target, level).map_err(at)?;
                self.cache.put("obj", &obj_key, &bytes);
                bytes
            }
        };
        drop(module);

        let manifest = self.manifest;
        let select = |name: &str| manifest.is_stencil_symbol(name);
        let options = ReadOptions {
            target: &target.triple,
            arch: target.arch,
            format: target.format,
            template: &template,
            hole_prefix: &manifest.hole_prefix,
            target_suffix: &manifest.target_suffix,
            select: &select,
        };
        let mut stencils =
            object::read_stencils(&object_bytes, &options).map_err(|e| Error(e.to_string()))?;
        instructions::mark_relaxable_got_uses(target.llvm_triple(), &mut stencils)?;
        check_reserved_registers(target, &template, &stencils)?;
        Ok(UnitOutput {
            template,
            stencils,
            facts,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Bitcode for `unit`: from the cache when its preprocessed text is known (directly, by
    /// the unit's and its headers' contents, or by running `clang -E`), else compiled.
    fn bitcode(&self, unit: &std::path::Path, flags: &[String]) -> Result<Vec<u8>> {
        let path = self.manifest.root.join(unit);
        let source = std::fs::read(&path)
            .map_err(|e| Error(format!("cannot read {}: {e}", path.display())))?;
        let flag_bytes = flags.join("\0");
        let dep_key = cache::key(&[
            b"dep",
            self.clang_version.as_bytes(),
            flag_bytes.as_bytes(),
            path.to_string_lossy().as_bytes(),
            &source,
        ]);
        let bc_key = |pp_hash: &str| {
            cache::key(&[
                b"bc",
                self.clang_version.as_bytes(),
                flag_bytes.as_bytes(),
                pp_hash.as_bytes(),
            ])
        };
        if let Some(entry) = self
            .cache
            .get("dep", &dep_key)
            .and_then(|b| DepEntry::decode(&b))
        {
            if entry.is_fresh() {
                if let Some(bitcode) = self.cache.get("bc", &bc_key(&entry.preprocessed)) {
                    return Ok(bitcode);
                }
            }
        }
        let preprocessed = clang::preprocess(flags, &path)?;
        let pp_hash = cache::key(&[&preprocessed]);
        let key = bc_key(&pp_hash);
        let bitcode = match self.cache.get("bc", &key) {
            Some(b) => b,
            None => {
                let b = clang::compile_bitcode(flags, &preprocessed)?;
                self.cache.put("bc", &key, &b);
                b
            }
        };
        let mut files = Vec::new();
        for file in clang::included_files(&preprocessed) {
            match std::fs::read(&file) {
                Ok(bytes) => files.push((file, cache::key(&[&bytes]))),
                // A marker that is not a readable file: no direct-mode entry, preprocess each time.
                Err(_) => return Ok(bitcode),
            }
        }
        self.cache.put(
            "dep",
            &dep_key,
            &DepEntry {
                preprocessed: pp_hash,
                files,
            }
            .encode(),
        );
        Ok(bitcode)
    }
}

/// Rejects any instruction that reads or writes a register the target reserves (x18 on
/// Apple and Windows AArch64, where the OS may change it at any time).
pub fn check_reserved_registers(
    target: &Target,
    template: &str,
    stencils: &[StencilBuf],
) -> Result<()> {
    let names = target.reserved_register_names();
    if names.is_empty() {
        return Ok(());
    }
    let mut errors = Vec::new();
    for s in stencils {
        for inst in disasm::disassemble(target.llvm_triple(), &s.code)? {
            if let Some(reg) = names.iter().find(|r| disasm::uses_register(&inst.text, r)) {
                errors.push(Error(format!(
                    "{}: {template}: stencil `{}`: code offset {:#x}: `{}` uses the reserved register {reg}",
                    target.triple, s.name, inst.offset, inst.text
                )));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::many(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stencil(code: &[u8]) -> StencilBuf {
        StencilBuf {
            name: "op_x".into(),
            code: code.to_vec(),
            code_align: 4,
            data: vec![],
            data_align: 1,
            holes: vec![],
            operands: vec![],
            targets: vec![],
            symbols: vec![],
            elided_continue: false,
        }
    }

    fn target(triple: &str) -> Target {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../targets")
            .join(format!("{triple}.toml"));
        Target::load(&path).unwrap()
    }

    #[test]
    fn reserved_register_use_names_target_stencil_offset_and_instruction() {
        // nop; mov w18, #1
        let code = [0x1f, 0x20, 0x03, 0xd5, 0x32, 0x00, 0x80, 0x52];
        let err =
            check_reserved_registers(&target("aarch64-apple-darwin"), "t.c", &[stencil(&code)])
                .unwrap_err();
        assert_eq!(
            err.0,
            "aarch64-apple-darwin: t.c: stencil `op_x`: code offset 0x4: `mov w18, #0x1` uses the reserved register w18"
        );
        check_reserved_registers(
            &target("aarch64-unknown-linux-gnu"),
            "t.c",
            &[stencil(&code)],
        )
        .unwrap();
        check_reserved_registers(
            &target("aarch64-pc-windows-msvc"),
            "t.c",
            &[stencil(&code[..4])],
        )
        .unwrap();
    }

    #[test]
    fn riscv_stencils_may_not_touch_gp_or_tp() {
        let riscv = target("riscv64gc-unknown-linux-gnu");
        // c.mv a1, a2 ; mv a0, tp ; ret — the compressed move must decode too.
        let code = [0xb2, 0x85, 0x13, 0x05, 0x02, 0x00, 0x82, 0x80];
        let err = check_reserved_registers(&riscv, "t.c", &[stencil(&code)]).unwrap_err();
        assert_eq!(
            err.0,
            "riscv64gc-unknown-linux-gnu: t.c: stencil `op_x`: code offset 0x2: `mv a0, tp` uses the reserved register tp"
        );
        // c.addi gp, 1: compressed, gp.
        let err = check_reserved_registers(&riscv, "t.c", &[stencil(&[0x85, 0x01])]).unwrap_err();
        assert!(err.0.contains("reserved register"), "{}", err.0);
        check_reserved_registers(&riscv, "t.c", &[stencil(&code[..2])]).unwrap();
    }
}
