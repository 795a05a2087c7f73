#!/usr/bin/env python3
"""Regenerates ../common/stencils_*.rs from the hand-written test stencils in this folder.

Each op is assembled by llvm-mc-19 into its own section (.text.NAME, data in .data.NAME);
relocations become holes: CONTINUE -> Continue, *_TARGET -> Target, OPERANDn -> Operand,
the op's own data section -> Data, anything else -> Symbol. The generated files embed the
bytes, so the tests need no LLVM tools; each stencil is one line that names only what sets
it apart (common/mod.rs's `hand_written` holds the rest). A source assembled for several
ABIs (WIN64=0/1 below) gives one file: a stencil the ABIs assemble alike stands once, one
they do not stands once per ABI under its `#[cfg]`. Run: python3 gen.py (needs llvm-mc-19,
llvm-readobj-19, llvm-objcopy-19, llvm-objdump-19)."""
import os, re, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "common")
SETS = [
    # (source, llvm-mc triple, output name, arch, nop, reserved registers, ABIs). An ABI is
    # (cfg it is used under, target label, model Abi, --defsym for the source). The label
    # is not a kit target: these sets are hand-written ELF stencils per ABI. The
    # hand-written stencils never touch x18 (so every AArch64 host may run them) nor gp and
    # tp (which every RISC-V host reserves).
    ("x86_64.s", "x86_64-linux-gnu", "x86_64", "X86_64", [0x90], [], [
        ("not(windows)", "hand-written-x86_64-sysv", "SysV64", "WIN64=0"),
        ("windows", "hand-written-x86_64-win64", "Win64", "WIN64=1"),
    ]),
    ("aarch64.s", "aarch64-linux-gnu", "aarch64", "Aarch64", [0x1f, 0x20, 0x03, 0xd5], ["x18"],
     [(None, "hand-written-aarch64", "Aapcs64", None)]),
    ("riscv64.s", "riscv64-linux-gnu", "riscv64", "Riscv64", [0x13, 0x00, 0x00, 0x00], ["gp", "tp"],
     [(None, "hand-written-riscv64", "Lp64d", None)]),
]
sys.dont_write_bytecode = True  # no __pycache__ beside the fixtures
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
from elf_kinds import KINDS  # noqa: E402 (the relocation -> hole kind table, shared)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def section_bytes(obj, name, tmp):
    path = os.path.join(tmp, "sec.bin")
    subprocess.run(["llvm-objcopy-19", "--dump-section", f"{name}={path}", obj, os.devnull], check=True)
    return open(path, "rb").read()


def assemble(source, triple, arch, defsym):
    """The stencils `source` assembles to (with `defsym` set, if any), sorted by name, and
    the external symbols they use, sorted."""
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "ops.o")
        run("llvm-mc-19", f"-triple={triple}", "-filetype=obj", *([f"--defsym={defsym}"] if defsym else []),
            os.path.join(HERE, source), "-o", obj)
        relocs, current = {}, None
        for line in run("llvm-readobj-19", "-r", obj).splitlines():
            m = re.match(r"\s*Section \(\d+\) \.rela(\S+) \{", line)
            if m:
                current = relocs.setdefault(m.group(1), [])
                continue
            m = re.match(r"\s*0x([0-9A-F]+) (\S+) (\S+) 0x([0-9A-F]+)", line)
            if m and current is not None:
                current.append((int(m.group(1), 16), m.group(2), m.group(3), int(m.group(4), 16)))
        # Locally defined labels: name -> (section, offset). RISC-V PCREL_LO12 relocations
        # name their auipc's label; PC-relative references to local data name its label.
        local = {}
        for line in run("llvm-objdump-19", "-t", obj).splitlines():
            m = re.match(r"([0-9a-f]{16}) l\s+\S*\s+(\.\S+)\s+[0-9a-f]+ (\S+)$", line)
            if m and m.group(3) != m.group(2):
                local[m.group(3)] = (m.group(2), int(m.group(1), 16))
        sections = re.findall(r"\.text\.(\w+)", run("llvm-readobj-19", "-S", obj))
        names = sorted(set(sections))
        disasm = run("llvm-objdump-19", "-d", "--no-show-raw-insn", "-M", "intel", obj) if arch == "X86_64" else run("llvm-objdump-19", "-d", "--no-show-raw-insn", obj)
        stencils, all_symbols = [], set()
        for name in names:
            code = section_bytes(obj, f".text.{name}", tmp)
            has_data = f".data.{name}" in relocs or f".data.{name}" in run("llvm-readobj-19", "-S", obj)
            data = section_bytes(obj, f".data.{name}", tmp) if has_data else b""
            raw = [("Code", r) for r in relocs.get(f".text.{name}", [])] + [("Data", r) for r in relocs.get(f".data.{name}", [])]
            operands = sorted({s for _, (_, _, s, _) in raw if re.fullmatch(r"OPERAND\d+", s)})
            targets = sorted({s for _, (_, _, s, _) in raw if s.endswith("_TARGET")})
            symbols = sorted({s for _, (_, _, s, _) in raw if s not in operands and s not in targets and s != "CONTINUE" and not s.startswith(".") and s not in local})
            all_symbols |= set(symbols)
            holes = []
            for section, (offset, rtype, sym, addend) in raw:
                kind = KINDS[rtype]
                buf = code if section == "Code" else data
                if kind in ("X86GotPc32Relaxable", "X86RexGotPc32Relaxable") and not (buf[offset - 2] == 0x8B or buf[offset - 2:offset] in (b"\xff\x15", b"\xff\x25")):
                    kind = "X86GotPc32"  # e.g. `add r, [rip+G]`: only mov/call/jmp are relaxable
                if addend >= 1 << 63:
                    addend -= 1 << 64
                if kind in ("RiscvPcrelLo12I", "RiscvPcrelLo12S"):
                    # The HI20 at the label gives kind (GOT or not), value and addend; the
                    # distance from it to here is folded in, as the toolchain does.
                    label = local[sym][1]
                    hi = next(h for h in holes if h[0] == section and h[1] == label)
                    if hi[2] == "RiscvGotHi20":
                        kind = "RiscvGotLo12I"
                    holes.append((section, offset, kind, hi[3], hi[4] + offset - label))
                    continue
                if sym in local and local[sym][0].startswith(".data."):
                    value = "Data"
                    addend += local[sym][1]
                elif sym == "CONTINUE":
                    value = "Continue"
                elif sym in targets:
                    value = f"Target({targets.index(sym)})"
                elif sym in operands:
                    value = f"Operand({operands.index(sym)})"
                elif sym.startswith(".data."):
                    value = "Data"
                else:
                    value = ("Symbol", sym)
                holes.append((section, offset, kind, value, addend))
            holes.sort(key=lambda h: (h[0] != "Code", h[1]))
            dis = re.search(rf"<\.text\.{name}>:\n(.*?)(?:\n\n|\Z)", disasm, re.S)
            stencils.append((name, code, data, holes, operands, targets, symbols, dis.group(1) if dis else ""))
        return stencils, sorted(all_symbols)


def bytes_lit(b):
    return "&[" + ", ".join(f"0x{x:02x}" for x in b) + "]"


def strs_lit(items):
    return "&[" + ", ".join(f'"{s}"' for s in items) + "]"


def stencil_line(stencil, all_symbols):
    """One `Stencil` literal on one line: the fields that differ from `hand_written`'s."""
    name, code, data, holes, operands, targets, symbols, dis = stencil
    fields = [f'name: "{name}"', f"code: {bytes_lit(code)}"]
    if data:
        fields += [f"init_data: {bytes_lit(data)}", f"data_len: {len(data)}"]
    if holes:
        hole_src = []
        for section, offset, kind, value, addend in holes:
            if isinstance(value, tuple):
                value = f"Symbol({all_symbols.index(value[1])})"
            hole_src.append(f"hole(S::{section}, {offset:#x}, K::{kind}, V::{value}, {addend})")
        fields.append("holes: &[" + ", ".join(hole_src) + "]")
    if operands:
        fields.append(f"operands: {strs_lit(operands)}")
    if targets:
        fields.append(f"targets: {strs_lit(targets)}")
    if symbols:
        fields.append("symbols: &[" + ", ".join(str(all_symbols.index(s)) for s in symbols) + "]")
    last = dis.strip().splitlines()[-1].split()[1] if dis.strip() else ""
    if last in ("ret", "jmp", "b", "br", "jr"):
        fields.append("falls_through: false")
    comments = [f"    // {line.strip()}" for line in dis.splitlines()]
    return comments, "    Stencil { " + ", ".join(fields) + ", ..BASE },"


def generate(source, triple, out_name, arch, nop, reserved, abis):
    built = [(abi, *assemble(source, triple, arch, abi[3])) for abi in abis]
    names = [s[0] for s in built[0][1]]
    assert all([s[0] for s in b[1]] == names for b in built), "every ABI assembles the same ops"
    out = [f"// @generated by runtime/tests/stencils/gen.py from {source}; do not edit.",
           "use super::{hand_written, hole};",
           "use cpjit_runtime::model::{HoleKind as K, HoleValue as V, Section as S, *};", "",
           f"const BASE: Stencil<'static> = hand_written({4 if arch in ('Aarch64', 'Riscv64') else 1});", "",
           "#[rustfmt::skip]",
           f"pub static STENCILS: [Stencil<'static>; {len(names)}] = ["]
    for i in range(len(names)):
        lines = [(abi, *stencil_line(stencils[i], symbols)) for abi, stencils, symbols in built]
        if all(line == lines[0][2] for _, _, line in lines):
            lines = lines[:1]
        for abi, comments, line in lines:
            out += comments
            if len(lines) > 1:
                out.append(f"    #[cfg({abi[0]})]")
            out.append(line)
    out.append("];")
    for (cfg, target, abi, _), _, symbols in built:
        out.append("")
        if cfg:
            out.append(f"#[cfg({cfg})]")
        out.append("#[rustfmt::skip]")
        out.append(f'pub static SET: StencilSet<\'static> = StencilSet {{ target: "{target}", arch: Arch::{arch}, '
                   f"format: ObjectFormat::Elf, abi: Abi::{abi}, reserved_registers: {strs_lit(reserved)}, "
                   f"nop: {bytes_lit(nop)}, shim: Some({names.index('cpjit_entry')}), stencils: &STENCILS, "
                   f'symbols: {strs_lit(symbols)}, zero_fill: &[], digest: "", format_version: format::VERSION, pruned: &[] }};')
    with open(os.path.join(OUT, f"stencils_{out_name}.rs"), "w") as f:
        f.write("\n".join(out) + "\n")


os.makedirs(OUT, exist_ok=True)
for s in SETS:
    generate(*s)
