"""``stages`` (every BYOC stage of a model as a diagram, and summary.json) and ``report`` (the
partitioning report: what the target takes, what falls back and why)."""

from __future__ import annotations

import hashlib
import itertools
import re
import sys

from byoc_workbench import stages, subjects
from byoc_workbench.cli.args import FULL_OPS
from byoc_workbench.cli.refs import model_ref
from byoc_workbench.core import files, output_paths, text
from byoc_workbench.draw import render, renderers
from byoc_workbench.flow import summary
from byoc_workbench.flow.rules import parse_rule_list

GROUP_FILES = 24  # at most this many top-level groups get a file of their own
#: The longest a group's part of its file name may be, in bytes: far under any file system's NAME_MAX (255 on most),
#: with room for the ``00-source--`` before it, the format after it and the temporary's ``.<name>.XXXXXXXX.part``.
GROUP_PART_MOST = 80

#: The names of any set ``stages`` writes, in either format and with any groups opened: a new set replaces the
#: whole earlier one the workbench wrote, never leaving another model's groups or another format beside it.
STAGES_SET = re.compile(
    rf"({'|'.join(f'{i:02d}-{s}' for i, s in enumerate(stages.STAGES))})(--[A-Za-z0-9_-]+)?\.[a-z]+|summary\.json"
)


def _file_part(node_id: str) -> str:
    """A node id as part of a file name: ``main/stage0.`` -> ``main-stage0``."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", node_id).strip("-")


def group_files(groups, fmt: str) -> list[tuple[str, str]]:
    """``(file name, group id)`` for each group opened beside the collapsed views: ``main/stage0.`` ->
    ``00-source--main-stage0.svg``. A group whose cleaned name drops letters (not ASCII), is empty, is the same as
    another group's, or is longer than :data:`GROUP_PART_MOST`, ends in a short hash of its whole id (cut to fit
    first): each group gets a file of its own, named the same on every run."""
    parts = [_file_part(gid) for gid in groups]
    hashed = {gid for gid, p in zip(groups, parts) if parts.count(p) > 1}

    def part(gid: str, clean: str) -> str:
        if clean and gid not in hashed and gid.isascii() and len(clean) <= GROUP_PART_MOST:
            return clean
        digest = hashlib.sha256(gid.encode(errors="surrogatepass")).hexdigest()[:10]
        return "-".join(filter(None, (clean[: GROUP_PART_MOST - len(digest) - 1].rstrip("-"), digest)))

    while True:  # a plain name may be another group's hashed one (a group named by a hash): hash it too
        names = [part(gid, clean) for gid, clean in zip(groups, parts)]
        clash = {gid for gid, n in zip(groups, names) if names.count(n) > 1} - hashed
        if not clash:
            return [(f"00-source--{n}.{fmt}", gid) for n, gid in zip(names, groups)]
        hashed |= clash


def top_groups(g) -> list:
    """The closed groups (folded blocks and runs) of a collapsed graph's top level, in drawing order:
    those drawn in a function's box, or in a box merge will draw, not inside an opened call."""
    top = {c.id for c in g.clusters.values() if c.kind in ("function", "layout", "region")}
    return [n.id for n in g.nodes.values() if n.kind == "fold" and n.cluster in top]


def _subject(args, enabled) -> subjects.Subject:
    """The model ``args`` names, pruned as ``--no-prune``/``--min-mac-ops`` say; a model imported from a
    framework is drawn collapsed (``subject.ref.imported``)."""
    prune_rule = (
        stages.keep_all if args.no_prune else stages.no_mac(1 if args.min_mac_ops is None else args.min_mac_ops)
    )
    return subjects.load(model_ref(args, args.model, rules=enabled), prune_rule)


def cmd_stages(args) -> int:
    names = [f"{i:02d}-{s}.{args.format}" for i, s in enumerate(stages.STAGES)] + ["summary.json"]
    out = output_paths.check_dir(args.out, "--out", names, output_paths.read_paths(args), STAGES_SET)
    wanted = parse_rule_list(args.rules)  # Workbench rejects unknown names
    if args.format == "svg":
        renderers.require_graphviz()
    subject = _subject(args, wanted)
    wb = subject.workbench
    data = summary.summary_json(subject.name, wb.stages)
    if wb.mark:
        data["weights"] = wb.mark
    ops = wb.stages[0].op_count
    collapse = not args.full and (subject.ref.imported or ops > FULL_OPS)
    if args.full:
        print(f"drawing the full pictures: every stage with all its {ops:,} ops laid out at once")
    elif collapse:
        print(f"a full picture would lay out all {ops:,} ops of each stage at once: --full draws them")
    # Beside the collapsed views, each top-level group of the source stage (the model's own blocks) opened.
    groups = top_groups(wb.graph("source", collapse=True)) if collapse else []
    if len(groups) > GROUP_FILES:
        print(
            f"the source stage has {len(groups)} top-level groups: none gets a file of its own (at most {GROUP_FILES})"
        )
        groups = []
    extra = group_files(groups, args.format)
    output_paths.check_dir(args.out, "--out", [n for n, _ in extra], output_paths.read_paths(args))
    with files.staged(out, STAGES_SET) as tmp:  # every diagram and summary.json, or none of them
        stage_views = ((wb.dot(s.name, collapse=collapse), tmp / name) for name, s in zip(names, wb.stages))
        group_views = ((wb.dot("source", expand=(gid,), collapse=True), tmp / name) for name, gid in extra)
        render.write_all(itertools.chain(stage_views, group_views), args.format)
        (tmp / "summary.json").write_text(text.to_json(data))
    for s in wb.stages:
        print(
            f"{s.name:10s} ops={s.op_count:4d} subgraphs={len(s.subgraphs)}"
            + "".join(f"\n  note: {n}" for n in s.notes)
        )
    opened = f", {len(extra)} opened groups" if extra else ""
    print(f"wrote {len(wb.stages)} {'collapsed ' if collapse else ''}diagrams{opened} and summary.json to {out}")
    return 0


def cmd_report(args) -> int:
    out = (
        output_paths.check_dir(
            args.out, "--out", ["report.json", "report.txt", "prune.svg"], output_paths.read_paths(args)
        )
        if args.out
        else None
    )
    if out:
        renderers.require_graphviz()
    subject = _subject(args, None)
    wb = subject.workbench
    report = wb.report(subject.name)
    print(text.to_json(report.to_json()) if args.json else report.text())
    if out:
        with files.staged(out) as tmp:
            (tmp / "report.json").write_text(text.to_json(report.to_json()))
            (tmp / "report.txt").write_text(report.text() + "\n")
            render.write(wb.dot("prune", collapse=subject.ref.imported), tmp / "prune.svg", "svg")
        print(f"wrote report.json, report.txt and prune.svg to {out}", file=sys.stderr)
    return 0
