#!/usr/bin/env python3
"""Regenerates ../common/stencils_*.rs from the hand-written test stencils in this folder.

Each op is assembled by llvm-mc-19 into its own section (.text.NAME, data in .data.NAME);
relocations become holes: CONTINUE -> Continue, *_TARGET -> Target, OPERANDn -> Operand,
the op's own data section -> Data, anything else -> Symbol. The generated files embed the
bytes, so the tests need no LLVM tools. Run: python3 gen.py (needs llvm-mc-19,
llvm-readobj-19, llvm-objcopy-19, llvm-objdump-19)."""
import os, re, subprocess, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "common")
SETS = [
    # (source, llvm-mc triple, set name, target label, arch, format, abi, nop, reserved registers)
    # The label is not a kit target: these sets are hand-written ELF stencils per ABI.
    # The hand-written stencils never touch x18 (so every AArch64 host may run them) nor gp
    # and tp (which every RISC-V host reserves).
    ("x86_64_sysv.s", "x86_64-linux-gnu", "x86_64_sysv", "hand-written-x86_64-sysv", "X86_64", "Elf", "SysV64", [0x90], []),
    ("x86_64_win64.s", "x86_64-linux-gnu", "x86_64_win64", "hand-written-x86_64-win64", "X86_64", "Elf", "Win64", [0x90], []),
    ("aarch64.s", "aarch64-linux-gnu", "aarch64", "hand-written-aarch64", "Aarch64", "Elf", "Aapcs64", [0x1f, 0x20, 0x03, 0xd5], ["x18"]),
    ("riscv64.s", "riscv64-linux-gnu", "riscv64", "hand-written-riscv64", "Riscv64", "Elf", "Lp64d", [0x13, 0x00, 0x00, 0x00], ["gp", "tp"]),
]
KINDS = {
    "R_X86_64_64": "Abs64", "R_AARCH64_ABS64": "Abs64",
    "R_X86_64_PC32": "X86Pc32", "R_X86_64_PLT32": "X86Branch32",
    "R_X86_64_GOTPCREL": "X86GotPc32", "R_X86_64_GOTPCRELX": "X86GotPc32Relaxable",
    "R_X86_64_REX_GOTPCRELX": "X86RexGotPc32Relaxable",
    "R_AARCH64_CALL26": "Aarch64Branch26", "R_AARCH64_JUMP26": "Aarch64Branch26",
    "R_AARCH64_CONDBR19": "Aarch64Branch19", "R_AARCH64_TSTBR14": "Aarch64Branch14",
    "R_AARCH64_ADR_PREL_PG_HI21": "Aarch64AdrPage21", "R_AARCH64_ADR_GOT_PAGE": "Aarch64AdrGotPage21",
    "R_AARCH64_ADD_ABS_LO12_NC": "Aarch64AddLo12", "R_AARCH64_LDST64_ABS_LO12_NC": "Aarch64LdSt64Lo12",
    "R_AARCH64_LD64_GOT_LO12_NC": "Aarch64Ld64GotLo12",
    "R_AARCH64_MOVW_UABS_G0_NC": "Aarch64MovwG0", "R_AARCH64_MOVW_UABS_G1_NC": "Aarch64MovwG1",
    "R_AARCH64_MOVW_UABS_G2_NC": "Aarch64MovwG2", "R_AARCH64_MOVW_UABS_G3": "Aarch64MovwG3",
    "R_RISCV_64": "Abs64", "R_RISCV_CALL_PLT": "RiscvCall", "R_RISCV_JAL": "RiscvJal",
    "R_RISCV_BRANCH": "RiscvBranch", "R_RISCV_PCREL_HI20": "RiscvPcrelHi20",
    "R_RISCV_GOT_HI20": "RiscvGotHi20", "R_RISCV_PCREL_LO12_I": "RiscvPcrelLo12I",
    "R_RISCV_PCREL_LO12_S": "RiscvPcrelLo12S",
}


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def section_bytes(obj, name, tmp):
    path = os.path.join(tmp, "sec.bin")
    subprocess.run(["llvm-objcopy-19", "--dump-section", f"{name}={path}", obj, os.devnull], check=True)
    return open(path, "rb").read()


def generate(source, triple, set_name, target, arch, fmt, abi, nop, reserved):
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "ops.o")
        run("llvm-mc-19", f"-triple={triple}", "-filetype=obj", os.path.join(HERE, source), "-o", obj)
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
        all_symbols = sorted(all_symbols)
        out = [f"// @generated by runtime/tests/stencils/gen.py from {source}; do not edit.",
               "use cpjit_runtime::model::*;", ""]
        def bytes_lit(b):
            return "&[" + ", ".join(f"0x{x:02x}" for x in b) + "]"
        out.append(f"pub static STENCILS: [Stencil<'static>; {len(stencils)}] = [")
        for name, code, data, holes, operands, targets, symbols, dis in stencils:
            for line in dis.splitlines():
                out.append(f"    // {line.strip()}")
            hole_src = []
            for section, offset, kind, value, addend in holes:
                if isinstance(value, tuple):
                    value = f"Symbol({all_symbols.index(value[1])})"
                hole_src.append(f"Hole {{ section: Section::{section}, offset: {offset:#x}, kind: HoleKind::{kind}, value: HoleValue::{value}, addend: {addend} }}")
            out.append("    Stencil {")
            out.append(f"        name: {name!r},".replace("'", '"'))
            out.append(f"        code: {bytes_lit(code)},")
            out.append(f"        code_align: {4 if arch in ('Aarch64', 'Riscv64') else 1},")
            out.append(f"        init_data: {bytes_lit(data)},")
            out.append(f"        data_len: {len(data)},")
            out.append("        data_align: 8,")
            out.append("        zero_fill: &[],")
            out.append("        holes: &[" + "".join(f"\n            {h}," for h in hole_src) + ("\n        ],"if hole_src else "],"))
            out.append("        operands: &[" + ", ".join(f'"{o}"' for o in operands) + "],")
            out.append("        targets: &[" + ", ".join(f'"{t}"' for t in targets) + "],")
            out.append("        symbols: &[" + ", ".join(str(all_symbols.index(s)) for s in symbols) + "],")
            last = dis.strip().splitlines()[-1].split()[1] if dis.strip() else ""
            out.append(f"        falls_through: {'false' if last in ('ret', 'jmp', 'b', 'br', 'jr') else 'true'},")
            out.append("    },")
        out.append("];")
        out.append("")
        out.append("pub static SET: StencilSet<'static> = StencilSet {")
        out.append(f'    target: "{target}",')
        out.append(f"    arch: Arch::{arch},")
        out.append(f"    format: ObjectFormat::{fmt},")
        out.append(f"    abi: Abi::{abi},")
        out.append("    reserved_registers: &[" + ", ".join(f'"{r}"' for r in reserved) + "],")
        out.append(f"    nop: {bytes_lit(nop)},")
        out.append(f"    shim: Some({names.index('cpjit_entry')}),")
        out.append("    stencils: &STENCILS,")
        out.append("    symbols: &[" + ", ".join(f'"{s}"' for s in all_symbols) + "],")
        out.append("    zero_fill: &[],")
        out.append('    digest: "",')
        out.append('    format_version: format::VERSION,')
        out.append("    pruned: &[],")
        out.append("};")
        with open(os.path.join(OUT, f"stencils_{set_name}.rs"), "w") as f:
            f.write("\n".join(out) + "\n")


os.makedirs(OUT, exist_ok=True)
for s in SETS:
    generate(*s)
