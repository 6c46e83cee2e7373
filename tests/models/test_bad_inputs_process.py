"""Bad inputs that need a real process: ``sys.exit`` inside a user file, Ctrl-C by SIGINT, two runs at
once; and the whole trace on request (the rows of test_bad_inputs.py, bad_rows.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from bad_rows import no_traceback, rows_dir, the_line

from byoc_workbench import cli
from byoc_workbench.core import output_paths


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """One directory holding every row's files (bad_rows.rows_dir)."""
    yield from rows_dir(tmp_path_factory)


def _cli_process(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "byoc_workbench.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_a_user_file_that_exits_0_exits_2(d):
    proc = _cli_process("stages", d / "exit0.py", "--out", d / "exit-out")
    out, err = proc.communicate(timeout=120)
    no_traceback(out, err)
    assert proc.returncode == 2 and "sys.exit(0)" in the_line(err)
    assert not (d / "exit-out").exists()


def test_a_reader_that_stops_reading_ends_the_command_as_a_pipe_would():
    """``report demo --json | head -1``: the reader is gone before the results are written; the command says
    nothing and ends with a shell's status for SIGPIPE (141), never 1, which ``compare`` gives a difference."""
    read, write = os.pipe()
    os.close(read)  # gone before the command writes anything
    proc = subprocess.run(
        [sys.executable, "-m", "byoc_workbench.cli", "report", "demo", "--json"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    os.close(write)
    assert proc.returncode == 128 + signal.SIGPIPE and proc.stderr == "", proc.stderr


def test_results_into_a_full_device_are_one_line():
    """``doctor --json > /dev/full``: the write fails at no fault of the command; no traceback, from it or from a
    child process a library forked (OpenVINO's telemetry, ended as the command exits)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "byoc_workbench.cli", "doctor", "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    no_traceback("", proc.stderr)
    assert proc.returncode == 1
    assert the_line(proc.stderr) == (
        "error: cannot write the results (No space left on device). Fix: free some space, or send them to a file "
        "you can write (> out.txt)."
    )


def test_ctrl_c_is_one_line_exit_130_and_writes_nothing(d):
    proc = _cli_process("stages", d / "sleepy.py", "--out", d / "ctrl-c-out")
    assert proc.stdout.readline().strip() == "ready"  # the user file is loading: interrupt it there
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    no_traceback(out, err)
    assert proc.returncode == 130 and err.strip() == "interrupted; nothing was written."
    assert not (d / "ctrl-c-out").exists()


def test_ctrl_c_while_writing_keeps_the_old_output(tmp_path, capsys, monkeypatch):
    """Interrupted after three of seven diagrams: the old output stays as it was, and the line says so."""
    from byoc_workbench.draw import render

    out = tmp_path / "out"
    assert cli.main(["stages", "demo", "--out", str(out), "--format", "dot"]) == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    real, calls = render.write, []

    def write_then_interrupt(dot, path, fmt="svg"):
        calls.append(path)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(dot, path, fmt)

    monkeypatch.setattr(render, "write", write_then_interrupt)
    assert cli.main(["stages", "demo", "--out", str(out), "--format", "dot", "--rules", ""]) == 130
    out_text, err = capsys.readouterr()
    no_traceback(out_text, err)
    assert err.strip() == "interrupted; nothing was written."
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "no temporary directory is left"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_traceback_flag_and_debug_env_show_the_whole_trace(d, capsys, monkeypatch, how):
    argv = ["stages", str(d / "check_raises.py"), "--out", str(d / "o")]
    if how == "flag":
        argv.append("--traceback")
    else:
        monkeypatch.setenv("BYOC_WORKBENCH_DEBUG", "1")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: division by zero" in err and "check_raises.py" in err
    assert err.rstrip().splitlines()[-1].startswith("error: Rule mychip.mm's check raised ZeroDivisionError")


def test_two_runs_at_once_give_identical_outputs(tmp_path):
    """Concurrency holds: two processes, their own directories and one shared, all complete and equal."""
    env = dict(os.environ, BYOC_WORKBENCH_CACHE=str(tmp_path / "cache"))
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "shared", tmp_path / "shared"]
    procs = [_cli_process("stages", "demo", "--out", o, "--format", "dot", env=env) for o in dirs[:2]]
    procs += [_cli_process("stages", "demo", "--out", o, "--format", "dot", env=env) for o in dirs[2:]]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    contents = [{f.name: f.read_bytes() for f in o.iterdir()} for o in dirs[1:3]]
    first = {f.name: f.read_bytes() for f in dirs[0].iterdir()}
    assert len(first) == 9 and output_paths.WRITTEN in first and all(c == first for c in contents)
    assert json.loads(first["summary.json"])["model"] == "demo"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["a", "b", "shared"]


def test_corrupted_weights_warn_once_and_the_run_finishes(tmp_path, capsys):
    """A .params file whose box-head bias has blown exponents (3e38) loads without error; the run warns."""
    from byoc_workbench.frontends.mxnet_params import write_params
    from byoc_workbench.models import shipped, zoo

    name = "ssd_512_mobilenet1.0_coco"  # the smallest detector of the zoo
    loaded = zoo.load_model(name, "untrained")
    weights = dict(loaded.params)
    bias = "ssd0_convpredictor1_conv0_bias"  # the first box predictor
    weights[bias] = np.full(weights[bias].shape, 3e38, "float32")
    path = tmp_path / "flipped.params"
    write_params(path, {p.key: weights[p.name] for p in shipped.read_shipped(name).used})  # as Block.save_parameters
    save = tmp_path / "out.npz"
    assert (
        cli.main(
            ["run", "ssd", "--backend", "tvm", "--model", name, "--weights", str(path), "--save-outputs", str(save)]
        )
        == 0
    )
    out, err = capsys.readouterr()
    no_traceback(out, err)
    warnings = [ln for ln in err.splitlines() if "non-finite" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: ") and "output boxes" in warnings[0]
    assert str(path) in warnings[0] and "corrupted" in warnings[0]
    assert np.load(save)["boxes"].shape == (1, 100, 4), "the run finished and saved its outputs"
