#!/usr/bin/env bash
# Installs what pip cannot: a C compiler (the c codegen, notebook 04) and Chromium (browser tests).
# No Graphviz: pip installs one (graphviz-pure, requirements.txt) for every Python and system.
# As root on Debian/Ubuntu it uses apt-get; elsewhere it says what to install.
set -u
missing=()
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
# Debian splits venv/ensurepip out of python3 itself.
[ -n "$python" ] && ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 && missing+=(python3-venv)
[ -n "${CC:-}" ] || command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || missing+=(gcc)
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing ${missing[*]} with apt-get..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null && exit 0
  echo "warning: apt-get install ${missing[*]} failed." >&2
fi
for m in "${missing[@]}"; do
  case $m in
    gcc) echo "No C compiler: the c codegen (notebook 04) cannot build. Install one: sudo apt-get install gcc | xcode-select --install or brew install gcc | conda install -c conda-forge compilers" >&2 ;;
    chromium) echo "Chromium is missing: the browser tests will be skipped. Install it: sudo apt-get install chromium" >&2 ;;
    python3-venv) echo "Python's venv module is missing. Install it: sudo apt-get install python3-venv (or python3.11-venv)" >&2 ;;
  esac
done
# venv is needed to set up at all; the compiler only for notebook 04, chromium only for browser tests.
[ -z "$python" ] || "$python" -c 'import ensurepip, venv' >/dev/null 2>&1 || exit 1
exit 0
