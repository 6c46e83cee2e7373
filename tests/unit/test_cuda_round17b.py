"""Builds stopped and built at once, careless-user round 17 (area C): an nvcc stopped (its time limit, Ctrl-C,
SIGTERM) left its ``tmpxft_*`` files, 2.2 MB a build, in ``$TMPDIR`` (finding 1); two threads building at once
stopped on TVM's ``nested op_tag is not allowed for now``, its lowering keeping state of the process (finding 2)."""

import os
import tempfile
import threading

import numpy as np
import pytest
from test_cuda_round15 import _real_nvcc  # siblings: pytest puts this folder on sys.path
from test_cuda_round17 import KERNEL

from byoc_workbench.measure.compiler import compiled, execute, nvcc
from byoc_workbench.models import demo


@pytest.mark.parametrize("stop", ["time limit", "Ctrl-C"])
def test_a_stopped_nvcc_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch, stop):
    """Finding 1: nvcc writes its intermediates in ``$TMPDIR``, and killed it never removes them. It is stopped while
    the host compiler it runs (a gcc that waits, first on PATH) preprocesses the kernels, its first files written."""
    real, temporary, tools = _real_nvcc(), tmp_path / "temporary", tmp_path / "tools"
    temporary.mkdir()
    tools.mkdir()
    reached = tmp_path / "gcc ran"
    interrupt = f"kill -INT {os.getpid()}\n" if stop == "Ctrl-C" else ""
    gcc = tools / "gcc"
    gcc.write_text(f'#!/bin/sh\ntouch "{reached}"\n{interrupt}exec sleep 60\n')
    gcc.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tools), os.environ["PATH"]]))
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read again from TMPDIR
    if stop == "Ctrl-C":
        with pytest.raises(KeyboardInterrupt):
            nvcc.fatbin(real.path, KERNEL, "sm_90", 600)
    else:
        assert nvcc.fatbin(real.path, KERNEL, "sm_90", 3).status is None  # stopped at its limit
    assert reached.exists()  # nvcc had begun: its tmpxft_* files were written
    assert list(temporary.iterdir()) == []


def test_threads_build_at_once():
    """Finding 2: TVM's TE keeps the tag of the op it builds (``TagScope``) for the process, not the thread; two
    threads lowering at once found each other's. Raced a few times: one round alone may not overlap."""
    mod, inputs = demo.demo_module(), demo.demo_inputs()
    want = execute.run(mod, inputs)
    for _ in range(3):
        built, failed = _built_at_once(mod, 2)
        assert failed == [] and len(built) == 2
        for executable in built:
            got = execute.run(mod, inputs, vm=execute.virtual_machine(executable))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _built_at_once(mod, count: int) -> tuple:
    """``(executables, errors)`` of ``count`` threads that compile ``mod`` for llvm at once, none from the cache."""
    start, built, failed = threading.Barrier(count), [], []

    def build():
        start.wait()
        try:
            built.append(execute.compile(mod))
        except Exception as err:  # the thread's failure, asserted by the caller
            failed.append(err)

    threads = [threading.Thread(target=build) for _ in range(count)]
    with compiled.refresh():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return built, failed


@pytest.fixture(autouse=True)
def _no_kernel_dump(monkeypatch):
    """nvcc's files where TVM keeps them (``TVM_KERNEL_DUMP``) would be kept on purpose."""
    monkeypatch.delenv("TVM_KERNEL_DUMP", raising=False)
