"""The VM instrument that :mod:`byoc_workbench.measure.time.timing` and :mod:`~byoc_workbench.measure.check.numerics`
time and watch a build's calls with.

The Relax VM calls an instrument before and after every call it makes
(``VirtualMachine.set_instrument``). :class:`Recorder` keeps a stack of the
open calls, so a call's time excludes the calls nested in it, and the Relax
function each call was made from, with how many calls of the same symbol that
call of the function made before: where a function has no branches, that
place names the call site (see :func:`byoc_workbench.measure.time.timing.build`).
The runners' phase marks (:mod:`byoc_workbench.backends.phases`) are kept with
the call they fall in.
"""

from __future__ import annotations

import collections
import time

from byoc_workbench.backends import phases


class Recorder:
    """The VM instrument: a stack of open calls; each finished call that is not a Relax function is
    kept as ``(symbol, start, end, time in nested calls, runner marks, function, k)``: the Relax
    function it was called from, and how many calls of ``symbol`` that call of the function made before."""

    def __init__(self, functions: frozenset, watch=None, entry: str = "main", sync=None):
        self.functions, self.entry = functions, entry
        # A GPU runs what the VM launches after the call returns: waiting for it at each call's start and end
        # times the call itself (and adds a wait per call, which the end-to-end runs do not have).
        self.sync = sync
        self.watch = watch  # called as watch(symbol, before, args) for every call, when set
        self.stack: list = []
        self.calls: list = []
        self.marks: list = []
        self.frames: list = []  # (function, Counter of its calls so far), innermost last

    def __call__(self, func, symbol, before, ret, *args):
        if self.sync is not None:
            self.sync()
        now = time.perf_counter()
        if self.watch is not None:
            self.watch(symbol, before, args)
        if before:
            if symbol in self.functions:
                self.frames.append((symbol, collections.Counter()))
                where, k = symbol, 0
            else:
                where, counts = self.frames[-1]
                k = counts[symbol]
                counts[symbol] += 1
            self.stack.append([symbol, now, 0.0, len(self.marks), where, k])
            return 0
        symbol, start, nested, first_mark, where, k = self.stack.pop()
        if self.stack:
            self.stack[-1][2] += now - start
        if symbol in self.functions:
            self.frames.pop()
        else:
            self.calls.append((symbol, start, now, nested, self.marks[first_mark:], where, k))
        return 0

    def run(self, vm, fn, args) -> list:
        """The calls of one run of ``fn``; its result is kept as ``self.result``."""
        self.stack, self.calls, self.marks = [], [], []
        self.frames = [(self.entry, collections.Counter())]
        vm.set_instrument(self)
        try:
            with phases.recording(self.marks):
                self.result = fn(*args)
        finally:
            vm.set_instrument(_no_instrument)
        return self.calls


def _no_instrument(*args):
    return 0
