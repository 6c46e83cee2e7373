#!/usr/bin/env bash
# On a bare GPU machine: unpack tools/gpu_pack.py's archives and run benchmarks/gpu_check.py, in one command.
# PACK: where the archives are (default build/gpu-pack); DEST: where they unpack (default /tmp/byoc-gpu);
# PY: the Python (default python3); OUT: where the JSON goes (default $DEST/out). Arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=${PACK:-build/gpu-pack}
DEST=${DEST:-/tmp/byoc-gpu}
PY=${PY:-python3}
for part in tvm-compiler.so.xz site.tar.xz; do
  [ -f "$PACK/$part" ] || { echo "error: $PACK/$part is missing. Fix: run tools/gpu_pack.py and carry $PACK."; exit 1; }
done
rm -rf "$DEST" && mkdir -p "$DEST"
tar -xJf "$PACK/site.tar.xz" -C "$DEST"
xz -dc "$PACK/tvm-compiler.so.xz" > "$DEST/site/tvm/lib/libtvm_compiler.so"
export PYTHONPATH="$DEST/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export BYOC_WORKBENCH_CACHE="$DEST/cache"
# The machine's own CUDA compiler, where it is not on PATH (measure/cuda.py also looks in /usr/local/cuda*).
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$PATH:$d" && break; done
OUT=${OUT:-$DEST/out}
mkdir -p "$OUT"
echo "unpacked in $DEST; $($PY --version), numpy $($PY -c 'import numpy; print(numpy.__version__)')"
PYTHONUNBUFFERED=1 "$PY" benchmarks/gpu_check.py --exports "$DEST/exports" --out "$OUT/gpu_check.json" "$@"
