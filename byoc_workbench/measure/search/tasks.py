"""A search's candidate builds as tasks on a Ray cluster: one task per build, each timed alone on its node.

The search asks for its builds in batches that do not depend on each other
(each backend alone and the pruning choice; the seams' tries; the best
placements end to end). With a cluster, :func:`build_ahead` sends the builds of
a batch that this machine has not cached as tasks of
:func:`~byoc_workbench.measure.search.measure_candidate`, each through the
search cache of the node it runs on, and keeps what they measured for the
search's :meth:`.measure.Measurements.need`, which then takes them in the order a
search on one machine would. So the shortest path, the finals and the choice
are the serial search's, on the measurements the nodes made: the placements
built after learning and the reduced-precision variants are tasks too. TVM
alone (the reference outputs), the finals and the anchors run where the search runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from byoc_workbench.core.errors import WorkbenchError
from byoc_workbench.measure import cluster, search
from byoc_workbench.measure.machine import machine_key
from byoc_workbench.measure.search.measure import Measured

FIELDS = tuple(f.name for f in dataclasses.fields(Measured))


@dataclasses.dataclass
class RayTasks:
    """One search's tasks: what each shares, and each one's node, interval and error."""

    base: dict  # the description every task shares: model, backends, options, runs, cache
    progress: bool
    tasks: list = dataclasses.field(default_factory=list)  # {"what", "node", "start", "end", "error"}
    machines: dict = dataclasses.field(default_factory=dict)  # node -> its machine description

    @classmethod
    def start(cls, s, backends, address: str) -> RayTasks:
        """Connect to the cluster at ``address`` for session ``s`` of a search over ``backends``;
        a one-line error when its model cannot travel."""
        if s.subject.ref is None:
            raise WorkbenchError(
                "A search on a Ray cluster needs a model its tasks can load, not a workbench made here",
                'describe it: search.load({"kind": "onnx", "path": ...}), a zoo model, demo or a .py file',
            )
        s._say(cluster.connect(address))
        base = {"model": s.subject.ref.to_json(), "backends": list(backends), "options": s.options, "runs": s.runs}
        return cls(base | {"cache": s.cache.enabled}, s.progress)

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "machines": self.machines}

    def notes(self) -> list:
        """A note when the builds were measured on machines of more than one kind (ranks then mix them)."""
        kinds = {machine_key(m) for m in self.machines.values()} | {machine_key()}
        if len(kinds) < 2:
            return []
        return [
            f"the builds were measured on {len(kinds)} kinds of machine (this one and the cluster's nodes): "
            "their times are ranked together, so run the search from a node, on a cluster of nodes alike"
        ]


def build_ahead(s, wanted: list, options: dict | None = None) -> None:
    """With a cluster (``s.cluster``), the builds of ``wanted`` (``[(assign, what)]``, with ``options`` in
    place of some of the search's) not cached here, measured as tasks, for ``s.need`` to take. A task that
    fails says so; ``s.need`` then measures here."""
    c = s.cluster
    if c is None:
        return
    units, keys = {}, {}
    for assign, what in wanted:
        key, contents = s.placement_key(assign, s._options(options))
        if key in s.fetched or key in (k for k, _ in keys.values()) or s.cache.has("build", key):
            continue
        task = {"assign": assign, "reference": s.reference, "what": what, "options": s._options(options)}
        units[what] = (c.base | task,)
        keys[what] = (key, contents)
    for done in cluster.map_tasks(search.measure_candidate, units, timing=True, progress=c.progress) if units else ():
        c.tasks.append({"what": done.unit, "error": done.error} | done.where())
        if done.error:
            continue
        c.machines[done.node] = done.machine
        key, contents = keys[done.unit]
        record = {"measured": {f: done.value[f] for f in FIELDS}, "contents": contents}
        s.fetched[key] = (record, done.value["cached"])


def collect(s, measurements: dict, notes: list) -> None:
    """The search's tasks into its ``measurements`` (``tasks``, ``machines``), and the notes they call for."""
    if s.cluster is not None:
        measurements |= s.cluster.to_json()
        notes += s.cluster.notes()
