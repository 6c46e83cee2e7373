"""Which Graphviz lays out the diagrams: the wheel wherever it is installed, the system's dot without it, a
one-line error with neither; each one really lays out a diagram. And doctor's lines about what pip cannot install."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest

from byoc_workbench import doctor
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.draw import renderers

SYSTEM_DOT = shutil.which("dot")
SMALL = 'digraph G { data [id="main/data"]; conv [id="main/conv" label="nn.conv2d"]; data -> conv }'


def has_wheel() -> bool:
    try:
        return importlib.metadata.distribution(renderers.WHEEL) is not None
    except importlib.metadata.PackageNotFoundError:
        return False


def nodes(svg: str) -> set:
    return set(re.findall(r'<g id="([^"]+)" class="node"', svg))


@pytest.fixture
def no_wheel(monkeypatch):
    """As where the graphviz-pure wheel is not installed."""
    monkeypatch.setattr(renderers, "FINDERS", tuple(f for f in renderers.FINDERS if f is not renderers._wheel))


@pytest.mark.parametrize("find", renderers.FINDERS, ids=lambda find: find.__name__.strip("_"))
def test_each_renderer_there_is_lays_out_a_diagram(find):
    renderer = find() or pytest.skip(f"no {find.__name__.strip('_')} here")
    assert re.fullmatch(r"\d+\.\d+\.\d+", renderer.version), renderer
    svg = renderers.lay_out(SMALL, "svg", renderer)
    assert nodes(svg) == {"main/data", "main/conv"} and ">nn.conv2d</text>" in svg
    assert f"graphviz version {renderer.version}" in svg
    with pytest.raises(RuntimeError, match=f"{renderer.name} could not lay out"):
        renderers.lay_out("digraph { a -> {{ b", "svg", renderer)


@pytest.mark.skipif(not has_wheel(), reason="the graphviz-pure wheel is not installed")
def test_the_wheel_is_chosen_with_or_without_dot_on_path(monkeypatch, tmp_path):
    with_dot = renderers.chosen()
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no dot, and no venv bin folder, on PATH
    without = renderers.chosen()
    assert with_dot == without and without.name == renderers.WHEEL and without.version == "16.1.0"
    assert [r.name for r in renderers.available()] == [renderers.WHEEL]
    assert nodes(renderers.lay_out(SMALL)) == {"main/data", "main/conv"}


@pytest.mark.skipif(SYSTEM_DOT is None, reason="no system dot on PATH")
def test_without_the_wheel_the_system_dot_lays_out(no_wheel):
    renderer = renderers.chosen()
    assert (renderer.name, renderer.path) == (renderers.DOT, SYSTEM_DOT)
    assert nodes(renderers.lay_out(SMALL)) == {"main/data", "main/conv"}


def test_with_neither_the_error_names_the_fix(no_wheel, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert renderers.chosen() is None and renderers.available() == []
    with pytest.raises(WorkbenchError) as err:
        renderers.lay_out(SMALL)
    assert err.value.fix == renderers.install_fix() and "pip install graphviz-pure" in err.value.fix
    check = doctor.check_graphviz()
    assert not check.ok and check.fix == renderers.install_fix()


@pytest.mark.slow  # over 10 s: `make test` and `make test-slow` run it, not test-fast
def test_a_fresh_process_chooses_the_same(tmp_path):
    """In a process of its own, nothing cached: the wheel wherever it is installed, whatever PATH says."""
    code = "from byoc_workbench.draw import renderers; r = renderers.chosen(); print(r.name if r else None)"
    expected = renderers.WHEEL if has_wheel() else None
    for path in ("/usr/bin:/bin", str(tmp_path)):
        env = dict(os.environ, PATH=path)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        dot = renderers.DOT if path != str(tmp_path) and SYSTEM_DOT else "None"
        assert out.stdout.strip() == (expected or dot), (path, out.stderr)


def test_doctor_says_which_graphviz_lays_out(capsys):
    used = renderers.chosen()
    if used is None:
        pytest.skip("no Graphviz here")
    check = doctor.check_graphviz()
    assert check.ok and check.info["renderer"] == {"name": used.name, "version": used.version, "path": used.path}
    assert check.found.startswith(f"Graphviz {used.version} from {used.name} ")
    assert "graphviz" in doctor.NEEDS[doctor.PART1]


@pytest.mark.parametrize(
    ("platform", "cc", "chromium"),
    [
        ("linux", "sudo apt-get install gcc", "sudo apt-get install chromium"),
        ("darwin", "xcode-select --install", "run on Linux only"),
        ("win32", "winget install", "run on Linux only"),
    ],
)
def test_what_pip_cannot_install_is_one_command_for_this_os(monkeypatch, tmp_path, platform, cc, chromium):
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(doctor, "CHROMIUM", str(tmp_path / "no-chromium"))
    check = doctor.check_chromium()
    assert not check.ok and chromium in check.fix and "\n" not in check.fix
    if platform == "win32":  # shutil.which, which finds the compiler, would take this for Windows
        monkeypatch.undo()
        assert cc in doctor.SYSTEM_INSTALL["cc"][platform]
        return
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_cc()
    assert not check.ok and check.fix == doctor.SYSTEM_INSTALL["cc"][platform] and cc in check.fix
