#!/usr/bin/env bash
# Installs what the project needs on a Debian 12 machine that has only Rust: the system
# packages every build needs (clang-19, lld-19, llvm-19-dev, gdb, python3), those the
# matrix rows need, cargo-nextest, and with --wine a wine prefix with the
# bcryptprimitives.dll stand-in.
# Run it through `cargo xtask setup`, which passes each target file's `[test] packages`
# (emulators, cross linkers, C libraries) as `--package P` and `--wine` when a row runs
# under wine, then adds the rustup targets the target files name.
# `--bench` adds what only `cargo xtask bench` needs: PyPy (`pypy3`, Debian's package), the
# peer the bench times next to CPython on the examples' Python versions.
# `--kernel PKG --kernel-dir DIR` (passed by `cargo xtask setup` for each full-system QEMU
# row of ci/matrix.toml) fetches the kernel that metapackage PKG depends on with
# `apt-get download` (never installed), unpacks it under DIR and points DIR/current at it.
# Idempotent and fast when everything is present (a few dpkg/rustup queries).
# Without root it installs nothing and prints the exact command to run.
set -euo pipefail

PACKAGES=(
  clang-19 lld-19 llvm-19 llvm-19-dev libpolly-19-dev libzstd-dev zlib1g-dev gdb
  # The examples' Python versions (examples/*.py) are checked with python3 by vm's tests.
  python3
)
wine=false
kernels=()
kernel_dir=""
while (($#)); do
  case "$1" in
    --bench) PACKAGES+=(pypy3) ;;
    --wine) wine=true; PACKAGES+=(mingw-w64 wine wine64) ;;
    --package)
      if (($# < 2)) || [[ -z $2 || $2 == -* ]]; then
        echo "setup: --package needs a Debian package name" >&2
        exit 2
      fi
      PACKAGES+=("$2")
      shift
      ;;
    --kernel | --kernel-dir)
      if (($# < 2)) || [[ -z $2 || $2 == -* ]]; then
        echo "setup: $1 needs a value" >&2
        exit 2
      fi
      if [[ $1 == --kernel ]]; then kernels+=("$2"); else kernel_dir=$2; fi
      shift
      ;;
    *) echo "setup: unknown argument \`$1\` (known: --bench, --wine, --package P, --kernel PKG, --kernel-dir DIR)" >&2; exit 2 ;;
  esac
  shift
done
# Once each (target files may name the same package).
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | awk '!seen[$0]++')

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "setup: missing system packages: ${missing[*]}" >&2
    echo "setup: run as root:  sudo sh -c '$cmd'" >&2
    exit 1
  fi
fi

# The rustup targets (each target file's Rust targets) are added by `cargo xtask setup`,
# which reads targets/*.toml.

# The test matrix and `cargo xtask ci` run tests with cargo-nextest (a crates.io package).
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: cargo install cargo-nextest --locked" >&2
  cargo install cargo-nextest --locked >&2
fi

# The full-system QEMU rows' kernels: the image of the kernel package a metapackage such as
# linux-image-amd64 depends on, unpacked once (a marker says it is complete).
if ((${#kernels[@]})); then
  if [[ -z $kernel_dir ]]; then
    echo "setup: --kernel needs --kernel-dir DIR" >&2
    exit 2
  fi
  mkdir -p "$kernel_dir"
fi
for meta in "${kernels[@]}"; do
  name=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
  if [[ -z $name ]]; then
    echo "setup: apt-cache names no kernel package that $meta depends on; run apt-get update" >&2
    exit 1
  fi
  if [[ ! -e $kernel_dir/$name/.unpacked ]]; then
    echo "setup: fetching $name (apt-get download) into $kernel_dir/$name" >&2
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -q "$name" >&2)
    rm -rf "${kernel_dir:?}/$name"
    dpkg-deb -x "$tmp"/*.deb "$kernel_dir/$name"
    rm -rf "$tmp"
    touch "$kernel_dir/$name/.unpacked"
  fi
  images=("$kernel_dir/$name"/boot/vmlinuz-*)
  if [[ ! -f ${images[0]} ]]; then
    echo "setup: $name has no boot/vmlinuz-* in $kernel_dir/$name" >&2
    exit 1
  fi
  ln -sfn "${images[0]}" "$kernel_dir/current"
done

if ! $wine; then
  echo "setup: ok" >&2
  exit 0
fi
# Wine 8 lacks bcryptprimitives.dll!ProcessPrng, which Rust std >= 1.78 imports (exit 53).
# Build a stand-in with mingw and put it into the prefix; nothing is downloaded.
export WINEPREFIX="${WINEPREFIX:-$HOME/.wine-cpjit}"
export WINEDEBUG=-all
dll="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
if [[ ! -f "$WINEPREFIX/system.reg" || ! -f "$dll" ]]; then
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  echo "setup: creating wine prefix $WINEPREFIX" >&2
  if ! wineboot -i >"${TMPDIR:-/tmp}/cpjit-wineboot.log" 2>&1; then
    echo "setup: wineboot -i failed for $WINEPREFIX; see ${TMPDIR:-/tmp}/cpjit-wineboot.log" >&2
    exit 1
  fi
  wineserver -w
  tmp=$(mktemp -d)
  x86_64-w64-mingw32-gcc -O2 -shared -o "$tmp/bcryptprimitives.dll" \
    "$here/wine/bcryptprimitives.c" -ladvapi32
  mkdir -p "$(dirname "$dll")"
  cp "$tmp/bcryptprimitives.dll" "$dll"
  rm -rf "$tmp"
fi
echo "setup: ok" >&2
