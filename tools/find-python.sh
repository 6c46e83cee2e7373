#!/bin/sh
# Prints the newest Python among the versions given (e.g. 3.13 3.12 3.11 3.10) that runs here: pythonX.Y on
# PATH, then pyenv's installed versions (whose shims refuse a version that is not selected), then python3
# if it is one of them. Prints nothing when there is none. POSIX sh, for Linux and macOS.
for v in "$@"; do
  root=$(pyenv root 2>/dev/null)
  for p in $(command -v "python$v") ${root:+$(ls -d "$root"/versions/"$v"*/bin/python"$v" 2>/dev/null)} \
           /usr/local/bin/python"$v" /opt/homebrew/bin/python"$v" $(command -v python3); do
    if [ -x "$p" ] && "$p" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" \
      2>/dev/null; then
      echo "$p"
      exit 0
    fi
  done
done
