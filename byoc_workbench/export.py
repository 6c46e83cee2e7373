"""Executed notebooks as HTML that can be read without a kernel, e.g. after a workshop or offline.

Each notebook is executed with its widgets' state stored in it, then written
as ``.ipynb`` (widgets and all, for Jupyter) and ``.html``. A static HTML page would draw widgets with a
widget manager fetched from a CDN, which an offline machine cannot reach, and a widget's controls need
its kernel anyway; so in the page each widget is replaced by a static copy of what it showed when the
notebook ran: its diagrams (``svg`` state), pictures, tables, labels and the outputs it held (the zoo
chooser's last pick). Diagrams the notebook displays itself are inline SVG already.

``byoc-workbench export --out build notebooks/*.ipynb`` (:mod:`byoc_workbench.cli.export`) is what
``make demo`` runs.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import html
import json
import logging
import os
import re
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from byoc_workbench.core import files, output_paths
from byoc_workbench.core.errors import WorkbenchError, first_line, whole_number

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC_CLASS = "byoc-static-diagram"
_REF = re.compile(r"IPY_MODEL_([0-9a-f]+)")
_PROLOGUE = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?(<!--.*?-->\s*)*", re.S)


def execute(path: str | Path, timeout: int = 1800) -> nbformat.NotebookNode:
    """The notebook at ``path``, executed in its own folder with its widgets' state stored in its metadata.

    Raises
    ------
    WorkbenchError
        For a path that is not a notebook (:func:`read_notebook`), or a ``timeout`` that is no whole number of
        seconds (0: no limit).
    CellFailed
        For a cell that raises, runs past ``timeout`` seconds, or kills its kernel.
    """
    from nbclient.exceptions import CellControlSignal, CellExecutionError, CellTimeoutError, DeadKernelError

    nb, path, seconds = read_notebook(path), Path(path), _seconds(timeout)
    started = []
    client = _client_class()(
        nb,
        timeout=seconds,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=lambda cell, cell_index: started.append(cell_index),
        log=logging.Logger("nbclient", logging.CRITICAL),  # it logs each timeout or dead kernel: CellFailed says it
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # its warning on every start, that TCP is not encrypted
    )
    try:
        _run(client)
    except CellTimeoutError:
        where = f"{path}, cell {started[-1] + 1} of {len(nb.cells)}"
        raise CellFailed(
            f"{where} ran past the timeout of {seconds} seconds per cell",
            f"raise --timeout (timeout= in Python) above {seconds}, or make it 0 for no limit",
        ) from None
    except (CellExecutionError, CellControlSignal, DeadKernelError) as err:
        raise CellFailed.of(path, started[-1] + 1, len(nb.cells), err) from None
    return nb


def _client_class() -> type:
    """nbclient's ``NotebookClient``, but a kernel whose cell ran past its timeout is killed at once: asked to shut
    down under that cell, it dies printing a traceback (a ZMQError of its reply, on a socket closed)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    class Client(NotebookClient):
        async def async_execute_cell(self, *args, **kwargs):
            try:
                return await super().async_execute_cell(*args, **kwargs)
            except CellTimeoutError:
                self.shutdown_kernel = "immediate"
                raise

    return Client


def _run(client) -> None:
    """``client.execute()`` in a thread of its own, cancelled by a KeyboardInterrupt (Ctrl-C, SIGTERM) here.

    In the main thread nbclient handles both signals itself: it shuts the kernel down under the running cell and
    carries on, and its own cleanup then fails with a traceback (status 1). In another thread it sets no handler,
    so the command's (:class:`~byoc_workbench.core.signals.Stop`) raise here, and the kernel is shut down (its
    connection file removed) before the KeyboardInterrupt goes on.
    """
    loop = asyncio.new_event_loop()
    running = loop.create_task(_execute(client))
    pool = ThreadPoolExecutor(1)
    try:
        pool.submit(loop.run_until_complete, running).result()
    except KeyboardInterrupt:
        client.shutdown_kernel = "immediate"
        loop.call_soon_threadsafe(running.cancel)
        raise
    finally:
        pool.shutdown()
        loop.close()


async def _execute(client) -> None:
    """``client.async_execute()``, then what a cancelled one leaves behind stopped: its kernel, nbclient's tasks
    that watch it, and nbclient's cleanup at exit.

    nbclient registers that cleanup (``atexit``) as the kernel starts and unregisters it after its own cleanup;
    cancelled as the kernel starts or in that cleanup, the cleanup at exit stays, and fails on the kernel manager
    gone (``assert self.km is not None``, after the command's last line). So it runs here, and never at exit.
    """
    try:
        await client.async_execute()
    finally:
        if client.km is not None:
            await client._async_cleanup_kernel()
        atexit.unregister(client._cleanup_kernel)
        rest = asyncio.all_tasks() - {asyncio.current_task()}
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)


def _path(value, name: str, what: str = "a notebook (.ipynb)") -> Path:
    """``value``, a str or a path, as a Path; else a one-line error naming the argument ``name``."""
    if not isinstance(value, (str, os.PathLike)):
        raise WorkbenchError(
            f"{name} is the path of {what}; got {type(value).__name__} ({value!r:.40})",
            f"pass {name} as a str or a pathlib.Path",
        )
    if not str(value).strip():  # Path("") is the working folder
        raise WorkbenchError(f"{name} is empty", f"pass {name} the path of {what}")
    return Path(value)


def _seconds(timeout) -> int:
    """``timeout``, seconds per cell (0: no limit, as nbclient reads it), or a one-line error."""
    seconds = whole_number(timeout)
    if seconds is None or seconds < 0:
        raise WorkbenchError(
            f"timeout is a whole number of seconds per cell, 0 or more; got {type(timeout).__name__} ({timeout!r:.40})",
            "pass timeout=1800 (the default), or 0 for no limit",
        )
    return seconds


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, checked; a one-line error for anything else (missing, a folder, a FIFO or a
    device, which would be waited on or read without end, not JSON)."""
    path = _path(path, "path")
    fix = "pass the path of a notebook (.ipynb)"
    if path.is_dir():
        raise WorkbenchError(f"{path} {output_paths.not_a_file(path)}", f"pass its notebooks: {path / '*.ipynb'}")
    if not path.is_file():
        raise WorkbenchError(f"{path} {output_paths.not_a_file(path)}", fix)
    if path.suffix != ".ipynb":
        raise WorkbenchError(f"{path} is not a notebook (its name does not end in .ipynb)", fix)
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 - nbformat raises a different kind for each way a file is not a notebook
        raise WorkbenchError(f"{path} is not a notebook nbformat can read: {first_line(err)}", fix) from None
    return nb


class CellFailed(WorkbenchError):
    """A notebook cell that raised, ran too long or killed its kernel: exit status 1."""

    status = 1

    @classmethod
    def of(cls, path: Path, number: int, cells: int, err: Exception) -> CellFailed:
        """The one line for ``err``: the cell's own error line where it raised a WorkbenchError."""
        where = f"{path}, cell {number} of {cells}"
        fix = f"open {path} in Jupyter and run cell {number} to see its traceback"
        ename, evalue = getattr(err, "ename", None), (getattr(err, "evalue", None) or "").strip()
        said = WorkbenchError.from_line(evalue)  # the kernel's WorkbenchError, as its line
        if said is not None:
            return cls(f"{where}: {said.cause}", said.fix)
        if ename:  # what the cell raised: its type and the last line of its message
            return cls(f"{where} raised {ename}" + (f": {evalue.splitlines()[-1]}" if evalue else ""), fix)
        return cls(f"{where}: {first_line(err)}", fix)  # a kernel that died


def _reachable(state: dict, model_id: str) -> list:
    """``model_id`` and every model it refers to (children, layouts...), depth first."""
    seen, todo = [], [model_id]
    while todo:
        mid = todo.pop()
        if mid in seen or mid not in state:
            continue
        seen.append(mid)
        todo += reversed(_REF.findall(json.dumps(state[mid].get("state", {}))))
    return seen


def for_offline(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` for reading without a kernel or a network.

    SVG outputs become inline ``<svg>`` (HTML exporters otherwise write them as
    base64 images, whose text cannot be searched), and each widget output is
    replaced by a static copy of what it showed (:func:`_shown`).
    """
    nb = copy.deepcopy(nb)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/svg+xml" in data and "text/html" not in data:
                data["text/html"] = _PROLOGUE.sub("", data["image/svg+xml"], count=1)
            view = data.get(WIDGET_VIEW)
            if not view:
                outputs.append(out)
                continue
            parts = [part for mid in _reachable(state, view["model_id"]) for part in _shown(state[mid])]
            outputs.append(_static_output(parts) if parts else out)
        cell.outputs = outputs
    return nb


def _shown(model: dict) -> list:
    """What one widget model showed, as HTML: a diagram, a picture, an HTML text, a label, or an Output
    widget's outputs. Containers and controls show nothing of their own (their children do)."""
    st, name = model.get("state", {}), model.get("state", {}).get("_model_name", "")
    svg = st.get("svg", "")
    if isinstance(svg, str) and svg.lstrip().startswith(("<svg", "<?xml", "<!DOCTYPE")):
        return [_PROLOGUE.sub("", svg, count=1)]
    if name == "ImageModel":
        data = next((b["data"] for b in model.get("buffers", []) if b.get("path") == ["value"]), "")
        return (
            [f'<img src="data:image/{st.get("format", "png")};base64,{data}" style="max-width:100%">'] if data else []
        )
    if name == "HTMLModel" and st.get("value"):
        return [st["value"]]
    if name == "LabelModel" and st.get("value"):
        return [f"<p>{html.escape(st['value'])}</p>"]
    if name == "OutputModel":
        return [_output_html(o) for o in st.get("outputs", [])]
    return []


def _output_html(out: dict) -> str:
    """One output an Output widget held, as HTML: its richest form a page shows without a kernel."""
    data = out.get("data", {})
    if out.get("output_type") == "stream":
        return f"<pre>{html.escape(out.get('text', ''))}</pre>"
    if "text/html" in data:
        return data["text/html"]
    if "image/svg+xml" in data:
        return _PROLOGUE.sub("", data["image/svg+xml"], count=1)
    if "image/png" in data:
        return f'<img src="data:image/png;base64,{data["image/png"]}" style="max-width:100%">'
    if out.get("output_type") == "error":
        return f"<pre>{html.escape(out.get('ename', ''))}: {html.escape(out.get('evalue', ''))}</pre>"
    return f"<pre>{html.escape(data.get('text/plain', ''))}</pre>"


def _static_output(parts: list) -> nbformat.NotebookNode:
    html_text = (
        f'<div class="{STATIC_CLASS}"><p><em>What the widget showed when the notebook ran (a static copy, '
        f"readable without a kernel or a network).</em></p>{''.join(parts)}</div>"
    )
    return nbformat.v4.new_output("display_data", data={"text/html": html_text, "text/plain": "[widget]"})


def to_html(nb: nbformat.NotebookNode) -> str:
    """The notebook as a JupyterLab-styled HTML page, each widget as the static copy of what it showed."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(for_offline(nb))
    return body


def export(paths, out_dir: str | Path, timeout: int = 1800, out_name: str = "out_dir") -> list:
    """Execute each notebook of ``paths`` (a list, or one path) and write ``<out_dir>/<name>.ipynb`` and
    ``<name>.html``; returns the HTML paths. ``out_name`` is how messages name ``out_dir`` (the CLI's ``--out``).

    Every argument is checked before the first notebook runs. A notebook whose cell fails is said in one line
    (on stderr) and the others still run; then :class:`CellFailed` says what was written and what failed.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]  # one notebook: a str is one path, not a list of one-letter ones
    if not isinstance(paths, Iterable):
        raise WorkbenchError(
            f"paths is a list of notebooks' paths; got {type(paths).__name__} ({paths!r:.40})",
            "pass paths=['notebook.ipynb', ...]",
        )
    paths = [_path(p, f"paths[{i}]") for i, p in enumerate(paths)]
    out_dir, timeout = _path(out_dir, out_name, "a folder"), _seconds(timeout)
    for path in paths:
        read_notebook(path)
    names = [p.name for p in paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise WorkbenchError(
            f"two notebooks are named {twice[0]}: one export would replace the other",
            f"export them to separate {out_name} folders",
        )
    outputs = [n for p in paths for n in (p.name, f"{p.stem}.html")]
    out_dir = output_paths.check_dir(out_dir, out_name, names=outputs, inputs=paths)
    written, failed = [], []
    for path in paths:
        try:
            nb = execute(path, timeout)
        except CellFailed as err:
            failed.append(err)
            if len(paths) > 1:
                print(err, file=sys.stderr)
            continue
        html = out_dir / f"{path.stem}.html"
        with files.staged(out_dir) as tmp:  # both or neither, listed as the workbench's: a second export replaces them
            (tmp / path.name).write_text(nbformat.writes(nb), encoding="utf-8")
            (tmp / html.name).write_text(to_html(nb), encoding="utf-8")
        written.append(html)
        print(f"wrote {out_dir / path.name} and {html}")
    if failed and len(paths) == 1:
        raise failed[0]
    if failed:
        done = ", ".join(map(str, written)) or "nothing"
        raise CellFailed(
            f"{len(failed)} of {len(paths)} notebooks failed (see the lines above); wrote {done}",
            "fix the cells those lines name, then export again",
        )
    return written


if __name__ == "__main__":  # how the export was run before it became a subcommand: say so, never exit 0 doing nothing
    print(
        "error: python -m byoc_workbench.export runs nothing. Fix: run byoc-workbench export NOTEBOOK... --out DIR.",
        file=sys.stderr,
    )
    raise SystemExit(2)
