#!/usr/bin/env bash
# CI for the bf-jit example, run from anywhere: the steps every outside example runs
# (../outside-crate-ci.sh: build `cpjit`, emit cpjit.h, build the stencil crates, test
# natively and under qemu-aarch64 and qemu-riscv64), plus the check that the kit's crates
# package and that a rebuild of the stencil crates is byte-identical.
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../outside-crate-ci.sh bf-jit --package-kit --check-stencils --riscv64
