#!/usr/bin/env bash
# On a bare GPU machine: unpack tools/gpu_pack.py's archives and run benchmarks/gpu_check.py, in one command.
# PACK: where the archives are (default build/gpu-pack); DEST: where they unpack (default /tmp/byoc-gpu);
# PY: the Python (default python3); OUT: where the JSON goes (default $DEST/out). Arguments go to gpu_check.py.
# Nothing is lost: the archives unpack into a fresh folder in $DEST, whose site/ replaces $DEST/site only once whole
# (nothing else in $DEST is touched; an OUT inside $DEST/site is refused), and the last run's $OUT/gpu_check.json
# is kept as gpu_check.<its time>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=${PACK:-build/gpu-pack}
DEST=${DEST:-/tmp/byoc-gpu}
PY=${PY:-python3}
OUT=${OUT:-$DEST/out}
for d in "$DEST" "$OUT"; do  # before the unpack, which replaces $DEST/site
  [ ! -e "$d" ] || [ -d "$d" ] || { echo "error: $d is not a folder. Fix: pass DEST and OUT folders (or leave them out)." >&2; exit 1; }
done
case "$(realpath -m "$OUT")/" in "$(realpath -m "$DEST/site")"/*)
  echo "error: OUT=$OUT is inside $DEST/site, which the unpack replaces. Fix: pass an OUT outside it (or leave it out: $DEST/out)." >&2; exit 1;;
esac
command -v "$PY" >/dev/null || { echo "error: PY=$PY is not a program here. Fix: pass PY=/path/to/python3 (or leave it out: python3)." >&2; exit 1; }
# The archives are there, and they and the tree fit one call: the tree may have grown since they were packed.
"$PY" tools/gpu_pack.py --check --out "$PACK"
mkdir -p "$DEST"
NEW=$(mktemp -d "$DEST/unpack.XXXXXX")
trap 'rm -rf "$NEW"' EXIT  # a failed unpack
# Unpacked by Python's own lzma and tarfile (the machine needs no xz); a damaged archive stops here, $DEST as it was.
"$PY" - "$PACK" "$NEW" <<'PY'
import glob, lzma, os, shutil, sys, tarfile
pack, new = sys.argv[1:]
cut = [p for p in glob.glob(f"{pack}/tvm-libs.tar.xz.*of*") if p.rpartition(".")[2].replace("of", "", 1).isdecimal()]
cut.sort(key=lambda p: int(p.rpartition(".")[2].partition("of")[0]))
if cut:  # the pieces several calls carried, joined (gpu_pack.py --check found them all)
    with open(f"{new}/tvm-libs.tar.xz", "wb") as whole:
        for piece in cut:
            with open(piece, "rb") as f:
                shutil.copyfileobj(f, whole, 1 << 24)
for part in ("site.tar.xz", f"{new}/tvm-libs.tar.xz" if cut else "tvm-libs.tar.xz"):
    path = part if part.startswith(new) else f"{pack}/{part}"
    try:
        with tarfile.open(path) as tar:
            tar.extractall(new, filter="data")
    except (OSError, EOFError, lzma.LZMAError, tarfile.TarError) as err:
        why = " ".join(f"{type(err).__name__}: {err}".split())
        sys.exit(f"error: cannot unpack {path} ({why}). Fix: run tools/gpu_pack.py again and carry what it prints.")
if not os.path.isdir(f"{new}/site"):  # checked before the last unpack is moved aside
    sys.exit(f"error: the archives in {pack} hold no site/ folder. Fix: run tools/gpu_pack.py again and carry what it prints.")
PY
if [ -e "$DEST/site" ]; then mv "$DEST/site" "$NEW/replaced"; fi  # then removed with $NEW
mv "$NEW/site" "$DEST/site"
rm -rf "$NEW"
export PYTHONPATH="$DEST/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export BYOC_WORKBENCH_CACHE="$DEST/cache"
# TVM's CUDA runtime links libcudart.so.13: where PyTorch's CUDA wheels keep it (nvidia/cu13/lib), if they do.
NV_LIBS=$("$PY" -c 'import os, nvidia
print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))
               if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null || true)
export LD_LIBRARY_PATH="${NV_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The machine's own CUDA compiler, where it is not on PATH (measure/compiler/cuda.py also looks in /usr/local/cuda*).
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$PATH:$d" && break; done
mkdir -p "$OUT"
if [ -e "$OUT/gpu_check.json" ]; then
  mv -n "$OUT/gpu_check.json" "$OUT/gpu_check.$(date -r "$OUT/gpu_check.json" +%Y%m%d-%H%M%S.%N).json"
fi
echo "unpacked in $DEST; $("$PY" --version); the JSON goes to $OUT/gpu_check.json"
# exec: a SIGTERM to this script reaches the check, which says so in one line.
PYTHONUNBUFFERED=1 exec "$PY" benchmarks/gpu_check.py --out "$OUT/gpu_check.json" "$@"
