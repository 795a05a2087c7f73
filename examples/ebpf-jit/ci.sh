#!/usr/bin/env bash
# CI for the ebpf-jit example, run from anywhere: the steps every outside example runs
# (../outside-crate-ci.sh: build `cpjit`, emit cpjit.h, build the stencil crates, test natively
# and under qemu-aarch64, the differential tests against rbpf included). Its stencils are
# built once: `--check` trusts no cache entry, and for this set's 2,284 stencils per target
# costs as much as the build (bf-jit's CI checks that a rebuild is byte-identical).
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../outside-crate-ci.sh ebpf-jit
