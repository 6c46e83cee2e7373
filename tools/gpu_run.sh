#!/usr/bin/env bash
# On a bare GPU machine: unpack tools/gpu_pack.py's archives and run benchmarks/gpu_check.py, in one command.
# PACK: where the archives are (default build/gpu-pack in this checkout); DEST: where they unpack (default
# /tmp/byoc-gpu); PY: the Python (default python3); OUT: where the JSON goes (default $DEST/out). Relative paths
# are the caller's. Arguments go to gpu_check.py, checked before the unpack; --out is not one of them: the JSON goes
# to $OUT/gpu_check.json (pass OUT= for another folder).
# Nothing is lost: the archives unpack into a fresh folder in $DEST, whose site/ replaces $DEST/site only once
# whole, and only where an earlier unpack made $DEST/site (it leaves .unpacked-by-gpu_run there); nothing else in
# $DEST is touched, and an OUT or PACK inside $DEST/site is refused. The last run's $OUT/gpu_check.json is kept as
# gpu_check.<its time>.json. Ctrl-C or SIGTERM stops it in one line, exit 130 or 143.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=${PACK:-$ROOT/build/gpu-pack}
DEST=${DEST:-/tmp/byoc-gpu}
PY=${PY:-python3}
OUT=${OUT:-$DEST/out}
MARK=.unpacked-by-gpu_run
fail() { echo "error: $1. Fix: $2." >&2; exit 1; }
# A Python it runs says its own line for a signal, and ends with the shell's status for it ($? here): said once.
stop() { local said=$?; trap '' INT TERM; [ "$said" = "$2" ] || echo "$1; nothing was measured." >&2; exit "$2"; }
trap 'stop interrupted 130' INT
trap 'stop terminated 143' TERM
command -v "$PY" >/dev/null || fail "PY=$PY is not a program here" "pass PY=/path/to/python3 (or leave it out: python3)"
"$PY" "$ROOT/benchmarks/gpu_check_args.py" "$@" >/dev/null  # gpu_check's arguments, said wrong now, not after minutes
# immutable or append-only (chattr), as gpu_check finds its JSON: nothing in it could be replaced or removed
resists() { "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from gpu_check_args import resists
print(resists(sys.argv[2]))' "$ROOT/benchmarks" "$1"; }
for d in "$DEST" "$OUT"; do  # before the unpack, which replaces $DEST/site
  [ ! -e "$d" ] || [ -d "$d" ] || fail "$d is not a folder" "pass DEST and OUT folders (or leave them out)"
  STUCK=$(resists "$d")
  [ -z "$STUCK" ] || fail "$d is $STUCK, so what is written in it cannot be replaced or removed" \
    "run chattr -i -a $d, or pass other DEST and OUT folders"
done
if [ -L "$DEST/site" ]; then
  fail "$DEST/site is a link to $(readlink -- "$DEST/site"), which the unpack would replace with a folder" \
    "move the link away, or pass another DEST"
elif [ -e "$DEST/site" ] && [ ! -f "$DEST/site/$MARK" ]; then
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
# A folder of its own in $DEST for the unpack, and OUT, made before anything else (mkdir and mktemp say why not).
NEW=$(mkdir -p -- "$DEST" 2>&1 && mktemp -d "$DEST/unpack.XXXXXX" 2>&1) ||
  fail "cannot write in DEST=$DEST (${NEW##*: })" "pass a DEST you can write in (or leave it out: /tmp/byoc-gpu)"
trap 'rm -rf "$NEW"' EXIT  # a failed unpack
WHY=$(mkdir -p -- "$OUT" 2>&1 && mktemp -p "$OUT" .probe.XXXXXX 2>&1) && rm -f -- "$WHY" ||
  fail "cannot write in OUT=$OUT (${WHY##*: })" "pass an OUT you can write in (or leave it out: $DEST/out)"
# The last run's JSON, moved aside once the unpack is done: what would stop that is said now.
JSON=$OUT/gpu_check.json
if [ -L "$JSON" ] && [ ! -e "$JSON" ]; then
  fail "$JSON is a link to $(readlink -- "$JSON"), which leads nowhere" "remove the link, or pass another OUT"
elif [ -e "$JSON" ] && [ ! -f "$JSON" ]; then
  fail "$JSON is not a plain file, where the check writes its JSON" "move it away, or pass another OUT"
elif [ -f "$JSON" ] && [ ! -L "$JSON" ]; then
  STUCK=$(resists "$JSON")
  [ -z "$STUCK" ] || fail "$JSON is $STUCK, so it cannot be moved aside" "run chattr -i -a $JSON, or pass another OUT"
fi
# The archives are there, and they and the tree fit one call (the tree may have grown since they were packed); then
# unpacked into $NEW by Python's own lzma and tarfile (the machine needs no xz): a damaged archive, or one with
# anything but plain files and folders in it, stops here, $DEST and the last JSON as they were.
"$PY" "$ROOT/tools/gpu_pack.py" --out "$PACK" --unpack "$NEW"
echo "unpacked by tools/gpu_run.sh from $(realpath -ms -- "$PACK")" >"$NEW/site/$MARK"  # lets the next run replace it
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
if [ -e "$JSON" ]; then
  WHY=$(mv -n -- "$JSON" "$OUT/gpu_check.$(date -r "$JSON" +%Y%m%d-%H%M%S.%N).json" 2>&1) ||
    fail "cannot move the last run's $JSON aside (${WHY##*: })" "pass another OUT"
fi
echo "unpacked in $DEST; $("$PY" --version); the JSON goes to $JSON"
# exec: a SIGTERM to this script reaches the check, which says so in one line.
PYTHONUNBUFFERED=1 exec "$PY" "$ROOT/benchmarks/gpu_check.py" --out "$JSON" "$@"
