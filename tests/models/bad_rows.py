"""The rows of tests/models/test_bad_inputs*.py: the user files, the directory holding every row's
files, and the checks each row makes (no traceback, one error line, nothing written)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import bad_models
import numpy as np
from messages import one_line
from PIL import Image

MODEL = """
from tvm.script import ir as I, relax as R
from tvm.relax.dpl import is_op, wildcard
from byoc_workbench.flow.rules import op_rule, pattern_rule


@I.ir_module
class Mine:
    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((8, 4), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y


mod = Mine
"""
MATMUL_RELU = 'is_op("relax.nn.relu")(is_op("relax.matmul")(wildcard(), wildcard()))'

# User files: name -> source. MODEL plus a tail, unless the source stands alone.
FILES = {
    "mine.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.matmul")]\n',
    "syntax.py": "x = = 1\n",
    "notes.txt": "my notes, which no result may replace\n",
    "raises.py": "x = 1\nraise RuntimeError('boom')\n",
    "imports.py": "import nothing_here_at_all\n",
    "exit0.py": "import sys\nsys.exit(0)\n",
    "exit3.py": "import sys\nsys.exit(3)\n",
    "no_mod.py": "y = 2\n",
    "mod5.py": "mod = 5\n",
    "primfunc.py": textwrap.dedent("""
        from tvm.script import ir as I
        from tvm.script import tirx as T

        @I.ir_module
        class M:
            @T.prim_func
            def main(a: T.Buffer((4,), "float32")):
                a[0] = T.float32(1)

        mod = M
    """),
    "no_main.py": MODEL.replace("def main(", "def other("),
    "bad_shapes.py": MODEL.replace('w: R.Tensor((8, 4), "float32")', 'w: R.Tensor((3, 4), "float32")'),
    "rules5.py": MODEL + "rules = 5\n",
    "rules_ints.py": MODEL + "rules = [1, 2]\n",
    "rules_one.py": MODEL + 'rules = op_rule("mychip", "mm", "relax.matmul")\n',
    "rules_dup.py": MODEL
    + 'rules = [op_rule("mychip", "mm", "relax.matmul"), op_rule("mychip", "mm", "relax.nn.relu")]\n',
    "rules_dup_table.py": MODEL + 'rules = [op_rule("byoc-target", "add", "relax.nn.relu")]\n',
    "unknown_op.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.no_such_op")]\n',
    "not_pattern.py": MODEL + 'rules = [pattern_rule("mychip", "mm", "relax.matmul")]\n',
    "check5.py": MODEL + 'rules = [op_rule("mychip", "mm", "relax.matmul", check=5)]\n',
    "check_raises.py": MODEL
    + 'def picky(call):\n    return 1 / 0\n\n\nrules = [op_rule("mychip", "mm", "relax.matmul", check=picky)]\n',
    "pattern_raises.py": MODEL
    + "def picky(call):\n    raise KeyError('layout')\n\n\n"
    + f'rules = [pattern_rule("mychip", "mr", {MATMUL_RELU}, check=picky)]\n',
    "check_raises_ours.py": MODEL
    + "from byoc_workbench.core.errors import WorkbenchError\n\n\n"
    + "def picky(call):\n    raise WorkbenchError('Nested cause', 'nested fix')\n\n\n"
    + 'rules = [op_rule("mychip", "mm", "relax.matmul", check=picky)]\n',
    "empty_name.py": MODEL + 'rules = [op_rule("mychip", "", "relax.matmul")]\n',
    "sleepy.py": "import time\nprint('ready', flush=True)\ntime.sleep(60)\n",
}


def picture(path: Path, h: int, w: int) -> None:
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


def rows_dir(tmp_path_factory):
    """One directory holding every row's files; rows write (or must not write) under it."""
    root = tmp_path_factory.mktemp("bad")
    for name, source in FILES.items():
        (root / name).write_text(source)
    (root / "a_file").write_text("not a directory")
    (root / "a_dir").mkdir()
    (root / "cwd").mkdir()
    (root / "empty.jpg").write_bytes(b"")
    (root / "text.jpg").write_text("hello, not a picture\n" * 20)
    picture(root / "pic.png", 40, 60)
    (root / "half.png").write_bytes((root / "pic.png").read_bytes()[:60])
    (root / "garbage.params").write_bytes(b"\x00\x01 not mxnet parameters" * 10)
    (root / "loop_a").symlink_to(root / "loop_b")  # a symlink loop
    (root / "loop_b").symlink_to(root / "loop_a")
    os.link(root / "pic.png", root / "pic_again.png")  # the picture by a second name (a hard link)
    os.mkfifo(root / "pipe.onnx")  # a FIFO as a model: reading it would wait for a writer
    (root / "linked").mkdir()  # an --out folder whose summary.json links to the model it is made from
    (root / "linked" / "summary.json").symlink_to(root / "relu.onnx")
    blocked = root / "blocked"  # a stage file's name taken by a directory
    (blocked / "03-merge.svg").mkdir(parents=True)
    (blocked / "profile.json").mkdir()
    bad_models.write_all(root)  # ONNX files, PyTorch modules and codegen files
    sys.path.insert(0, str(root))  # so that --torch bad_torch_...:f imports from here
    yield root
    sys.path.remove(str(root))


def snapshot(root: Path) -> dict:
    """Every file, link and directory under ``root``, with size and modification time (Python's own caches aside;
    a link as itself, so that a loop is a row too)."""
    return {
        str(p.relative_to(root)): (p.is_dir(), p.lstat().st_size if p.is_file() else 0, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
        if "__pycache__" not in p.parts
    }


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and 'File "' not in text, text[-2000:]


def the_line(err: str) -> str:
    """The one error line: every other stderr line is a warning or a progress bar, none is a second error."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, err
    return one_line(errors[0])
