//! Frame layouts from the compiler's own call-frame information: the ELF object's
//! `.eh_frame` (its CIEs and FDEs, the pc-begin relocations that say which function each
//! FDE describes) is interpreted row by row ([`eh_frame`], on the `gimli` crate), and each function copied into a stencil (the
//! [`CodePiece`]s the object reader recorded) gets its rows and register saves at stencil
//! code offsets. Nothing is decoded from instructions and nothing is guessed: a function
//! without an FDE, or an FDE whose program rows cannot express (a CFA expression, a save
//! above the CFA, a vendor opcode), leaves the stencil's layout
//! [`DerivedFrame::Unknown`] with the reason, naming target, stencil and code offset; the
//! runtime refuses to register unwind information for a trace that uses it. A malformed
//! `.eh_frame` is an error. A set whose own flags turn the unwind tables off
//! (`-fno-asynchronous-unwind-tables` after the kit's `-fasynchronous-unwind-tables`) keeps
//! its code as those flags give it; its stencils' layouts are then unknown, and one notice
//! per target names them ([`unknown_notice`]).
//!
//! x64 COFF objects carry `.pdata`/`.xdata` instead ([`pdata`]): prologue unwind codes,
//! replayed into the same rows; a function without a `.pdata` entry is, by the Windows x64
//! ABI, a leaf that neither moves `rsp` nor saves a register. Mach-O and ARM64 COFF objects
//! are compiled without unwind tables and their stencils' layouts are `Unknown`, with the
//! reason (see [`derive`]).

mod eh_frame;
mod pdata;

use crate::error::{Error, Result};
use crate::stencil::{grown_before, CodePiece, StencilBuf};
use crate::target::Target;
use cpjit_model::{Arch, FrameRow, FrameSave, ObjectFormat};

/// A stencil's frame layout, owned (the generated crate's [`cpjit_model::FrameLayout`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DerivedFrame {
    Functions(Vec<DerivedFunction>),
    Unknown(String),
}

/// One function of a stencil's code ([`cpjit_model::FrameFunction`], owned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedFunction {
    pub start: u32,
    pub end: u32,
    pub rows: Vec<FrameRow>,
    pub saves: Vec<FrameSave>,
}

/// Whether [`derive`] reads `target`'s unwind tables, so that its objects must be compiled
/// with them: ELF `.eh_frame` and x64 COFF `.pdata`/`.xdata`.
pub fn reads_unwind_tables(target: &Target) -> bool {
    match target.format {
        ObjectFormat::Elf => true,
        ObjectFormat::Coff => target.arch == Arch::X86_64,
        ObjectFormat::MachO => false,
    }
}

/// What a function without an entry in the unwind tables is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Unknown (ELF: every function has an FDE when tables are on).
    Unknown,
    /// A leaf in the entry state throughout (the Windows x64 ABI's rule for functions
    /// without `.pdata`).
    Leaf,
}

/// Sets every stencil's [`StencilBuf::frame`] from `object` (the bytes it was read from).
pub fn derive(target: &Target, object: &[u8], stencils: &mut [StencilBuf]) -> Result<()> {
    let (fdes, missing) = match (target.format, target.arch) {
        (ObjectFormat::Elf, arch) => (
            eh_frame::read(object, arch).map_err(|e| Error(format!(".eh_frame: {e}")))?,
            Missing::Unknown,
        ),
        (ObjectFormat::Coff, Arch::X86_64) => (
            pdata::read(object).map_err(|e| Error(format!("{}: {e}", target.triple)))?,
            Missing::Leaf,
        ),
        (format, arch) => {
            let reason = match format {
                ObjectFormat::Coff => format!(
                    "{}: frame layouts are not read from {} COFF objects: ARM64 `.xdata` unwind codes are not decoded (Windows ARM64 unwinding cannot be run here: this target's stencils execute in a Linux host process), so they are built without unwind tables",
                    target.triple,
                    arch.name()
                ),
                _ => format!(
                    "{}: frame layouts are not read from Mach-O objects: `__compact_unwind` is exact only at calls and reading `__eh_frame` (`-femit-dwarf-unwind=always`) is not implemented, so they are built without unwind tables",
                    target.triple
                ),
            };
            for s in stencils {
                s.frame = Some(DerivedFrame::Unknown(reason.clone()));
            }
            return Ok(());
        }
    };
    for s in stencils {
        s.frame = Some(stencil_frame(&target.triple, s, &fdes, missing));
    }
    Ok(())
}

/// Why an ELF function's layout is unknown when it has no FDE: the set's flags turned the
/// unwind tables off (`-fno-asynchronous-unwind-tables` after the kit's
/// `-fasynchronous-unwind-tables`, see `clang::compile_flags`).
const NO_FDE: &str = "the function has no FDE in .eh_frame";

/// Renames a stencil (a unit's entry to the unit's name, a family template's function to
/// the member's), and the name its unknown layout's reason gives it; returns the old name.
pub fn rename(s: &mut StencilBuf, new: String) -> String {
    if let Some(DerivedFrame::Unknown(why)) = &mut s.frame {
        let old = format!("stencil `{}`", s.name);
        *why = why.replacen(&old, &format!("stencil `{new}`"), 1);
    }
    std::mem::replace(&mut s.name, new)
}

/// The one notice for a target whose unwind tables the kit reads ([`reads_unwind_tables`])
/// when some of its stencils have no layout: which (by name), why, and what it means. A
/// target whose layouts are never read (Mach-O, ARM64 COFF) says so in each reason and
/// gets no notice.
pub fn unknown_notice(target: &Target, stencils: &[StencilBuf]) -> Option<String> {
    if !reads_unwind_tables(target) {
        return None;
    }
    let mut untabled = Vec::new();
    let mut others = Vec::new();
    for s in stencils {
        match &s.frame {
            Some(DerivedFrame::Unknown(why)) if why.ends_with(NO_FDE) => {
                untabled.push(s.name.as_str())
            }
            Some(DerivedFrame::Unknown(why)) => others.push(format!("{} ({why})", s.name)),
            _ => {}
        }
    }
    if untabled.is_empty() && others.is_empty() {
        return None;
    }
    let mut text = format!(
        "notice: {}: {} of {} stencils have no frame layout",
        target.triple,
        untabled.len() + others.len(),
        stencils.len()
    );
    if !untabled.is_empty() {
        text.push_str(&format!(
            "; without unwind tables (the set's flags turn them off, e.g. \
             `-fno-asynchronous-unwind-tables`; their code is what those flags give): {}",
            untabled.join(", ")
        ));
    }
    if !others.is_empty() {
        text.push_str(&format!(
            "; with call-frame information the kit cannot express: {}",
            others.join(", ")
        ));
    }
    text.push_str(
        ". Nothing unwinds through them: with `JitOptions::unwind`, finishing a trace that \
         uses one is an error naming it; without, debuggers, backtraces and panics stop at \
         such a trace.",
    );
    if !untabled.is_empty() {
        text.push_str(
            " To have them described, drop the flag and let the kit's \
             `-fasynchronous-unwind-tables` stand (which can change the code, e.g. AArch64 \
             prologues and epilogues).",
        );
    }
    Some(text)
}

/// What one FDE says about one function: where it is (section name, offset, length) and its
/// rows relative to the function start, or why rows cannot express it.
#[derive(Debug)]
struct Fde {
    section: String,
    begin: u64,
    len: u64,
    rows: std::result::Result<Rows, (u64, String)>,
}

/// Rows and saves relative to the function start.
#[derive(Debug, Default)]
struct Rows {
    rows: Vec<FrameRow>,
    saves: Vec<FrameSave>,
}

fn stencil_frame(triple: &str, s: &StencilBuf, fdes: &[Fde], missing: Missing) -> DerivedFrame {
    let len = s.code.len() as u64;
    let hot_len = len - u64::from(s.cold_len);
    let mut functions = Vec::with_capacity(s.pieces.len());
    for piece in &s.pieces {
        let unknown = |offset: u64, why: &str| {
            DerivedFrame::Unknown(format!(
                "{triple}: stencil `{}`, code offset {offset:#x} (`{}`+{:#x}): {why}",
                s.name,
                piece.section,
                offset - piece.at + piece.start
            ))
        };
        let leaf;
        let fde = match fdes
            .iter()
            .find(|f| f.section == piece.section && f.begin == piece.function)
        {
            Some(fde) => fde,
            None if missing == Missing::Leaf => {
                leaf = leaf_fde(piece);
                &leaf
            }
            None => return unknown(piece.at, NO_FDE),
        };
        // COFF symbols have no size, so a COFF piece runs to the next symbol and includes
        // the alignment padding after the function; its `.pdata` entry ends at the
        // function's last instruction. ELF pieces are exactly the function (`st_size`).
        // Lengths from the function's start, before any lengthening (see `place`).
        let piece_end = piece.end - piece.function;
        let function_len = match missing {
            Missing::Leaf => fde.len.min(piece_end),
            Missing::Unknown if fde.len < piece_end => {
                return unknown(piece.at, "the FDE is shorter than the function")
            }
            Missing::Unknown => piece_end,
        };
        let rows = match &fde.rows {
            Ok(rows) => rows,
            Err((loc, why)) => return unknown(piece.at + loc, why),
        };
        // The template function is the hot part, whose trailing jump may have been elided:
        // it ends where the cold part starts.
        let limit = if piece.at < hot_len { hot_len } else { len };
        let function = place(piece, function_len, rows, limit);
        // A function emptied by the removal of the continuation jump (a shim that only
        // jumps) has nothing to describe.
        if function.start < function.end {
            functions.push(function);
        }
    }
    DerivedFrame::Functions(functions)
}

/// A leaf function's description: the entry state (x64: `CFA = rsp + 8`, return address
/// at `CFA - 8`) throughout.
fn leaf_fde(piece: &CodePiece) -> Fde {
    let len = piece.end - piece.function;
    Fde {
        section: piece.section.clone(),
        begin: piece.function,
        len,
        rows: Ok(Rows {
            rows: vec![FrameRow {
                offset: 0,
                cfa_register: 7,
                cfa_offset: 8,
            }],
            saves: vec![FrameSave {
                register: 16,
                cfa_offset: 8,
                from: 0,
                to: len as u32,
            }],
        }),
    }
}

/// A function's rows at stencil offsets, cut at the end of the stencil's code (whose
/// trailing continuation jump may have been removed). `function_len` and the rows are
/// offsets from the function's start in the object; the piece's copy starts at
/// `piece.start` (after the function's start for a moved cold tail, whose first row is the
/// state there) and its instructions before an offset may have grown (`piece.growth`).
fn place(piece: &CodePiece, function_len: u64, rows: &Rows, code_len: u64) -> DerivedFunction {
    let grown = |offset: u64| offset + grown_before(&piece.growth, piece.function + offset);
    let skip = grown(piece.start - piece.function);
    let at = |offset: u32| (piece.at + grown(u64::from(offset)).saturating_sub(skip)) as u32;
    let start = piece.at as u32;
    let end = (piece.at + grown(function_len).saturating_sub(skip)).min(code_len) as u32;
    let mut placed_rows: Vec<FrameRow> = Vec::with_capacity(rows.rows.len());
    for r in &rows.rows {
        let row = FrameRow {
            offset: at(r.offset),
            ..*r
        };
        // Rows before the piece all land on its start: the last of them holds there.
        if placed_rows.last().is_some_and(|l| l.offset == row.offset) {
            placed_rows.pop();
        }
        if row.offset < end {
            placed_rows.push(row);
        }
    }
    let saves = rows
        .saves
        .iter()
        .map(|v| FrameSave {
            from: at(v.from),
            to: at(v.to).min(end),
            ..*v
        })
        .filter(|v| v.from < v.to)
        .collect();
    DerivedFunction {
        start,
        end,
        rows: placed_rows,
        saves,
    }
}

/// Writes the generated crate's `FRAMES`: one [`cpjit_model::StencilFrame`] per stencil, in
/// `SET` order, one line each, naming its layout in `mod frame_layout`, where each distinct
/// layout is written once, numbered in order of first use: a VM set's 1,677 stencils have
/// 439, and rustc's cost of the crate is per expression (issue 38: 0.5 of 2.3 CPU-s).
pub fn write_frames(o: &mut String, stencils: &[StencilBuf]) {
    use std::fmt::Write as _;
    let mut numbers: std::collections::HashMap<String, usize> = Default::default();
    let mut layouts: Vec<String> = Vec::new();
    let uses: Vec<usize> = stencils
        .iter()
        .map(|s| {
            let layout = layout_expression(s.frame.as_ref());
            *numbers.entry(layout).or_insert_with_key(|layout| {
                layouts.push(layout.clone());
                layouts.len() - 1
            })
        })
        .collect();
    if !layouts.is_empty() {
        o.push_str(
            "/// The distinct frame layouts of [`FRAMES`], each written once.\n#[rustfmt::skip]\n\
             mod frame_layout {\n    use cpjit_model::*;\n",
        );
        for (i, layout) in layouts.iter().enumerate() {
            let _ = writeln!(o, "    pub const L{i}: FrameLayout<'static> = {layout};");
        }
        o.push_str("}\n\n");
    }
    o.push_str(
        "/// The frame layout of each stencil of [`SET`], in the same order (from the \
         compiler's call-frame information; `JitOptions::unwind`).\n#[rustfmt::skip]\n\
         pub static FRAMES: &[StencilFrame<'static>] = &[\n",
    );
    for (s, layout) in stencils.iter().zip(uses) {
        let _ = writeln!(
            o,
            "    StencilFrame {{ stencil: {:?}, layout: frame_layout::L{layout} }},",
            s.name
        );
    }
    o.push_str("];\n\n");
}

/// One stencil's `FrameLayout` as a Rust expression.
fn layout_expression(frame: Option<&DerivedFrame>) -> String {
    use std::fmt::Write as _;
    match frame {
        Some(DerivedFrame::Functions(functions)) => {
            let mut f = String::from("FrameLayout::Functions(&[");
            for (i, func) in functions.iter().enumerate() {
                let sep = if i > 0 { ", " } else { "" };
                let rows: Vec<String> = func
                    .rows
                    .iter()
                    .map(|r| {
                        format!(
                            "FrameRow {{ offset: {}, cfa_register: {}, cfa_offset: {} }}",
                            r.offset, r.cfa_register, r.cfa_offset
                        )
                    })
                    .collect();
                let saves: Vec<String> = func
                    .saves
                    .iter()
                    .map(|v| {
                        format!(
                            "FrameSave {{ register: {}, cfa_offset: {}, from: {}, to: {} }}",
                            v.register, v.cfa_offset, v.from, v.to
                        )
                    })
                    .collect();
                let _ = write!(
                    f,
                    "{sep}FrameFunction {{ start: {}, end: {}, rows: &[{}], saves: &[{}] }}",
                    func.start,
                    func.end,
                    rows.join(", "),
                    saves.join(", ")
                );
            }
            f.push_str("])");
            f
        }
        Some(DerivedFrame::Unknown(why)) => format!("FrameLayout::Unknown({why:?})"),
        None => "FrameLayout::Unknown(\"not derived\")".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cold tail moved off its function (at 10..20 of it, copied to 30) whose function
    /// grew by 4 bytes at offset 2: the rows before it collapse into the last one, which
    /// holds from the tail's start; saves and the end move with the growth.
    #[test]
    fn a_moved_tail_takes_its_functions_state_where_it_starts() {
        let piece = CodePiece {
            section: ".text".into(),
            start: 10,
            end: 20,
            at: 30,
            function: 0,
            growth: vec![(2, 4)],
        };
        let row = |offset, cfa_offset| FrameRow {
            offset,
            cfa_register: 7,
            cfa_offset,
        };
        let save = |from, to| FrameSave {
            register: 3,
            cfa_offset: 16,
            from,
            to,
        };
        let rows = Rows {
            rows: vec![row(0, 8), row(1, 16), row(5, 48)],
            saves: vec![save(1, 20), save(0, 3)],
        };
        let placed = place(&piece, 20, &rows, 100);
        assert_eq!((placed.start, placed.end), (30, 40));
        assert_eq!(placed.rows, [row(30, 48)]);
        assert_eq!(placed.saves, [save(30, 40)]);
    }

    pub(super) fn row(offset: u32, cfa_register: u8, cfa_offset: u32) -> FrameRow {
        FrameRow {
            offset,
            cfa_register,
            cfa_offset,
        }
    }

    pub(super) fn save(register: u8, cfa_offset: u32, from: u32, to: u32) -> FrameSave {
        FrameSave {
            register,
            cfa_offset,
            from,
            to,
        }
    }

    /// The object llvm-mc-19 assembles from `source` for `triple`.
    fn assemble(triple: &str, source: &str) -> Vec<u8> {
        let out = std::process::Command::new("llvm-mc-19")
            .args([&format!("-triple={triple}"), "-filetype=obj", "-o", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(source.as_bytes())?;
                c.wait_with_output()
            })
            .expect("llvm-mc-19 is installed");
        assert!(out.status.success());
        out.stdout
    }

    /// A stencil of `len` code bytes made of `pieces`, without a frame yet.
    fn stencil(name: &str, pieces: Vec<CodePiece>, len: usize) -> StencilBuf {
        StencilBuf {
            pieces,
            ..StencilBuf::plain(name, vec![0x90; len])
        }
    }

    /// An object assembled by llvm-mc-19 from CFI directives: each function's FDE lands on
    /// the stencil's pieces at their code offsets; an FDE with an expression makes the
    /// stencil's layout `Unknown`, naming target, stencil and offset.
    #[test]
    fn fdes_of_an_assembled_object_land_on_the_stencils_pieces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        let target = Target::load_all(&dir)
            .unwrap()
            .into_iter()
            .find(|t| t.arch == Arch::X86_64 && t.format == ObjectFormat::Elf)
            .unwrap();
        let source = "
            .section .text.f,\"ax\",@progbits
            f:
            .cfi_startproc
            push %rbx
            .cfi_def_cfa_offset 16
            .cfi_offset %rbx, -16
            call g
            pop %rbx
            .cfi_def_cfa_offset 8
            ret
            .cfi_endproc
            .section .text.g,\"ax\",@progbits
            g:
            .cfi_startproc
            nop
            .cfi_escape 0x0f, 0x01, 0x77
            ret
            .cfi_endproc
        ";
        let object = assemble("x86_64", source);
        let piece = |section: &str, len: u64, at: u64| CodePiece {
            section: section.into(),
            start: 0,
            end: len,
            at,
            function: 0,
            growth: Vec::new(),
        };
        // f: push(1) call(5) pop(1) ret(1) = 8 bytes; g at 8 after it.
        let mut stencils = [
            stencil("f_alone", vec![piece(".text.f", 8, 0)], 8),
            stencil(
                "f_and_g",
                vec![piece(".text.f", 8, 0), piece(".text.g", 2, 8)],
                10,
            ),
        ];
        derive(&target, &object, &mut stencils).unwrap();
        let DerivedFrame::Functions(f) = stencils[0].frame.clone().unwrap() else {
            panic!("{:?}", stencils[0].frame)
        };
        assert_eq!(
            f,
            [DerivedFunction {
                start: 0,
                end: 8,
                rows: vec![row(0, 7, 8), row(1, 7, 16), row(7, 7, 8)],
                saves: vec![save(16, 8, 0, 8), save(3, 16, 1, 8)],
            }]
        );
        let Some(DerivedFrame::Unknown(why)) = &stencils[1].frame else {
            panic!("{:?}", stencils[1].frame)
        };
        assert!(
            why.contains(&target.triple)
                && why.contains("f_and_g")
                && why.contains("code offset 0x9")
                && why.contains("0x0f"),
            "{why}"
        );
    }

    /// The x64 COFF path on an object llvm-mc-19 assembled from `.seh_*` directives: a
    /// function with `.pdata`, a leaf without (the ABI's entry state), padding after a
    /// function (COFF pieces run to the next symbol) and a code rows cannot express.
    #[test]
    fn pdata_entries_of_an_assembled_object_land_on_the_stencils_pieces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../targets");
        let target = Target::load_all(&dir)
            .unwrap()
            .into_iter()
            .find(|t| t.arch == Arch::X86_64 && t.format == ObjectFormat::Coff)
            .unwrap();
        assert!(reads_unwind_tables(&target));
        let source = "
            .text
            .globl f
            f:
            .seh_proc f
            push %rbx
            .seh_pushreg %rbx
            sub $32, %rsp
            .seh_stackalloc 32
            .seh_endprologue
            call g
            add $32, %rsp
            pop %rbx
            ret
            .seh_endproc
            .p2align 5
            .globl g
            g:
            .seh_proc g
            nop
            .seh_pushframe
            .seh_endprologue
            ret
            .seh_endproc
            .globl h
            h:
            ret
        ";
        let coff_x64 = crate::target::test_target(Arch::X86_64, ObjectFormat::Coff);
        let object = assemble(coff_x64.llvm_triple(), source);
        let piece = |start: u64, end: u64, at: u64| CodePiece {
            section: ".text".into(),
            start,
            end,
            at,
            function: start,
            growth: Vec::new(),
        };
        // f: push(1) sub(4) call(5) add(4) pop(1) ret(1) = 16 bytes, padded to g at 32;
        // g: nop, ret; h: ret at 34.
        let mut stencils = [
            stencil("f_and_h", vec![piece(0, 32, 0), piece(34, 35, 32)], 33),
            stencil("g_alone", vec![piece(32, 34, 0)], 2),
        ];
        derive(&target, &object, &mut stencils).unwrap();
        let DerivedFrame::Functions(f) = stencils[0].frame.clone().unwrap() else {
            panic!("{:?}", stencils[0].frame)
        };
        assert_eq!(
            f,
            [
                DerivedFunction {
                    start: 0,
                    end: 16,
                    rows: vec![row(0, 7, 8), row(1, 7, 16), row(5, 7, 48)],
                    saves: vec![save(16, 8, 0, 16), save(3, 16, 1, 16)],
                },
                DerivedFunction {
                    start: 32,
                    end: 33,
                    rows: vec![row(32, 7, 8)],
                    saves: vec![save(16, 8, 32, 33)],
                }
            ]
        );
        let Some(DerivedFrame::Unknown(why)) = &stencils[1].frame else {
            panic!("{:?}", stencils[1].frame)
        };
        assert!(
            why.contains(&target.triple)
                && why.contains("g_alone")
                && why.contains("code offset 0x1")
                && why.contains("UWOP_PUSH_MACHFRAME"),
            "{why}"
        );
    }

    /// Stencils of one layout name one constant, numbered in order of first use; a stencil
    /// without a derived layout says so in its own.
    #[test]
    fn each_distinct_layout_is_written_once_and_named_by_every_stencil_of_it() {
        let function = |end| DerivedFunction {
            start: 0,
            end,
            rows: vec![row(0, 7, 8)],
            saves: vec![save(16, 8, 0, end)],
        };
        let with = |name: &str, frame| StencilBuf {
            frame,
            ..StencilBuf::plain(name, vec![0x90])
        };
        let stencils = [
            with("a", Some(DerivedFrame::Functions(vec![function(5)]))),
            with("b", None),
            with("c", Some(DerivedFrame::Functions(vec![function(5)]))),
            with("d", Some(DerivedFrame::Functions(vec![function(6)]))),
        ];
        let mut o = String::new();
        write_frames(&mut o, &stencils);
        let l0 = "    pub const L0: FrameLayout<'static> = FrameLayout::Functions(&[FrameFunction { \
                  start: 0, end: 5, rows: &[FrameRow { offset: 0, cfa_register: 7, cfa_offset: 8 }], \
                  saves: &[FrameSave { register: 16, cfa_offset: 8, from: 0, to: 5 }] }]);\n";
        let l1 =
            "    pub const L1: FrameLayout<'static> = FrameLayout::Unknown(\"not derived\");\n";
        assert!(
            o.contains(l0) && o.contains(l1) && o.contains("    pub const L2:"),
            "{o}"
        );
        assert!(!o.contains("L3"), "{o}");
        for (name, layout) in [("a", 0), ("b", 1), ("c", 0), ("d", 2)] {
            let entry = format!(
                "    StencilFrame {{ stencil: {name:?}, layout: frame_layout::L{layout} }},\n"
            );
            assert!(o.contains(&entry), "{entry}{o}");
        }
    }
}
