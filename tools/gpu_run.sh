#!/usr/bin/env bash
# On a bare GPU machine: unpack tools/gpu_pack.py's archives and run benchmarks/gpu_check.py, in one command.
# PACK: where the archives are (default build/gpu-pack in this checkout); DEST: where they unpack (default
# /tmp/byoc-gpu); PY: the Python the pack is for (gpu_pack.py --python, 3.12 by default), another refused before the
# unpack (default python3); OUT: where the JSON goes (default $DEST/out). --help says so, and gpu_check's options.
# Relative paths are the caller's. Arguments go to gpu_check.py, checked before the unpack; --out is not one of them:
# the JSON goes to $OUT/gpu_check.json (pass OUT= for another folder).
# Nothing is lost: the archives unpack into a fresh folder in $DEST, whose site/ replaces $DEST/site only once
# whole, and only where an earlier unpack made $DEST/site (it leaves .unpacked-by-gpu_run there); nothing else in
# $DEST is touched, and an OUT or PACK inside $DEST/site is refused. The last run's $OUT/gpu_check.json is kept as
# gpu_check.<its time>.json (or <its time>-N, where that is taken). It makes nothing (DEST, OUT, their parents)
# before its checks pass, and removes what it made on a failure: the folders only where empty, as another run at once
# may be unpacking there. Ctrl-C, SIGTERM or SIGHUP (a closed terminal), to it or to its group, stops it in one line,
# exit 130, 143 or 129.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=${PACK:-$ROOT/build/gpu-pack}
DEST=${DEST:-/tmp/byoc-gpu}
PY=${PY:-python3}
OUT=${OUT:-$DEST/out}
# Relative paths made absolute here, in the caller's folder: a name that starts with - is then no command's option.
for v in PACK DEST OUT; do [[ ${!v} = /* ]] || printf -v "$v" %s "$PWD/${!v}"; done
MARK=.unpacked-by-gpu_run
fail() { echo "error: $1. Fix: $2." >&2; exit 1; }
# The unpack runs in the background, so that a signal to this script alone stops it at once (bash runs a trap only
# once a command in the foreground is done): it is handed SIGTERM whichever signal came (bash starts a background
# command with SIGINT ignored, so an INT reaching it before its handler is set would change nothing), the unpack
# removes what it made, and this script says the one line (the unpack's own, for a signal the terminal sent both, is
# in $LOG, unsaid).
# Nothing in it may end it before its line (set +e): the unpack may be gone already (the same signal ended it, and
# bash reaped it), and kill then fails.
stop() {
  set +e
  trap '' INT TERM HUP
  if [ -n "${UNPACKING:-}" ]; then kill -s TERM "$UNPACKING" 2>/dev/null; wait "$UNPACKING" 2>/dev/null; fi
  echo "$1; nothing was measured." >&2
  exit "$2"
}
trap 'stop interrupted 130' INT
trap 'stop terminated 143' TERM
trap 'stop "hung up" 129' HUP
# The brief checks in Python ignore a Ctrl-C the terminal sends the group (Python starts with no handler for a signal
# ignored before it starts): they end at once, and this script's trap says the one line, with no traceback.
checking() { (trap '' INT TERM HUP; exec "$PY" "$@"); }
command -v "$PY" >/dev/null || fail "PY=$PY is not a program here" "pass PY=/path/to/python3 (or leave it out: python3)"
# The checks below are calls of $PY: a program that is no Python (true, false, ls) would pass them, or fail in its
# own words. The word printed proves the line ran; head ends a program that prints for ever (yes).
IS=$(checking -c 'import sys; print("python" if sys.version_info >= (3, 10) else "old")' </dev/null 2>/dev/null |
  head -n 1) || true
[ "$IS" = python ] || fail "PY=$PY is not a Python 3.10 or later" "pass PY=/path/to/python3 (or leave it out: python3)"
# gpu_check's arguments as gpu_run takes them (its --out refused: gpu_run sets it), said wrong now, not after minutes,
# each with gpu_run's --help for a fix. What it prints is its help (-h, --help, --he...), which lists no --out: said
# with gpu_run's own usage, and nothing more is done.
HELP=$(checking "$ROOT/benchmarks/gpu_check_args.py" "$@")
if [ -n "$HELP" ]; then
  cat <<'EOF'
usage: [PACK=<folder>] [DEST=<folder>] [OUT=<folder>] [PY=<python>] bash tools/gpu_run.sh [gpu_check.py's options]
Unpacks tools/gpu_pack.py's archives and runs benchmarks/gpu_check.py on them, in one command.
  PACK  the folder of the archives (default: build/gpu-pack in this checkout)
  DEST  where they unpack, as DEST/site (default: /tmp/byoc-gpu)
  OUT   the folder of the check's JSON, OUT/gpu_check.json (default: DEST/out)
  PY    the Python that runs it, the one the pack is for (gpu_pack.py --python; default: python3)
The other arguments go to gpu_check.py:
EOF
  printf '%s\n' "$HELP" | awk '/^ *-/ { keep = 1 } /^  / && keep'  # its options, each with its lines
  exit 0
fi
[ ! -e "$PACK" ] || [ -d "$PACK" ] || fail "PACK=$PACK is a file, not the folder of the archives" \
  "pass PACK=<the folder tools/gpu_pack.py wrote> (or leave it out: $ROOT/build/gpu-pack)"
# gpu_check_args's answer for a path ($2), in the standard library alone: resists (immutable or append-only, as
# gpu_check finds its JSON: nothing in it could be replaced or removed) or stuck_under (that, for all in a folder).
ask() { checking -c 'import sys; sys.path.insert(0, sys.argv[1]); import gpu_check_args as a
print(getattr(a, sys.argv[2])(sys.argv[3]))' "$ROOT/benchmarks" "$@"; }
# The first folder that making $1 makes ($1 or a parent), nothing where $1 is there: removed again on a failure.
first_missing() { [ ! -e "$1" ] && [ ! -L "$1" ] || return 0; local d=$1
  while [ ! -e "$(dirname -- "$d")" ] && [ ! -L "$(dirname -- "$d")" ]; do d=$(dirname -- "$d"); done; echo "$d"; }
# Nothing is made before every check has passed: DEST and OUT are made by the unpack and after it. Each ($2, named
# $1) must be a folder, or be made in one, that can be written and whose files can be replaced and removed (neither
# immutable nor append-only), as a failure leaves it as it was; else pass $3 ... (or leave it out: $4).
writable() {
  [ ! -e "$2" ] || [ -d "$2" ] || fail "$2 is not a folder" "pass DEST and OUT folders (or leave them out)"
  [ -e "$2" ] || [ ! -L "$2" ] || fail "$1=$2 is a link to $(readlink -- "$2"), which leads nowhere" \
    "remove the link, or pass another $1 (or leave it out: $4)"
  local in=$2 stuck why
  [ -e "$2" ] || in=$(dirname -- "$(first_missing "$2")")
  stuck=$(ask resists "$in")
  [ -z "$stuck" ] || fail "$in is $stuck, so what is written in it cannot be replaced or removed" \
    "run chattr -i -a $in, or pass other DEST and OUT folders"
  why=$(mktemp -p "$in" .probe.XXXXXX 2>&1) && rm -f -- "$why" ||
    fail "cannot write in $1=$2 (${why##*: })" "pass $3 you can write in (or leave it out: $4)"
}
writable DEST "$DEST" "a DEST" /tmp/byoc-gpu
writable OUT "$OUT" "an OUT" "$DEST/out"
if [ -L "$DEST/site" ]; then
  fail "$DEST/site is a link to $(readlink -- "$DEST/site"), which the unpack would replace with a folder" \
    "move the link away, or pass another DEST"
elif [ -e "$DEST/site" ] && [ ! -f "$DEST/site/$MARK" ]; then
  fail "$DEST/site holds no $MARK, so no earlier unpack made it, and this one would replace it" \
    "move $DEST/site away, or pass another DEST"
elif [ -e "$DEST/site" ]; then  # found now, not once the unpack is done: what is in it could not be removed
  STUCK=$(ask stuck_under "$DEST/site")
  [ -z "$STUCK" ] || fail "$STUCK, so the last unpack in $DEST/site cannot be replaced" \
    "run chattr -R -i -a $DEST/site, or pass another DEST"
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
# The last run's JSON, moved aside once the unpack is done: what would stop that is said now.
JSON=$OUT/gpu_check.json
if [ -L "$JSON" ] && [ ! -e "$JSON" ]; then
  fail "$JSON is a link to $(readlink -- "$JSON"), which leads nowhere" "remove the link, or pass another OUT"
elif [ -e "$JSON" ] && [ ! -f "$JSON" ]; then
  fail "$JSON is not a plain file, where the check writes its JSON" "move it away, or pass another OUT"
elif [ -f "$JSON" ] && [ ! -L "$JSON" ]; then
  STUCK=$(ask resists "$JSON")
  [ -z "$STUCK" ] || fail "$JSON is $STUCK, so it cannot be moved aside" "run chattr -i -a $JSON, or pass another OUT"
fi
# Until the check starts, a failure or a signal removes what this run made: the unpack's folder, and DEST and OUT
# (with their parents) where they were not there, each while empty (a run beside this one may be unpacking there).
MADE=("$(first_missing "$DEST")" "$(first_missing "$OUT")")
unmake() { local d=$1; [ -n "$2" ] || return 0
  while rmdir -- "$d" 2>/dev/null && [ "$d" != "$2" ]; do d=$(dirname -- "$d"); done; }
NEW=$(mktemp -u "$DEST/unpack.XXXXXX")
LOG=$(mktemp 2>&1) || fail "cannot make a temporary file in TMPDIR=${TMPDIR:-/tmp} (${LOG##*: })" \
  "pass TMPDIR=<a folder you can write in>${TMPDIR:+ (or leave it out: /tmp)}"
trap 'rm -rf -- "$NEW" "$LOG"; unmake "$OUT" "${MADE[1]}"; unmake "$DEST" "${MADE[0]}"' EXIT
# DEST made here, not by the unpack, which would remove it on a failure, a run beside this one's unpack in it.
WHY=$(mkdir -p -- "$DEST" 2>&1) || fail "cannot make DEST=$DEST (${WHY##*: })" "pass a DEST you can write in"
# The archives are there, and they and the tree fit one call (the tree may have grown since they were packed); then
# unpacked into $NEW, which it makes, by Python's own lzma and tarfile (the machine needs no xz): a damaged archive,
# or one with anything but plain files and folders in it, stops here, $DEST and the last JSON as they were.
"$PY" "$ROOT/tools/gpu_pack.py" --out "$PACK" --unpack "$NEW" --dest "$DEST" 2>"$LOG" &
UNPACKING=$!
STATUS=0 && wait "$UNPACKING" || STATUS=$?
UNPACKING=
cat -- "$LOG" >&2
[ "$STATUS" = 0 ] || exit "$STATUS"
echo "unpacked by tools/gpu_run.sh from $(realpath -ms -- "$PACK")" >"$NEW/site/$MARK"  # lets the next run replace it
if [ -e "$DEST/site" ]; then mv "$DEST/site" "$NEW/replaced"; fi  # an earlier unpack (checked above), removed with $NEW
mv "$NEW/site" "$DEST/site"
rm -rf -- "$NEW"
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
WHY=$(mkdir -p -- "$OUT" 2>&1) || fail "cannot make OUT=$OUT (${WHY##*: })" "pass an OUT you can write in"
# Under a name no file has (mv -n moves nothing where one has, and may exit 0 all the same): checked after the move.
if [ -e "$JSON" ]; then
  STAMP=$OUT/gpu_check.$(date -r "$JSON" +%Y%m%d-%H%M%S.%N) ASIDE=$STAMP.json N=1
  while [ -e "$ASIDE" ] || [ -L "$ASIDE" ]; do ASIDE=$STAMP-$N.json N=$((N + 1)); done
  WHY=$(mv -n -- "$JSON" "$ASIDE" 2>&1) || true
  WHY=${WHY##*: }
  [ ! -e "$JSON" ] && [ ! -L "$JSON" ] ||
    fail "cannot move the last run's $JSON aside (${WHY:-$ASIDE was taken meanwhile})" "pass another OUT"
fi
echo "unpacked in $DEST; $("$PY" --version); the JSON goes to $JSON"
# exec: a SIGTERM to this script reaches the check, which says so in one line. The EXIT trap never runs after it.
rm -f -- "$LOG"
PYTHONUNBUFFERED=1 exec "$PY" "$ROOT/benchmarks/gpu_check.py" --out="$JSON" "$@"
