"""Learning from the end-to-end builds: each segment's cost measured in place teaches the ranking.

The shortest path ranks placements by the costs of the measurement builds
(each backend alone, the pruning choice, the seams' pieces). A placement built
end to end measures each of its segments again in the company it keeps: its
crossings, the runtimes on either side. Where that differs from what the
ranking assumed, the search does not keep assuming: the in-place costs join the
earlier ones (each cost the mean of its measurements), the placements are ranked
again, and a placement that now predicts faster than the fastest one measured is
built and measured end to end too, for up to :data:`RERANKINGS` rounds. Every row
keeps the prediction it was built on, so the table shows each prediction's error.
"""

from __future__ import annotations

import math

from byoc_workbench.measure.search import tasks

RERANKINGS = 2  # re-rankings after the first end-to-end builds; at most ``top`` placements more in all
MARGIN = 0.02  # predicted faster than the fastest measured by more than this share: built, not assumed


def relearn(session, rows: list, rank, rest: float, top: int) -> list:
    """``[(assign, what, predicted_s, Measured)]``: the placements built because the re-ranked costs put them
    ahead of the fastest one measured (``rank()`` ranks by the session's costs as they are now)."""
    found: list = []
    taught = 0
    for rnd in range(RERANKINGS):
        built = [m for _what, m, learns in session.records if not learns]
        for m in built[taught:]:  # the end-to-end builds' costs, not taught yet
            session.learn(m)
        taught = len(built)
        passed = [r.measured_s for r in rows if r.measured_s and r.equal and not r.rejected]
        best = min(passed + [m.end_to_end_s for *_, m in found if m.check and m.check["equal"]], default=math.inf)
        tried = [r.assign for r in rows] + [a for a, *_ in found]
        ahead = [(t + rest, dict(p)) for t, p in rank() if t + rest < best * (1 - MARGIN)]
        new = [(t, a) for t, a in ahead if a not in tried][: top - len(found)]
        if not new:
            break
        named = [(f"rank {k} after learning" + (f", round {rnd + 1}" if rnd else ""), *n) for k, n in enumerate(new, 1)]
        tasks.build_ahead(session, [(assign, f"the placement {what}, end to end") for what, _, assign in named])
        for what, predicted, assign in named:
            found.append((assign, what, predicted, session.need(assign, f"the placement {what}, end to end")))
    return found
