#!/bin/sh
# Regenerates the golden object fixtures (obj/<triple>/<name>.o) from src/*.c with clang-19.
# The .o files are committed: the golden tests only read them, so they need no clang.
# After running this, bless the expectations: BLESS=1 cargo test -p cpjit-toolchain --test integration objects_golden
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
clang=${CLANG:-clang-19}
common="-c -O2 -ffreestanding -fno-builtin -fno-asynchronous-unwind-tables -fno-jump-tables
        -fno-stack-protector -std=c11 -I$root/templates/include"

# Per-target flags: keep in sync with targets/<triple>.toml `cflags`.
target_flags() {
  case "$1" in
    x86_64-unknown-linux-gnu) echo "-fpic" ;;
    aarch64-unknown-linux-gnu) echo "-fpic -mno-outline-atomics" ;;
    riscv64gc-unknown-linux-gnu) echo "-march=rv64gc -mabi=lp64d -fpic -mno-relax -mcmodel=medany" ;;
    *-apple-darwin) echo "" ;;
    *-pc-windows-msvc) echo "-DCPJIT_DLLIMPORT_HOLES" ;;
  esac
}

# compile TRIPLE OUTPUT_NAME SOURCE [EXTRA FLAGS...]
compile() {
  triple=$1 name=$2 src=$3
  shift 3
  mkdir -p "$here/obj/$triple"
  # clang knows riscv64gc-… as riscv64-… (the target file's `llvm_triple`).
  clang_triple=$(echo "$triple" | sed 's/^riscv64gc-/riscv64-/')
  # shellcheck disable=SC2046,SC2086
  $clang --target="$clang_triple" $common $(target_flags "$triple") "$@" \
    -o "$here/obj/$triple/$name.o" "$src"
}

for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin \
         aarch64-apple-darwin x86_64-pc-windows-msvc aarch64-pc-windows-msvc \
         riscv64gc-unknown-linux-gnu; do
  case "$t" in
    # ELF needs one section per function: the assembler resolves calls to a local helper
    # in the same section without a relocation (see ops_shared_text below).
    *-linux-gnu) compile "$t" ops "$here/src/ops.c" -ffunction-sections -fdata-sections ;;
    *) compile "$t" ops "$here/src/ops.c" ;;
  esac
  compile "$t" shim "$root/templates/shim.c"
  case "$t" in
    # Darwin has thread-locals only from a minimum OS version on.
    *-apple-darwin) compile "$t" tls "$here/src/tls.c" -mmacos-version-min=11.0 ;;
    *) compile "$t" tls "$here/src/tls.c" ;;
  esac
  compile "$t" stack_protector "$here/src/stack_protector.c" -fstack-protector-all
done
# COFF with one COMDAT section per function, all named .text.
for t in x86_64-pc-windows-msvc aarch64-pc-windows-msvc; do
  compile "$t" ops_function_sections "$here/src/ops.c" -ffunction-sections -fdata-sections
done
# ELF with one shared .text: rejected, because of the local helper `mix`.
for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu riscv64gc-unknown-linux-gnu; do
  compile "$t" ops_shared_text "$here/src/ops.c"
done
# RISC-V with linker relaxation: R_RISCV_RELAX/ALIGN markers, which the reader must reject.
compile riscv64gc-unknown-linux-gnu relax "$here/src/ops.c" -ffunction-sections -mrelax
# RISC-V without PIC in the medlow model: absolute HI20/LO12, which the reader must reject.
compile riscv64gc-unknown-linux-gnu absolute32 "$here/src/absolute32.c" -fno-pic -mcmodel=medlow
# The small non-PIC model: R_X86_64_32S, which the reader must reject.
compile x86_64-unknown-linux-gnu absolute32 "$here/src/absolute32.c" -fno-pic -mcmodel=small
# The medium non-PIC model with every global large: holes are movabs imm64s (R_X86_64_64
# in code, HoleKind::X86Imm64), as a set's `[target.<triple>] code_model = "medium"` builds.
compile x86_64-unknown-linux-gnu medium "$here/src/ops.c" -ffunction-sections -fdata-sections \
  -fno-pic -mcmodel=medium -mlarge-data-threshold=0
