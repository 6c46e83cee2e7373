"""Independent units of work as tasks on a Ray cluster: one model of a bench or of the zoo walk, one
candidate build of a search.

:func:`connect` joins a cluster (``"auto"``: the one this machine runs, else a
cluster of this machine alone, started in this process; or an address such as
``ray://head:10001``). :func:`map_tasks` submits one task per unit and gathers
them as they finish, one line each with how long the rest should take. A task
that times something asks for the :data:`TIMING` resource, which each node
offers once (``ray start ... --resources '{"timing": 1}'``), so no two timings
share a node; builds and imports ask for none and run side by side.

Each result says where it ran: the node, its machine description
(:func:`byoc_workbench.measure.machine.machine`) and the wall-clock interval of
the task's work, so that no ratio mixes machines and overlaps can be checked. A
unit that fails gives its one-line error and the others go on. Ctrl-C cancels
what is still running and raises, so the command ends with nothing half-written:
results are written by the caller, once everything is gathered.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable

from byoc_workbench.core import text
from byoc_workbench.core.errors import MissingDependencyError, WorkbenchError, first_line
from byoc_workbench.measure.machine import machine

logger = logging.getLogger(__name__)

#: The custom resource a timing task holds: each node offers one, so its timings run one at a time.
TIMING = "timing"
INSTALL_FIX = "pip install 'byoc-workbench[cluster]' (or make setup EXTRAS=cluster)"
START_FIX = "start one with ray start --head --resources '{\"timing\": 1}', or pass --ray auto for this machine alone"
GCS_WAIT = "RAY_gcs_server_port_wait_time_s"
_joined = ""  # "joined" once connect() joined or started a Ray (one a caller had is the caller's to leave),
# "stopped while starting" when a Ctrl-C stopped the one it was starting
GRACE_S = 5.0  # after Ctrl-C, how long a cancelled task may take to clean up before it is killed


@dataclasses.dataclass
class Done:
    """One unit's task, finished: its value or its one-line error, and where and when it ran."""

    unit: str
    value: object = None
    error: str = ""
    node: str = ""
    machine: dict = dataclasses.field(default_factory=dict)
    start: float = 0.0  # wall-clock seconds (time.time()) when the task's work began
    end: float = 0.0

    def where(self) -> dict[str, str | float]:
        """``{"node", "start", "end"}``: what a result records of where and when it ran."""
        return {"node": self.node, "start": self.start, "end": self.end}


def import_ray():
    """The ``ray`` module, or the one-line error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("Ray is not installed", INSTALL_FIX) from None
    return ray


def connect(address: str = "auto", timing: bool = True) -> str:
    """Join the Ray cluster at ``address`` (see the module's docstring); returns a line saying which.

    A process already connected (a notebook that called ``ray.init``, a test's
    cluster) keeps its connection. ``timing`` asks that a node offer :data:`TIMING`.
    """
    global _joined
    ray = import_ray()
    if not ray.is_initialized():
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        if address == "auto":
            try:
                ray.init(address="auto", **quiet)
            except ConnectionError:  # no cluster runs here: this machine alone, one timing at a time
                _start_here(ray, quiet)
        else:
            _join(ray, address, quiet)
        _joined = "joined"
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    timed = [n for n in nodes if n.get("Resources", {}).get(TIMING, 0) >= 1]
    if timing and not timed:
        raise WorkbenchError(
            f"No node of the Ray cluster offers the {TIMING!r} resource, so nothing could be timed alone on one",
            f"start each node with ray start ... --resources '{{\"{TIMING}\": 1}}'",
        )
    return f"ray: {len(nodes)} node(s), {len(timed)} that time, {int(ray.cluster_resources().get('CPU', 0))} CPUs"


def _start_here(ray, quiet: dict) -> None:
    """Start a Ray of this machine alone. Stopped while it starts (Ctrl-C), Ray's own shutdown leaves its
    two agents (about 100 MB each) running for a minute, and killing them before it ends the process in a
    segfault: a reaper stops, once this process has ended, whatever Ray had started and left running."""
    global _joined
    try:
        ray.init(resources={TIMING: 1}, include_dashboard=False, **quiet)
    except BaseException:
        _joined = "stopped while starting"
        atexit.unregister(ray.shutdown)  # it segfaults on a Ray stopped while it started (ray 2.x)
        with contextlib.suppress(Exception):
            _reap_after_exit()
        raise


def stop() -> bool:
    """Leave the Ray that :func:`connect` joined or started (or was starting), now; whether there was one.
    A command stopped by Ctrl-C calls this, then ends without the interpreter's teardown: Ray's threads, their
    tasks cancelled or their start cut short, can crash that teardown (SIGSEGV) after the command's last line."""
    if _joined == "joined":
        ray = sys.modules["ray"]
        ray.shutdown()
        atexit.unregister(ray.shutdown)
    return bool(_joined)


_REAPER = """
import sys, time, psutil
parent, started = int(sys.argv[1]), sys.argv[2:]
while psutil.pid_exists(parent) and psutil.Process(parent).status() != "zombie":
    time.sleep(0.2)
time.sleep(1.0)  # Ray's node cleanup at exit (its shutdown hook is off) goes first
left = []
for p in started:
    pid, born = p.split(":")
    try:
        q = psutil.Process(int(pid))
        if q.create_time() == float(born):
            q.terminate()
            left.append(q)
    except psutil.Error:
        pass
for q in psutil.wait_procs(left, timeout=3)[1]:
    try:
        q.kill()
    except psutil.Error:
        pass
"""


def _reap_after_exit() -> None:
    import psutil  # comes with ray

    started = [f"{p.pid}:{p.create_time()!r}" for p in psutil.Process().children(recursive=True)]
    quiet = subprocess.DEVNULL
    cmd = [sys.executable, "-c", _REAPER, str(os.getpid()), *started]
    subprocess.Popen(cmd, stdin=quiet, stdout=quiet, stderr=quiet, start_new_session=True)


def _join(ray, address: str, quiet: dict) -> None:
    """``ray.init(address=...)``, trying the cluster once (about 40 s) instead of Ray's twenty times. The
    address (``HEAD:6379``, or a Ray client's ``ray://HEAD:10001``) is knocked on first, so one where nothing
    answers is said in seconds (Ray retries for 35 s, logging from C++). Whatever stops the join is one line."""
    _knock(address)
    given = os.environ.get(GCS_WAIT)
    os.environ[GCS_WAIT] = given or "1"  # Ray's own setting for how many seconds it tries; the user's wins
    try:
        with warnings.catch_warnings():  # Ray's client warns about security groups before it raises
            warnings.simplefilter("ignore")
            ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as err:  # no answer, a malformed address,
        raise WorkbenchError(f"No Ray cluster answers at {address} ({first_line(err)})", START_FIX) from None
    finally:
        if given is None:
            os.environ.pop(GCS_WAIT, None)


def _knock(address: str, timeout: float = 10.0) -> None:
    """A one-line error unless something listens at a ``host:port`` or ``ray://host:port`` address."""
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise WorkbenchError(f"{address} is not a Ray address", "write it HEAD:6379, or ray://HEAD:10001")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise WorkbenchError(f"No Ray cluster answers at {address} ({err.strerror or err})", START_FIX) from None
    try:  # something listens: is it a gRPC server, as Ray's client is (grpcio comes with ray[client])?
        import grpc
    except ImportError:
        return  # Ray says in one line that ray[client] is missing
    channel = grpc.insecure_channel(hostport)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise WorkbenchError(
            f"No Ray cluster answers at {address} (something listens there, but no gRPC server)", START_FIX
        ) from None
    finally:
        channel.close()


def _run(fn: Callable, args: tuple, timing: bool, threads: str | None) -> dict:
    """A task's body: ``fn(*args)``, with where and when it ran; a user's mistake is its one line."""
    import ray

    if timing:  # the node is this task's alone: its threads as a run outside Ray would have them
        os.environ.pop("OMP_NUM_THREADS", None)  # Ray sets 1 per task unless the environment set it
        if threads is not None:
            os.environ["OMP_NUM_THREADS"] = threads
    out = {"node": ray.get_runtime_context().get_node_id(), "machine": machine(), "error": "", "value": None}
    out["start"] = time.time()
    try:
        out["value"] = fn(*args)
    except WorkbenchError as err:
        out["error"] = err.line
    out["end"] = time.time()
    return out


def map_tasks(
    fn: Callable, units: dict, timing: bool, progress: bool = True, state: Callable | None = None
) -> list[Done]:
    """``fn(*units[unit])`` for each unit, one Ray task each; the :class:`Done` of each, in ``units``' order.

    Call :func:`connect` first. ``fn`` must be importable by the workers (a
    module's top-level function). A bug in a task (not a user's mistake) is
    reported with its trace on stderr and its first line in ``error``; the
    other tasks go on. With ``progress``, a line on stderr per finished task:
    ``state(value)`` (default "done"), where, and how long the rest should take.
    Ctrl-C cancels every task still running and re-raises.
    """
    ray = import_ray()
    options = {"resources": {TIMING: 1}} if timing else {}
    task = ray.remote(_run).options(max_retries=0, **options)
    threads = os.environ.get("OMP_NUM_THREADS")
    pending = {task.remote(fn, tuple(args), timing, threads): unit for unit, args in units.items()}
    found: dict = {}
    t0 = time.monotonic()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)  # back in Python each second: Ctrl-C
            for ref in ready:
                unit = pending.pop(ref)
                found[unit] = _gathered(ray, ref, unit)
                if progress:
                    line = _line(found[unit], len(found), len(units), time.monotonic() - t0, state)
                    print(line, file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        cancel(ray, list(pending))
        raise
    return [found[u] for u in units]


def _gathered(ray, ref, unit: str) -> Done:
    try:
        out = ray.get(ref)
    except ray.exceptions.RayTaskError as err:  # a bug: its trace, and the run goes on
        print(f"{unit} failed:\n{err}", file=sys.stderr)
        cause = getattr(err, "cause", None) or err
        return Done(unit, error=f"error: {unit}: {type(cause).__name__}: {first_line(cause)}")
    except ray.exceptions.RayError as err:  # the worker died (a crash) or the node went away
        return Done(unit, error=f"error: {unit}: the task did not finish ({first_line(err)})")
    return Done(unit, out["value"], out["error"], out["node"], out["machine"], out["start"], out["end"])


def _line(done: Done, k: int, n: int, elapsed: float, state: Callable | None) -> str:
    """``[3/8] demo: done in 4.1 s on node 81c7383 (AMD EPYC 7B13, 2 cores); about 12 s left``."""
    said = state(done.value) if state and not done.error else "done"
    state = done.error or f"{said} in {text.seconds(done.end - done.start)}"
    where = f" on node {done.node[:7]} ({text.machine_line(done.machine)})" if done.node else ""
    left = f"; about {text.seconds(elapsed / k * (n - k))} left" if k < n else f"; all done in {text.seconds(elapsed)}"
    return f"[{k}/{n}] {done.unit}: {state}{where}{left}"


def cancel(ray, refs: list) -> None:
    """Stop ``refs``: a KeyboardInterrupt in each first, so it cleans up (a file half written is removed),
    then, after :data:`GRACE_S`, the worker of each that has not finished killed. One that finished is left
    alone: force-cancelling a task whose reply is on its way can trip a check inside Ray's core worker
    ("Tried to complete task that was not pending"), which ends the process with status 1."""
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref)
    running = refs
    with contextlib.suppress(Exception):
        _, running = ray.wait(refs, num_returns=len(refs), timeout=GRACE_S)
    for ref in running:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
