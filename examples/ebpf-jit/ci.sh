#!/usr/bin/env bash
# CI for the ebpf-jit example, run from anywhere: builds the kit's `cpjit` CLI (unless $CPJIT
# names one), then, from this directory and with paths relative to it, emits cpjit.h,
# builds the two stencil crates and runs the tests natively and
# under qemu-aarch64. Needs what `bash ci/setup.sh` installs (clang-19, qemu-user,
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, the aarch64-unknown-linux-gnu rustup target).
set -euo pipefail
cd "$(dirname "$0")"
kit=../..

if [[ -z "${CPJIT:-}" ]]; then
  echo "ebpf-jit: building the kit's cpjit CLI (the first build links LLVM and takes minutes)..." >&2
  # With the whole workspace's features, as the kit's own builds of the toolchain use (xtask's
  # build-stencils, cargo test --workspace), so that a checkout's CI builds it once.
  cargo build --quiet --manifest-path "$kit/Cargo.toml" --workspace --bin cpjit
  CPJIT=$(cd "$kit" && cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug/cpjit
fi

# The crates an outside project depends on must package (and build from the package).
# Cargo verifies them through a temporary registry under the target directory, and both its
# unpacked copies ($CARGO_HOME/registry/src/<hash of that registry's path>/) and its build
# artifacts are keyed by name and version only: in a reused target directory a second run
# after the kit's sources changed (same version) would verify the stale copy. So the
# packages are built in a target directory of their own, and their unpacked copies, a cache
# of our own packages, are removed afterwards.
package_target=$(mktemp -d)
forget_packages() {
  rm -rf "$package_target" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cpjit-{model,isa,runtime}-[0-9]*
}
trap forget_packages EXIT
CARGO_TARGET_DIR="$package_target" cargo package --quiet --manifest-path "$kit/Cargo.toml" \
  -p cpjit-model -p cpjit-isa -p cpjit-runtime --allow-dirty

targets=(--target x86_64-unknown-linux-gnu --target aarch64-unknown-linux-gnu)
"$CPJIT" header --out templates/include
# Built fresh, not checked again: `--check` compiles every stencil anew (it trusts no cache
# entry), which for this set's 1,186 stencils per target costs as much as the build; the
# bf-jit example checks that a rebuild is byte-identical.
"$CPJIT" build-stencils --templates templates --out stencils --model-path "$kit/model" "${targets[@]}"

# This crate is its own workspace: its own Cargo.lock and target directory (also when the
# caller exported the kit's), and the cross settings spelled out here rather than inherited
# from the kit's .cargo/config.toml.
export CARGO_TARGET_DIR="$PWD/target"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER:-"qemu-aarch64 -L /usr/aarch64-linux-gnu"}
cargo fmt --check
cargo test --quiet
cargo test --quiet --target aarch64-unknown-linux-gnu
echo "ebpf-jit: ok (x86_64-unknown-linux-gnu natively, aarch64-unknown-linux-gnu under qemu)"
