#!/usr/bin/env bash
# Fetches the peers the GPU benchmark compares with, for the device machine (no network there):
#   .whl/    flash-linear-attention 0.6.0 + fla-core (pure Python wheels; device.sh installs them)
#   .peers/qla-site.tar.xz   FlashQLA 0.1.3 with tilelang, apache-tvm-ffi, z3-solver and
#            torch-c-dlpack-ext, unpacked from their wheels into one site-packages folder (about
#            50 MB packed; device.sh's bench step unpacks it and puts it on PYTHONPATH)
# Both folders are ignored by git; carry them: carry [".whl", ".peers"] (with .deps for builds).
# Run on a machine with PyPI access, from the repository root; takes a few minutes (xz).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.peers/' .git/info/exclude 2>/dev/null || echo '/.peers/' >>.git/info/exclude
PLATFORMS=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 \
  manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64 any; do
  PLATFORMS+=(--platform "$p")
done
# The device's Python is 3.12.
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --abi cp312 --abi abi3 --abi none "${PLATFORMS[@]}" "$@"; }
mkdir -p .whl
dl -d .whl flash-linear-attention==0.6.0 fla-core==0.6.0
tmp=$(mktemp -d)
# tilelang 0.1.15 pins apache-tvm-ffi < 0.1.13 and z3-solver < 4.15.5.
dl -d "$tmp/whl" flash-qla==0.1.3 tilelang==0.1.15 "apache-tvm-ffi<0.1.13,>=0.1.11" "z3-solver<4.15.5,>=4.13.0" \
  torch-c-dlpack-ext
mkdir -p "$tmp/site" .peers
for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" "$tmp/site"; done
rm -rf "$tmp"/site/*.data  # z3's command-line binary: not needed, 22 MB
tar -C "$tmp/site" -cf - . | xz -T0 -6 >.peers/qla-site.tar.xz
rm -rf "$tmp"
ls -la .whl .peers
