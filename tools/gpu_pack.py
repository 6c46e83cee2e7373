"""Pack what a bare GPU machine lacks for benchmarks/gpu_check.py into archives that travel in one call.

The GPU machine this project is lent (Python 3.12, numpy 2, PyTorch, no MXNet,
no network) takes at most 64 MiB per call, the working tree included. TVM's
wheel is 100 MB and its compiler library 259 MB unpacked, so:

- ``tvm-compiler.so.xz``: the compiler library alone, xz with the x86 filter (about 58 MB);
- ``site.tar.xz``: the rest of the apache-tvm and apache-tvm-ffi wheels for that Python (without
  CUTLASS's headers, TVM's C++ sources and the web runtime), and the models exported without MXNet
  (:mod:`byoc_workbench.models.portable`), a few MB.

The workbench itself travels in the working tree, its shipped zoo with it. Run here (no MXNet needed)::

    .venv/bin/python tools/gpu_pack.py            # writes build/gpu-pack/, prints the call

then, on the GPU machine, ``bash tools/gpu_run.sh`` unpacks both and runs the check (the device tool:
``run(command="bash tools/gpu_run.sh", carry=["build/gpu-pack"])``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 1 << 20
WHEELS = ("apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.15.post2")
COMPILER = "tvm/lib/libtvm_compiler.so"
LEFT_OUT = ("tvm/3rdparty/", "tvm/web/", "tvm/src/")  # headers for CUTLASS, C++ sources, the wasm runtime
MODELS = ("ssd_512_resnet50_v1_coco",)


def download(python: str, into: Path) -> list:
    """TVM's two wheels for ``python`` (e.g. 3.12) on x86-64 Linux, from the package index (kept in ``into``)."""
    into.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", python, "--implementation", "cp", "-d", str(into)]
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux2014_x86_64"):
        cmd += ["--platform", tag]
    subprocess.run([*cmd, *WHEELS], check=True)
    found = []
    for spec in WHEELS:
        stem = spec.split("==")[0].replace("-", "_")
        wheels = sorted(into.glob(f"{stem}-{spec.split('==')[1]}-*.whl"))
        if not wheels:
            raise SystemExit(f"error: pip saved no wheel for {spec}. Fix: check the package index is reachable.")
        found.append(wheels[-1])
    return found


def pack_compiler(tvm_wheel: Path, out: Path) -> Path:
    """The compiler library, xz-compressed with the x86 filter; kept while the wheel is the same."""
    target = out / "tvm-compiler.so.xz"
    stamp = out / "tvm-compiler.sha256"
    digest = hashlib.sha256(tvm_wheel.read_bytes()).hexdigest()
    if target.exists() and stamp.exists() and stamp.read_text() == digest:
        return target
    print(f"compressing {COMPILER} (a few minutes)...", file=sys.stderr)
    with zipfile.ZipFile(tvm_wheel) as z:
        data = z.read(COMPILER)
    filters = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    target.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, filters=filters))
    stamp.write_text(digest)
    return target


def pack_site(wheels: list, exports: Path, out: Path) -> Path:
    """The wheels' files but the compiler (and what the check never reads), and the model exports."""
    target = out / "site.tar.xz"
    with tarfile.open(target, "w:xz", preset=9) as tar:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    name = info.filename
                    if info.is_dir() or name == COMPILER or name.startswith(LEFT_OUT) or ".dist-info/" in name:
                        continue
                    member = tarfile.TarInfo(f"site/{name}")
                    data = z.read(info)
                    member.size = len(data)
                    member.mode = 0o755 if name.endswith(".so") or ".so." in name else 0o644
                    tar.addfile(member, io.BytesIO(data))
        tar.add(exports, arcname="exports")
    return target


def tree_bytes() -> int:
    """What the working tree adds to a call: tracked and untracked files that git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return sum((ROOT / n).stat().st_size for n in listed.decode().split("\0") if n and (ROOT / n).is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-pack")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python (default 3.12)")
    parser.add_argument("--models", default=",".join(MODELS), help="zoo models to export (comma-separated)")
    parser.add_argument("--limit-mib", type=float, default=64.0, help="what one call may carry (default 64)")
    args = parser.parse_args(argv)
    from byoc_workbench.models import portable

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    exports = out / "exports"
    for name in filter(None, args.models.split(",")):
        print(f"exporting {name}...", file=sys.stderr)
        portable.export(name, exports / name)
    wheels = download(args.python, out / "wheels")
    parts = [pack_compiler(wheels[0], out), pack_site(wheels, exports, out)]
    carried = sum(p.stat().st_size for p in parts)
    tree = tree_bytes()
    for p in parts:
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size / MIB:.1f} MiB")
    print(f"working tree: {tree / MIB:.1f} MiB; in all {(carried + tree) / MIB:.1f} MiB of {args.limit_mib:g}")
    if carried + tree > args.limit_mib * MIB:
        print(f"error: one call cannot carry {(carried + tree) / MIB:.1f} MiB. Fix: export fewer models.")
        return 1
    rel = out.relative_to(ROOT)
    print(f'run(command="PACK={rel} bash tools/gpu_run.sh", carry=["{rel}/tvm-compiler.so.xz", "{rel}/site.tar.xz"])')
    return 0


if __name__ == "__main__":
    sys.exit(main())
