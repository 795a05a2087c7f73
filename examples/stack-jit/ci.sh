#!/usr/bin/env bash
# CI for the stack-jit example, run from anywhere: the steps every outside example runs
# (../outside-crate-ci.sh: build `cpjit`, emit cpjit.h, build the stencil crates, test
# natively and under qemu-aarch64 and qemu-riscv64, the differential tests over generated
# programs included: 2,000 natively, the first 300 under qemu). Its stencils are built once
# (bf-jit's CI checks that a rebuild is byte-identical).
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../outside-crate-ci.sh stack-jit --riscv64
