#!/usr/bin/env bash
# CI for the ebpf-jit example, run from anywhere: the steps every outside example runs
# (../outside-crate-ci.sh: build `cpjit`, emit cpjit.h, build the stencil crates, test natively,
# under qemu-aarch64 and under qemu-riscv64, the differential tests against rbpf included), and
# natively as an x86_64-unknown-linux-musl process (--musl: the x86_64-unknown-linux-gnu
# stencils, whose code objects targets/x86_64-unknown-linux-musl.toml's `same_code_as` says
# that row's are; building and running the tests there took 54 CPU-s at load 16, wave 25).
# Its stencils are built once: `--check` trusts no cache entry, and for this set's 1,759
# stencils per target costs as much as the build (bf-jit's CI checks that a rebuild is
# byte-identical). Under qemu its crate is optimised (--optimise-emulated): its tests under
# qemu-aarch64 took 52.8 and 57.8 s of CPU at opt-level 1 against 103.0 and 111.6 s
# unoptimised (alternated, load 20-23, wave 23), for 7 s more to build it; natively they
# take 5 s. (stack-jit's take 1.6 s
# under qemu, 1.1 s optimised, for 3 s more to build: not worth it there.)
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../outside-crate-ci.sh ebpf-jit --optimise-emulated --riscv64 --musl
