"""A zoo model's workflow in a few calls: import and summarise it, stage it, offload it, run it.

These are the functions behind ``byoc-workbench import|stages|run MODEL``; the CLI
only parses arguments. Each goes down the layers: :mod:`.models.zoo` loads and
imports (through :func:`.frontends.from_gluon`), :mod:`.subjects` makes the workbench,
:mod:`.stages` partitions and offloads, :mod:`.measure.time.runner` builds and runs, and
:mod:`.models.meaning` says what the outputs mean for the model's task.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import dataclasses
import gc
import logging

import numpy as np
import tvm

from byoc_workbench.backends import registry, tensorrt
from byoc_workbench.core.errors import WorkbenchError, true_or_false
from byoc_workbench.core.transforms import prepare
from byoc_workbench.draw.counts import profile_graph
from byoc_workbench.frontends.gluon import import_mxnet
from byoc_workbench.measure import child
from byoc_workbench.measure.time import runner
from byoc_workbench.models import zoo
from byoc_workbench.models.images import model_input
from byoc_workbench.models.meaning import Prediction, prediction
from byoc_workbench.stages import offload
from byoc_workbench.subjects import ModelRef, model_workbench, zoo_ref  # (the notebooks' workflow.model_workbench)

logger = logging.getLogger(__name__)


#: The model the workflow runs when given none: the SSD of the seed.
SSD = ModelRef(kind="zoo", name=zoo.DEFAULT_MODEL)


class WorkflowError(WorkbenchError):
    """A request a model's workflow cannot serve (an unknown backend, a picture too small)."""


def relax_op_counts(mod) -> dict[str, int]:
    """Count the Relax operator calls in ``mod``, most frequent first."""
    if not isinstance(mod, tvm.IRModule):
        raise WorkflowError(
            f"relax_op_counts counts the ops of a tvm.IRModule, got {type(mod).__name__}",
            "pass a Relax module, e.g. a workbench's wb.mod",
        )
    return dict(profile_graph(mod).rows())


def import_summary(ref: ModelRef | str = SSD) -> dict[str, object]:
    """Import the zoo model ``ref`` names (a :class:`ModelRef` with its weights, or a name:
    :func:`~byoc_workbench.subjects.zoo_ref`) and describe the result.

    Returns
    -------
    dict
        ``{"model", "task", "family", "input_shape", "op_count", "ops": {relax op: count},
        "params": number of scalar weights, "weights": "trained" | "untrained" | path}``.
    """
    ref = zoo_ref(ref)
    imported = zoo.import_model(ref.name, ref.weights)
    ops = relax_op_counts(imported.mod)
    spec = imported.model.spec
    return {
        "model": ref.name,
        "task": spec.task,
        "family": spec.family,
        "input_shape": list(imported.input_shape),
        "op_count": sum(ops.values()),
        "ops": ops,
        "params": int(sum(int(np.prod(a.shape)) for a in imported.params.values())),
        "weights": imported.model.weights,
    }


def run(
    ref: ModelRef | str = SSD,
    backend: str = "tvm",
    progress: bool = False,
    loaded: zoo.LoadedModel | None = None,
) -> Prediction:
    """Run a zoo model on one picture and say what it found, as its task does.

    Parameters
    ----------
    ref : ModelRef or str
        A zoo model (a name or a reference: :func:`~byoc_workbench.subjects.zoo_ref`; default the SSD):
        its ``name``, from :data:`byoc_workbench.models.zoo.MODELS`; its ``weights``, None, "trained",
        "untrained" or a path (see :func:`byoc_workbench.models.zoo.load_model`); its ``image``, a
        JPEG or PNG, None for the default picture (:func:`images.default_image_path`), resized as
        GluonCV's ``load_test`` does and cut to the model's input shape.
    backend : "tvm", "mxnet", or a backend of the registry
        ``tvm``: import into Relax, build for ``llvm`` and run in the Relax VM.
        ``mxnet``: run the Gluon block itself (the reference).
        ``onnxruntime``, ``tensorrt``, ``auto``, ``c``, ... : partition with
        upstream's TensorRT rules (those the backend can compile), prune, and
        offload the subgraphs through that backend (``auto``: TensorRT where it
        can run, else ONNX Runtime); TVM runs the rest.
    progress : bool
        Progress bars on the build and the run.
    loaded : LoadedModel, optional
        An already loaded model, to skip loading.

    Returns
    -------
    Prediction
        The arrays of the model's task (:mod:`byoc_workbench.models.meaning`);
        ``backend`` says what ran.
    """
    _check_backend(backend, also=("mxnet",))
    progress = true_or_false(progress, "progress is True or False", "pass progress=True to show the bars")
    if loaded is not None and not isinstance(loaded, zoo.LoadedModel):
        raise WorkflowError(
            f"loaded must be a zoo.LoadedModel, got {type(loaded).__name__}",
            "pass what zoo.load_model returned, or leave loaded out",
        )
    ref = zoo_ref(ref)
    model = ref.name
    spec = zoo.model_spec(model)
    if backend == "tensorrt":  # fail in a second, before the model is built and imported
        tensorrt.tensorrt_and_gpu()
    x, _ = model_input(ref.image, loaded.input_shape if loaded else spec.input_shape)  # a bad picture fails first
    loaded = loaded or zoo.load_model(model, ref.weights)
    if backend == "mxnet":
        return prediction(spec.task, mxnet_outputs(loaded.block(), x), loaded, "mxnet")
    imported = zoo.import_model(model, loaded=loaded)
    if backend == "tvm":
        what, notes = imported.mod, ()
    else:
        what = offload(prepare(imported.mod), backend)[-1]
        notes = what.notes
    result = runner.build_and_run(what, [x], repeat=1, warmup=0, label=f"{model} on {backend}", progress=progress)
    return prediction(spec.task, result.outputs, loaded, result.backend, notes)


def _check_backend(backend, also=()) -> None:
    """A one-line :class:`WorkflowError` for a backend the registry (or ``also``) does not know."""
    try:
        registry.check_backend(backend, also=also)
    except WorkbenchError as err:
        raise WorkflowError(err.cause, err.fix) from None


def _sayer(say):
    """``say``, or a function that says nothing when it is None; anything else is a one-line error."""
    if say is not None and not callable(say):
        raise WorkflowError(f"say must be a function that takes a line, got {type(say).__name__}", "pass say=print")
    return say or (lambda line: None)


def mxnet_outputs(block, x) -> list:
    """The Gluon block's outputs on ``x``, as numpy arrays."""
    mx = import_mxnet()
    out = block(mx.nd.array(x))
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


#: Why each family partitions as it does for TensorRT's rules, in a sentence (the chooser's caption).
FAMILY_NOTES = {
    "SSD": (
        "The backbone and the class and box heads are one subgraph of convolutions; the anchors' decoding "
        "is slices and concats (and a lone multiply) in small subgraphs with no multiply-accumulate, "
        "which prune sends back to the host, where the NMS already is."
    ),
    "YOLOv3": (
        "TensorRT's pattern table has no LeakyReLU, and YOLOv3 puts one after nearly every convolution: "
        "each stays on the host and cuts the network into a subgraph per convolution, and prune keeps "
        "every piece that holds one, so the host and TensorRT hand tensors back and forth dozens of times."
    ),
    "CenterNet": (
        "Backbone, upsampling and heads are one subgraph; the decoding (top-k peaks, integer division "
        "and modulo, gather) is index arithmetic that TensorRT's rules leave out or that prune returns "
        "to the host."
    ),
    "Faster R-CNN": (
        "The proposal stage (NMS, ROIAlign) runs on the host between two subgraphs of convolutions: "
        "ResNet's first stages over the picture and its last stage over each proposal, and prune keeps both."
    ),
    "FCN": "Every op, bilinear resizing included, is in TensorRT's table: the whole network is one subgraph.",
    "PSPNet": (
        "Pyramid pooling is adaptive average pooling and bilinear resizing, both in TensorRT's table: "
        "the whole network is one subgraph."
    ),
    "DeepLabV3": (
        "ASPP's dilated convolutions and its image pooling are in TensorRT's table: the whole network is one subgraph."
    ),
    "Simple Pose": (
        "A ResNet and three deconvolutions with no post-processing in the graph: one subgraph, nothing pruned."
    ),
    "classification": "A plain stack of convolutions and a dense layer: one subgraph, nothing to prune.",
}
# A model whose family's note does not describe it has its own.
MODEL_NOTES = {
    "mobile_pose_mobilenetv3_small": (
        "A MobileNetV3 backbone and upsampling layers with no post-processing in the graph: every op is in "
        "TensorRT's table, so the whole network is one subgraph, nothing pruned."
    ),
}


@dataclasses.dataclass
class ZooReport:
    """What the notebook's model chooser shows for one model: the pure twin of the widget.

    ``stages`` rows are ``(stage, op count, subgraph count)``; ``subgraphs`` rows are
    ``{"name", "ops", "conv2d", "kept", "top"}`` for the partition stage's subgraphs
    (``kept``: prune left it offloaded); ``run`` is the offloaded build's
    :class:`~byoc_workbench.measure.time.runner.Run` and ``prediction`` its outputs as the task reads them.
    """

    model: str
    task: str
    family: str
    mark: str
    stages: list
    subgraphs: list
    why: str
    run: object
    prediction: Prediction
    picture: np.ndarray

    def without_build(self) -> ZooReport:
        """This report less its build: no VM, no hold on the offloaded subgraphs' symbols, no raw outputs
        (the prediction keeps the arrays the task reads). What is left pickles, and holds no TVM object."""
        generated = {name: dataclasses.replace(c, _hold=None) for name, c in self.run.generated.items()}
        run = dataclasses.replace(self.run, vm=None, call=None, outputs=[], generated=generated)
        return dataclasses.replace(self, run=run)


def release_memory() -> None:
    """Give back what the last model left: its objects collected, and the C heap's free pages handed back to
    the system (glibc keeps them otherwise: after a detector's pick in notebook 06, about 0.5 GB)."""
    gc.collect()
    trim = _libc("malloc_trim")
    if trim is not None:  # glibc only
        trim(0)


def _libc(name: str):
    """The C library's function ``name``, or None where it has none (``malloc_trim`` and ``mallopt`` are glibc's)."""
    libc = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc), name, None) if libc else None


def zoo_report(ref: ModelRef | str, backend: str | None = None, progress: bool = False, say=None) -> ZooReport:
    """Import the zoo model ``ref`` names (a name, or a :class:`ModelRef` with its weights and picture), partition
    it with TensorRT's rules, prune it, run it offloaded; see :class:`ZooReport`.

    ``backend`` defaults to what this machine can run (:func:`byoc_workbench.measure.time.runner.offload_choice`).
    ``say``, if given, is called with a line before each long step (the chooser's progress line).
    """
    say, ref = _sayer(say), zoo_ref(ref)
    if backend is not None:
        _check_backend(backend)
    progress = true_or_false(progress, "progress is True or False", "pass progress=True to show the bars")
    choice = runner.offload_choice()
    model = ref.name
    say(f"importing {model} and partitioning it with TensorRT's rules…")
    wb, imported = model_workbench(ref)
    # The weights live on as the module's constants: their numpy copy goes before the build (DeepLab: 0.2 GB).
    loaded, shape = dataclasses.replace(imported.model, params={}), imported.input_shape
    del imported
    spec = loaded.spec
    stages = [(s.name, s.op_count, len(s.subgraphs)) for s in wb.stages[:-1]]
    kept = {sg.name for sg in wb.stage("prune").subgraphs}
    rows = []
    for sg in wb.stage("partition").subgraphs:
        top = collections.Counter(op.removeprefix("relax.") for op in sg.ops).most_common(3)
        rows.append(
            {
                "name": sg.name,
                "ops": len(sg.ops),
                "conv2d": sum(op.startswith("relax.nn.conv") for op in sg.ops),
                "kept": sg.name in kept,
                "top": ", ".join(f"{op}×{n}" for op, n in top),
            }
        )
    x, picture = model_input(ref.image, shape)
    say(f"building {model}, pruned, with its subgraphs on {backend or choice.backend}, and running it…")
    found = offload(wb.mod, backend or choice.backend, rules=wb.rules)
    run = runner.build_and_run(
        found[-1],
        [x],
        repeat=3,
        tvm_target=choice.tvm_target,
        label="offloaded, pruned",
        mark=wb.mark,
        progress=progress,
    )
    result = prediction(spec.task, run.outputs, loaded, run.backend, found[-1].notes)
    why = MODEL_NOTES.get(model) or FAMILY_NOTES.get(spec.family, "")
    return ZooReport(model, spec.task, spec.family, wb.mark, stages, rows, why, run, result, picture)


def zoo_pick(ref: ModelRef | str, backend: str | None = None, say=None) -> child.ChildResult:
    """:func:`zoo_report` in a child process that exits, as notebook 06's chooser runs each pick: the builds,
    the VMs and TVM's loaded libraries go with the child, and the caller keeps only the report without its
    build (:meth:`ZooReport.without_build`), in ``.value``, and the child's peak memory, in ``.peak_mb``.

    ``say`` gets the child's progress lines; a WorkbenchError in the child is raised here as its one line.
    From a script, the calls must be under ``if __name__ == "__main__":`` (the child imports the script).
    """
    say, ref = _sayer(say), zoo_ref(ref)
    if backend is not None:
        _check_backend(backend)
    say(f"importing {ref.name} in a process of its own…")  # before the child has loaded TVM, a few seconds
    return child.in_child(_report_without_build, ref, backend, say=say)


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter: blocks this large or larger are mapped on their own


def _report_without_build(ref: ModelRef, backend: str | None, say) -> ZooReport:
    """A pick's child: blocks of 1 MB and more are mapped on their own, so that one freed goes back to the
    system at once; glibc would raise its threshold after the first freed and keep the next ones in its heap
    (DeepLab's pick peaks at 2.2 GB so, 2.6 GB without)."""
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 2**20)
    return zoo_report(ref, backend, say=say).without_build()
