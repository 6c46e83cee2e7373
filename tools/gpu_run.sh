#!/usr/bin/env bash
# On a bare GPU machine: unpack tools/gpu_pack.py's archives and run benchmarks/gpu_check.py, in one command.
# PACK: where the archives are (default build/gpu-pack in this checkout); DEST: where they unpack (default
# /tmp/byoc-gpu); PY: the Python (default python3); OUT: where the JSON goes (default $DEST/out). Relative paths
# are the caller's. Arguments go to gpu_check.py.
# Nothing is lost: the archives unpack into a fresh folder in $DEST, whose site/ replaces $DEST/site only once
# whole, and only where an earlier unpack made $DEST/site (it leaves .unpacked-by-gpu_run there); nothing else in
# $DEST is touched, and an OUT or PACK inside $DEST/site is refused. The last run's $OUT/gpu_check.json is kept as
# gpu_check.<its time>.json.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=${PACK:-$ROOT/build/gpu-pack}
DEST=${DEST:-/tmp/byoc-gpu}
PY=${PY:-python3}
OUT=${OUT:-$DEST/out}
MARK=.unpacked-by-gpu_run
fail() { echo "error: $1. Fix: $2." >&2; exit 1; }
for d in "$DEST" "$OUT"; do  # before the unpack, which replaces $DEST/site
  [ ! -e "$d" ] || [ -d "$d" ] || fail "$d is not a folder" "pass DEST and OUT folders (or leave them out)"
done
if [ -e "$DEST/site" ] && [ ! -f "$DEST/site/$MARK" ]; then
  fail "$DEST/site holds no $MARK, so no earlier unpack made it, and this one would replace it" \
    "move $DEST/site away, or pass another DEST"
fi
SITE=$(realpath -m -- "$DEST/site")
case "$(realpath -m -- "$OUT")/" in "$SITE"/*)
  fail "OUT=$OUT is inside $DEST/site, which the unpack replaces" \
    "pass an OUT outside it (or leave it out: $DEST/out)";;
esac
case "$(realpath -m -- "$PACK")/" in "$SITE"/*)
  fail "PACK=$PACK is inside $DEST/site, which the unpack replaces" \
    "move the archives out of $DEST/site, and pass PACK=<the folder they are in>";;
esac
command -v "$PY" >/dev/null || fail "PY=$PY is not a program here" "pass PY=/path/to/python3 (or leave it out: python3)"
# A folder of its own in $DEST for the unpack, and OUT, made before anything else (mkdir and mktemp say why not).
NEW=$(mkdir -p -- "$DEST" 2>&1 && mktemp -d "$DEST/unpack.XXXXXX" 2>&1) ||
  fail "cannot write in DEST=$DEST (${NEW##*: })" "pass a DEST you can write in (or leave it out: /tmp/byoc-gpu)"
trap 'rm -rf "$NEW"' EXIT  # a failed unpack
WHY=$(mkdir -p -- "$OUT" 2>&1) ||
  fail "cannot write in OUT=$OUT (${WHY##*: })" "pass an OUT you can write in (or leave it out: $DEST/out)"
# The archives are there, and they and the tree fit one call: the tree may have grown since they were packed.
"$PY" "$ROOT/tools/gpu_pack.py" --check --out "$PACK"
# Unpacked by Python's own lzma and tarfile (the machine needs no xz); a damaged archive stops here, $DEST as it was.
"$PY" - "$PACK" "$NEW" "$MARK" <<'PY'
import glob, lzma, os, shutil, sys, tarfile
pack, new, mark = sys.argv[1:]
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
with open(f"{new}/site/{mark}", "w") as f:  # what lets the next run replace this site/
    f.write(f"unpacked by tools/gpu_run.sh from {os.path.abspath(pack)}\n")
PY
if [ -e "$DEST/site" ]; then mv "$DEST/site" "$NEW/replaced"; fi  # an earlier unpack (checked above), removed with $NEW
mv "$NEW/site" "$DEST/site"
rm -rf "$NEW"
export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
BYOC_WORKBENCH_CACHE=$(realpath -m -- "$DEST/cache")
export BYOC_WORKBENCH_CACHE
# TVM's CUDA runtime links libcudart.so.13: where PyTorch's CUDA wheels keep it (nvidia/cu13/lib), if they do.
NV_LIBS=$("$PY" -c 'import os, nvidia
print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))
               if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null || true)
export LD_LIBRARY_PATH="${NV_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The machine's own CUDA compiler, where it is not on PATH (measure/compiler/cuda.py also looks in /usr/local/cuda*).
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/nvcc" ] && export PATH="$PATH:$d" && break; done
if [ -e "$OUT/gpu_check.json" ]; then
  mv -n "$OUT/gpu_check.json" "$OUT/gpu_check.$(date -r "$OUT/gpu_check.json" +%Y%m%d-%H%M%S.%N).json"
fi
echo "unpacked in $DEST; $("$PY" --version); the JSON goes to $OUT/gpu_check.json"
# exec: a SIGTERM to this script reaches the check, which says so in one line.
PYTHONUNBUFFERED=1 exec "$PY" "$ROOT/benchmarks/gpu_check.py" --out "$OUT/gpu_check.json" "$@"
