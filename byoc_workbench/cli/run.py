"""``import`` (a zoo model into Relax, described as JSON) and ``run`` (a model, checked against its
own framework)."""

from __future__ import annotations

import io

import numpy as np

from byoc_workbench import workflow
from byoc_workbench.backends.codegen import resolve_backend
from byoc_workbench.cli import earlier
from byoc_workbench.cli.refs import model_ref
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure.bench import byom
from byoc_workbench.measure.check.compare import as_list
from byoc_workbench.subjects import ModelRef, load


def cmd_import(args) -> int:
    print(text.to_json(workflow.import_summary(model_ref(args, args.what, ("zoo",)))))
    return 0


def cmd_run(args) -> int:
    if args.what == "demo":
        raise WorkbenchError(
            "run checks a model against the framework it came from, and the demo was written in Relax",
            "byoc-workbench compare demo runs it offloaded and checks it against TVM alone",
        )
    save = (
        output_paths.check_file(
            args.save_outputs, "--save-outputs", output_paths.read_paths(args), earlier.SAVED_OUTPUTS
        )
        if args.save_outputs is not None
        else None
    )
    args.backend = resolve_backend(args.backend)
    ref = model_ref(args, args.what, ("zoo", "onnx", "torch"))
    # A zoo model's outputs are read as its task reads them; your own model's are checked against its framework.
    return (_run_own if ref.model.checked else _run_zoo)(args, save, ref)


def _run_zoo(args, save, ref: ModelRef) -> int:
    """``run`` of a zoo model: what it found, as its task reads it, through ``--backend`` (mxnet: the Gluon block)."""
    result = workflow.run(ref, backend=args.backend, progress=True)
    print(f"{ref.name} on {args.backend}: {result.summary()} — {result.weights_label}")
    print(f"ran on: {result.backend}")
    for note in result.notes:
        print(f"  {note}")
    if save is not None:
        buffer = io.BytesIO()
        np.savez(buffer, **result)
        files.write_file(save, buffer.getvalue())
        print(f"saved {', '.join(result)} to {save}")
    return 0


def _run_own(args, save, ref: ModelRef) -> int:
    """``run`` of an ONNX file or ``--torch``: exit 1 when the outputs differ from the framework's."""
    if args.backend == "mxnet":
        raise WorkbenchError("--backend mxnet runs GluonCV models only", "use tvm, onnxruntime, tensorrt or auto")
    result = byom.run(load(ref).workbench, args.backend, progress=True)
    print(byom.run_text(result))
    if save:
        outputs = as_list(result["outputs"])  # one output is one array: each saved whole, never row by row
        buffer = io.BytesIO()
        np.savez(buffer, **{f"output{k}": o for k, o in enumerate(outputs)})
        files.write_file(save, buffer.getvalue())
        print(f"saved {len(outputs)} output{'s' if len(outputs) != 1 else ''} to {save}")
    return 0 if result["check"]["equal"] else 1
