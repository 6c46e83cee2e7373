"""``import`` (a zoo model into Relax, described as JSON) and ``run`` (a model, checked against its
own framework)."""

# The floors a command runs are imported inside it: at the top, they would make every command and
# `byoc-workbench --help` take seconds longer to import (pyproject.toml: per-file-ignores).

from __future__ import annotations

import io

import numpy as np

from byoc_workbench import files, text
from byoc_workbench.cli.args import BACKEND_HELP, ZOO_HELP, model_ref
from byoc_workbench.errors import WorkbenchError


def cmd_import(args) -> int:
    from byoc_workbench import workflow

    summary = workflow.import_summary(model=model_ref(args, args.what, ("zoo",)).name, weights=args.weights)
    print(text.to_json(summary))
    return 0


def cmd_run(args) -> int:
    import numpy as np

    from byoc_workbench import workflow
    from byoc_workbench.backends.codegen import resolve_backend

    if args.what == "demo":
        raise WorkbenchError(
            "run checks a model against the framework it came from, and the demo was written in Relax",
            "byoc-workbench compare demo runs it offloaded and checks it against TVM alone",
        )
    save = files.check_file(args.save_outputs, "--save-outputs") if args.save_outputs is not None else None
    args.backend = resolve_backend(args.backend)
    ref = model_ref(args, args.what, ("zoo", "onnx", "torch"))
    if ref.kind != "zoo":
        return _run_own(args, save, ref)
    model = ref.name
    result = workflow.run(model=model, weights=args.weights, image=args.image, backend=args.backend, progress=True)
    print(f"{model} on {args.backend}: {result.summary()} — {result.weights_label}")
    print(f"ran on: {result.backend}")
    for note in result.notes:
        print(f"  {note}")
    if save is not None:
        buffer = io.BytesIO()
        np.savez(buffer, **result)
        files.write_file(save, buffer.getvalue())
        print(f"saved {', '.join(result)} to {save}")
    return 0


def _run_own(args, save, ref) -> int:
    """``run`` of an ONNX file or ``--torch``: exit 1 when the outputs differ from the framework's."""
    from byoc_workbench import subjects
    from byoc_workbench.measure.bench import byom
    from byoc_workbench.measure.check.compare import as_list

    if args.backend == "mxnet":
        raise WorkbenchError("--backend mxnet runs GluonCV models only", "use tvm, onnxruntime, tensorrt or auto")
    wb = subjects.load(ref).workbench
    result = byom.run(wb, args.backend, progress=True)
    print(byom.run_text(result))
    if save:
        outputs = as_list(result["outputs"])  # one output is one array: each saved whole, never row by row
        buffer = io.BytesIO()
        np.savez(buffer, **{f"output{k}": o for k, o in enumerate(outputs)})
        files.write_file(save, buffer.getvalue())
        print(f"saved {len(outputs)} output{'s' if len(outputs) != 1 else ''} to {save}")
    return 0 if result["check"]["equal"] else 1


def add_import(command) -> None:
    i = command("import", "import a GluonCV model into Relax and print its summary as JSON", cmd_import, "zoo")
    i.add_argument("what", help=ZOO_HELP)
    # The summary is what import prints; the flag stays because scripts, docs and tests pass it.
    i.add_argument("--summary", action="store_true", help="print the JSON summary (what import always prints)")


def add_run(command) -> None:
    r = command("run", "run a model and check it against its own framework", cmd_run, "zoo", "image", "own")
    r.add_argument("what", nargs="?", help=ZOO_HELP + ", or a .onnx file (or give --torch)")
    r.add_argument(
        "--backend",
        default="tvm",
        help=f"mxnet (the Gluon block), {BACKEND_HELP}. tvm: TVM alone; the others: the TensorRT subgraphs "
        "they can compile offloaded through them, TVM for the rest (auto: TensorRT where it runs, else ONNX Runtime)",
    )
    r.add_argument("--save-outputs", help="write the outputs (ids, scores and boxes for a detector) to this .npz file")
