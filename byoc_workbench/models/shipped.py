"""GluonCV's models as the package ships them: no MXNet needed to import, seed or load one.

A zoo model is, to the importer, its symbol (the graph MXNet traces, JSON) and its
parameters' names and shapes. Those are small (SSD-ResNet50's symbol is 10 KB
compressed), so ``tools/ship_zoo.py``, run where MXNet and GluonCV are, writes one
``data/zoo/<name>.json.xz`` per model GluonCV builds:

- ``graph``: the traced symbol, every output a head; ``inputs``: its data inputs;
- ``params``: every parameter of the block, ``[name, key, shape, dtype, learnt]``, where
  ``key`` is its name in a file ``Block.save_parameters`` writes (GluonCV's trained
  ``.params`` files) and ``learnt`` says the seed draws it;
- ``classes``: what the model tells apart;
- ``seeded`` (the models the workbench lists): how the seeded weights of
  :mod:`byoc_workbench.models.seeded` come from the seed's draws. Most parameters are
  a draw as it came out, or a draw times one number; the rest (batch-norm statistics
  and biases measured on the calibration batch, the SSD's anchors) are carried in
  ``data/zoo/<name>.seed<S>.npz.xz``. The SHA-256 of the result is checked after every
  regeneration, so every machine has the same weights, bit for bit.

numpy only: this module imports on any Python the workbench supports.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import io
import json
import lzma
import zipfile

import numpy as np

from byoc_workbench.core.errors import WorkbenchError

FORMAT = 1
#: Where the shipped models live, read through the package (never the working directory).
FOLDER = importlib.resources.files("byoc_workbench") / "data" / "zoo"
SEEDED_FIX = "use seed 0 (the seed the workbench ships), or seed again where MXNet is: make test-mxnet's venv"


class ShippedError(WorkbenchError):
    """A shipped model that is missing, damaged, or asked for what it does not carry."""


def is_bn_stat(name: str) -> bool:
    """A batch-norm statistic: drawn by the seed, though not learnt."""
    return name.endswith(("running_mean", "running_var", "moving_mean", "moving_var"))


def draw(name: str, shape, rng: np.random.RandomState) -> np.ndarray:
    """One parameter drawn from ``rng`` by its kind (its name says which). Legacy ``RandomState``
    draws are the same under every numpy, so every machine draws the same weights."""
    if name.endswith("gamma"):
        return rng.uniform(0.5, 1.5, shape)
    if name.endswith("beta"):
        return rng.uniform(-0.2, 0.2, shape)
    if name.endswith(("running_mean", "moving_mean")):
        return np.zeros(shape)
    if name.endswith(("running_var", "moving_var")):
        return np.ones(shape)
    if name.endswith("bias"):
        return rng.uniform(-0.1, 0.1, shape)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)


def draws(plan, seed: int) -> dict[str, np.ndarray]:
    """Every draw of ``plan`` (``[(name, shape)]`` in draw order), replayed from ``seed``, as float32."""
    rng = np.random.RandomState(seed)
    return {name: draw(name, tuple(shape), rng).astype("float32") for name, shape in plan}


def scale_of(draw32: np.ndarray, value: np.ndarray) -> float | None:
    """The float32 ``s`` with ``draw32 * s == value`` exactly, if there is one (a tamed or calibrated head)."""
    nz = np.flatnonzero(draw32)
    if nz.size == 0:
        return None
    ratio = np.float32(np.float64(value.flat[nz[0]]) / np.float64(draw32.flat[nz[0]]))
    for s in (ratio, np.nextafter(ratio, np.float32(np.inf)), np.nextafter(ratio, np.float32(-np.inf))):
        if np.array_equal(draw32 * np.float32(s), value):
            return float(s)
    return None


def recipe(values: dict, drawn: dict) -> tuple[dict, dict]:
    """``(how, carried)``: how each of ``values`` (by name) comes from ``drawn``, the seed's draws:
    ``{"draw": 1}`` as drawn, ``{"scale": s}`` a draw times one float32, or ``{"carried": 1}``, then among the
    arrays ``carried`` (batch-norm statistics, calibrated biases, anchors)."""
    how, carried = {}, {}
    for name, value in values.items():
        d = drawn.get(name)
        if d is not None and d.shape == value.shape and np.array_equal(d, value):
            how[name] = {"draw": 1}
        elif d is not None and d.shape == value.shape and (s := scale_of(d, value)) is not None:
            how[name] = {"scale": s}
        else:
            how[name] = {"carried": 1}
            carried[name] = value
    return how, carried


def arrays_sha256(arrays) -> str:
    """SHA-256 over the arrays' bytes, in the order given."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, order="C").tobytes())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of a shipped model."""

    name: str  # in the symbol
    key: str  # in a Block.save_parameters file
    shape: tuple
    dtype: str
    learnt: bool


@dataclasses.dataclass(frozen=True)
class ShippedModel:
    """One model as ``tools/ship_zoo.py`` wrote it: its symbol, its parameters, its classes."""

    name: str
    task: str
    family: str
    input_shape: tuple
    inputs: tuple
    prefix: str
    graph: dict
    params: tuple  # of Param, sorted by name
    classes: tuple
    seeded: dict | None
    made_with: dict
    onnx_sha256: str | None = None  # of MXNet's ONNX export, shipped beside it

    @property
    def used(self) -> tuple[Param, ...]:
        """The parameters the graph reads, in the order of its nodes."""
        names = {p.name: p for p in self.params}
        return tuple(names[n["name"]] for n in self.graph["nodes"] if n["op"] == "null" and n["name"] in names)

    def zero_weights(self) -> dict[str, np.ndarray]:
        """Zeros of every parameter the graph reads (untouched pages: nothing is allocated until written)."""
        return {p.name: np.zeros(p.shape, p.dtype) for p in self.used}

    def plan(self) -> list:
        """``[(name, shape)]`` of what the seed draws, in its order: learnt parameters and batch-norm statistics."""
        return [(p.name, p.shape) for p in self.params if p.learnt or is_bn_stat(p.name)]

    def seeded_weights(self, seed: int = 0) -> dict[str, np.ndarray]:
        """The seeded weights of every parameter the graph reads, regenerated and checked."""
        recipe = self.seeded
        if recipe is None or recipe["seed"] != seed:
            shipped = "no seeded weights" if recipe is None else f"only seed {recipe['seed']}"
            raise ShippedError(f"{self.name} ships {shipped}, not seed {seed}", SEEDED_FIX)
        try:
            with (FOLDER / f"{self.name}.seed{seed}.npz.xz").open("rb") as f:
                carried = dict(np.load(io.BytesIO(lzma.decompress(f.read()))))
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, lzma.LZMAError) as err:
            raise ShippedError(f"the seeded weights of {self.name} cannot be read ({err})", REINSTALL_FIX) from None
        drawn = draws(self.plan(), seed)
        out = {}
        for p in self.used:
            how = recipe["how"][p.name]
            if "carried" not in how:
                out[p.name] = drawn[p.name] * np.float32(how["scale"]) if "scale" in how else drawn[p.name]
            elif p.name in carried and carried[p.name].shape == p.shape:
                out[p.name] = np.asarray(carried[p.name], p.dtype)
            else:
                raise ShippedError(f"the seeded weights of {self.name} lack {p.name} as shipped", REINSTALL_FIX)
        if arrays_sha256(out.values()) != recipe["sha256"]:
            raise ShippedError(
                f"the seeded weights of {self.name} regenerated here differ from the shipped ones", REINSTALL_FIX
            )
        return out

    def onnx(self, shape) -> bytes:
        """MXNet's own ONNX export of this model at its input size, without the weights (they are added back by
        name), serialized: the whole-model anchors' file on a seat without MXNet."""
        if tuple(shape) != tuple(self.input_shape):
            raise ShippedError(
                f"MXNet's ONNX export of {self.name} is shipped at input {self.input_shape}, not {tuple(shape)}",
                f"run it at its own size, {self.input_shape}, or where MXNet is",
            )
        try:
            with (FOLDER / f"{self.name}.onnx.xz").open("rb") as f:
                data = lzma.decompress(f.read())
        except FileNotFoundError:
            raise ShippedError(
                f"no ONNX export of {self.name} is shipped (MXNet's exporter refused it)", "run it where MXNet is"
            ) from None
        except (OSError, lzma.LZMAError) as err:
            raise ShippedError(f"the ONNX export of {self.name} cannot be read ({err})", REINSTALL_FIX) from None
        if hashlib.sha256(data).hexdigest() != self.onnx_sha256:  # damaged, or another model's in its place
            raise ShippedError(f"the ONNX export of {self.name} is not the one shipped with it", REINSTALL_FIX)
        return data

    def from_file(self, arrays: dict, source: str) -> dict[str, np.ndarray]:
        """The graph's parameters from a ``.params`` file's ``arrays`` (:func:`read_params`), by name.

        A file ``Block.save_parameters`` wrote names them by the block's structure
        (``features.0.weight``); an older one by the parameter's own name, with or without the block's
        prefix or MXNet's ``arg:``/``aux:``. Every parameter the graph reads must be there, with its shape.
        """
        found = {}
        for key, value in arrays.items():
            bare = key.split(":", 1)[1] if key.startswith(("arg:", "aux:")) else key
            found[bare] = value
        out, missing = {}, []
        for p in self.used:
            value = next((found[k] for k in (p.key, p.name, p.name[len(self.prefix) :]) if k in found), None)
            if value is None:
                missing.append(p.key)
                continue
            if tuple(value.shape) != tuple(p.shape):
                raise ShippedError(
                    f"{source} holds {p.key} of shape {tuple(value.shape)}; {self.name} needs {tuple(p.shape)}",
                    f"pass a .params file saved from GluonCV's {self.name}",
                )
            out[p.name] = np.asarray(value, p.dtype)
        if missing:
            raise ShippedError(
                f"{source} lacks {len(missing)} of {self.name}'s parameters ({', '.join(missing[:3])}...)",
                f"pass a .params file saved from GluonCV's {self.name} (Block.save_parameters)",
            )
        return out


REINSTALL_FIX = "reinstall the workbench (pip install -e .) or write the zoo again with tools/ship_zoo.py"


def names() -> list[str]:
    """The models shipped, by name."""
    suffix = ".json.xz"
    return sorted(p.name[: -len(suffix)] for p in FOLDER.iterdir() if p.name.endswith(suffix))


def has(name: str) -> bool:
    """Whether ``name`` is shipped."""
    return (FOLDER / f"{name}.json.xz").is_file()


def read_shipped(name: str) -> ShippedModel:
    """The shipped model ``name``."""
    try:
        with (FOLDER / f"{name}.json.xz").open("rb") as f:
            data = json.loads(lzma.decompress(f.read()))
    except FileNotFoundError:
        raise ShippedError(
            f"{name} is not among the shipped models", "byoc-workbench prefetch --list names them"
        ) from None
    except (OSError, ValueError, lzma.LZMAError) as err:
        raise ShippedError(f"the shipped model {name} cannot be read ({err})", REINSTALL_FIX) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ShippedError(f"the shipped model {name} is not of format {FORMAT}", REINSTALL_FIX)
    if data.get("name") != name:  # a file of another model, put in this one's place
        raise ShippedError(f"the shipped file of {name} holds {data.get('name')!r}", REINSTALL_FIX)
    params = tuple(Param(n, k, tuple(s), d, bool(learnt)) for n, k, s, d, learnt in data["params"])
    return ShippedModel(
        name=data["name"],
        task=data["task"],
        family=data["family"],
        input_shape=tuple(data["input_shape"]),
        inputs=tuple(data["inputs"]),
        prefix=data["prefix"],
        graph=data["graph"],
        params=params,
        classes=tuple(data["classes"] or ()),
        seeded=data.get("seeded"),
        made_with=data.get("made_with", {}),
        onnx_sha256=data.get("onnx_sha256"),
    )


def _xz(data: bytes) -> bytes:
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)


def write_shipped(folder, model: ShippedModel, carried: dict | None = None, onnx: bytes | None = None) -> None:
    """Write ``model`` (and the carried arrays of its seeded weights, and MXNet's ONNX export of it without its
    weights) into ``folder``: ``tools/ship_zoo.py``."""
    data = dataclasses.asdict(model)
    data["params"] = [[p.name, p.key, list(p.shape), p.dtype, p.learnt] for p in model.params]
    data["format"] = FORMAT
    data["onnx_sha256"] = hashlib.sha256(onnx).hexdigest() if onnx is not None else None
    text = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    (folder / f"{model.name}.json.xz").write_bytes(_xz(text))
    if carried is not None:  # an npz in xz: half the size of a compressed npz (anchors and statistics are regular)
        buffer = io.BytesIO()
        np.savez(buffer, **carried)
        (folder / f"{model.name}.seed{model.seeded['seed']}.npz.xz").write_bytes(_xz(buffer.getvalue()))
    if onnx is not None:
        (folder / f"{model.name}.onnx.xz").write_bytes(_xz(onnx))
