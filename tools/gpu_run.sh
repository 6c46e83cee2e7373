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
# Unpacked by Python's own lzma and tarfile: the machine needs no xz.
"$PY" - "$PACK" "$DEST" <<'EOF'
import lzma, shutil, sys, tarfile
pack, dest = sys.argv[1:]
with tarfile.open(f"{pack}/site.tar.xz") as tar:
    tar.extractall(dest, filter="data")
with lzma.open(f"{pack}/tvm-compiler.so.xz") as src, open(f"{dest}/site/tvm/lib/libtvm_compiler.so", "wb") as out:
    shutil.copyfileobj(src, out, 1 << 24)
EOF
export PYTHONPATH="$DEST/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export BYOC_WORKBENCH_CACHE="$DEST/cache"
# TVM's CUDA runtime links libcudart.so.13: where PyTorch's CUDA wheels keep it (nvidia/cu13/lib), if they do.
NV_LIBS=$("$PY" -c 'import os, nvidia
print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))
               if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null || true)
export LD_LIBRARY_PATH="${NV_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The machine's own CUDA compiler, where it is not on PATH (measure/build/cuda.py also looks in /usr/local/cuda*).
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$PATH:$d" && break; done
OUT=${OUT:-$DEST/out}
mkdir -p "$OUT"
echo "unpacked in $DEST; $("$PY" --version), numpy $("$PY" -c 'import numpy; print(numpy.__version__)')"
PYTHONUNBUFFERED=1 "$PY" benchmarks/gpu_check.py --exports "$DEST/exports" --out "$OUT/gpu_check.json" "$@"
