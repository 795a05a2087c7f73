#!/usr/bin/env bash
# The CI of an example JIT built on the kit from outside its workspace (examples/bf-jit,
# examples/ebpf-jit, examples/stack-jit), run by each example's ci.sh from its own directory,
# with paths relative to it: builds the kit's `cpjit` CLI (unless $CPJIT names one), emits
# cpjit.h, builds the example's stencil crates and runs its tests natively, under
# qemu-aarch64 and (with --riscv64) under qemu-riscv64. Needs what `bash ci/setup.sh`
# installs (clang-19, qemu-user, gcc-aarch64-linux-gnu, libc6-dev-arm64-cross,
# gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross, the two rustup targets).
#
# Usage: ../outside-crate-ci.sh NAME [--package-kit] [--check-stencils] [--riscv64]
#                                      [--optimise-emulated] [--musl]
#   NAME              the example's directory and package name
#   --package-kit     also check that the crates an outside project depends on package
#   --check-stencils  also check that a rebuild of the stencil crates is byte-identical
#                     (`--check` trusts no cache entry: it costs a second full build)
#   --riscv64         also build riscv64gc-unknown-linux-gnu's stencil crate and run the
#                     tests under qemu-riscv64 (the example's Cargo.toml must depend on it
#                     for that target)
#   --musl            also run the tests natively as an x86_64-unknown-linux-musl process
#                     (static, LLVM's libunwind), linked by rust-lld as the kit's musl row
#                     links (targets/x86_64-unknown-linux-musl.toml). Its stencils are the
#                     x86_64-unknown-linux-gnu crate's: that target file's `same_code_as`
#                     (ELF, System V ABI, -fpic, small code model: the same code objects),
#                     and an example selects its crate by target_arch and target_os, which
#                     musl shares with glibc, so no stencils are built for it
#   --optimise-emulated  build the example's own crate (its JIT and its tests) at
#                     opt-level 1 for the runs under qemu, where its unoptimised code would
#                     take most of the time (the kit's crates have their opt-level from the
#                     example's Cargo.toml)
#
# Under qemu, CPJIT_EXAMPLE_QEMU=1 is set: an example may run fewer cases of a heavy
# generated test there (each case is already run natively).
set -euo pipefail
name=$1
shift
package_kit=false
check_stencils=false
riscv64=false
emulated=()
musl=false
for arg in "$@"; do
  case "$arg" in
    --package-kit) package_kit=true ;;
    --check-stencils) check_stencils=true ;;
    --riscv64) riscv64=true ;;
    --musl) musl=true ;;
    --optimise-emulated) emulated=(--config "profile.dev.package.\"$name\".opt-level=1") ;;
    *) echo "$name: unknown option \`$arg\`" >&2; exit 2 ;;
  esac
done
kit=../..
kit_target=$(cd "$kit" && cargo metadata --format-version 1 --no-deps |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')

if [[ -z "${CPJIT:-}" ]]; then
  echo "$name: building the kit's cpjit CLI (the first build links LLVM and takes minutes)..." >&2
  # With the whole workspace's features, as the kit's own builds of the toolchain use (xtask's
  # build-stencils, cargo test --workspace), so that a checkout's CI builds it once.
  cargo build --quiet --manifest-path "$kit/Cargo.toml" --workspace --bin cpjit
  CPJIT=$kit_target/debug/cpjit
fi
# Exported for an example's build script that asks this cpjit whether its stencil crates
# are current (examples/ebpf-jit/build.rs).
export CPJIT

if $package_kit; then
  # The crates an outside project depends on must package (and build from the package).
  # Cargo verifies them through a temporary registry under the target directory, and both
  # its unpacked copies ($CARGO_HOME/registry/src/<hash of that registry's path>/) and its
  # build artifacts are keyed by name and version only: in a reused target directory a
  # second run after the kit's sources changed (same version) would verify the stale copy.
  # So the packages are built in a target directory of their own, and their unpacked
  # copies, a cache of our own packages, are removed afterwards.
  package_target=$(mktemp -d)
  forget_packages() {
    rm -rf "$package_target" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cpjit-{model,isa,runtime}-[0-9]*
  }
  trap forget_packages EXIT
  CARGO_TARGET_DIR="$package_target" cargo package --quiet --manifest-path "$kit/Cargo.toml" \
    -p cpjit-model -p cpjit-isa -p cpjit-runtime --allow-dirty
fi

targets=(--target x86_64-unknown-linux-gnu --target aarch64-unknown-linux-gnu)
if $riscv64; then
  targets+=(--target riscv64gc-unknown-linux-gnu)
fi
"$CPJIT" header --out templates/include
"$CPJIT" build-stencils --templates templates --out stencils --model-path "$kit/model" "${targets[@]}"
if $check_stencils; then
  "$CPJIT" build-stencils --templates templates --out stencils --model-path "$kit/model" "${targets[@]}" --check
fi

# The example is its own workspace (its own Cargo.lock), with the cross settings spelled out
# here rather than inherited from the kit's target files: they are what `cargo xtask env`
# prints for these rows (README.md, "Using the kit from your own crate"), with the runners'
# commands inlined. The examples share one target directory, `examples/` in the kit's (also
# when the caller exported the kit's): their Cargo.toml's give the kit's crates one profile
# (cpjit-model and cpjit-runtime at opt-level 2), so cpjit-model, cpjit-isa, cpjit-runtime
# and libc are built once per Rust target for all of them, not once per example.
export CARGO_TARGET_DIR="$kit_target/examples"
# Line tables only, as the kit's own dev profile has them (its Cargo.toml): a panic's
# backtrace keeps its lines, and the examples' builds (up to four Rust targets each) write
# no full debug info, which nothing reads: ebpf-jit's native test build, fresh, alternated,
# 43.4, 45.1 s of CPU with it against 36.6, 34.6 s (load 22-27, wave 27).
# Dropping the dependencies' line tables too (rbpf, combine, the kit's crates) gains
# nothing: ebpf-jit's x86-64 test build, fresh, alternated, 39.6, 41.9, 49.7 s of CPU with
# them against 41.7, 37.2, 47.0 s (load 10-12, wave 33).
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER:-"qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max"}
export CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER=${CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_LINKER:-riscv64-linux-gnu-gcc}
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=${CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER:-rust-lld}
export CC_x86_64_unknown_linux_musl=${CC_x86_64_unknown_linux_musl:-clang-19}
export CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUNNER=${CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUNNER:-"qemu-riscv64 -L /usr/riscv64-linux-gnu -cpu rv64"}
cargo fmt --check
cargo test --quiet
# With --optimise-emulated, the runs under qemu build the example's own crate at opt-level 1.
CPJIT_EXAMPLE_QEMU=1 cargo test --quiet --target aarch64-unknown-linux-gnu ${emulated[@]+"${emulated[@]}"}
rows="x86_64-unknown-linux-gnu natively, aarch64-unknown-linux-gnu under qemu"
if $musl; then
  cargo test --quiet --target x86_64-unknown-linux-musl
  rows+=", x86_64-unknown-linux-musl natively"
fi
if $riscv64; then
  CPJIT_EXAMPLE_QEMU=1 cargo test --quiet --target riscv64gc-unknown-linux-gnu ${emulated[@]+"${emulated[@]}"}
  rows+=", riscv64gc-unknown-linux-gnu under qemu"
fi
echo "$name: ok ($rows)"
