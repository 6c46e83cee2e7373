"""The block hierarchy of an imported model, read from its variable names.

The MXNet importer names each binding after the MXNet node it came from
(``ssd0_resnetv10_stage2_conv3_fwd``), and Gluon builds those names from the
prefixes of the blocks around the node: ``ssd0_`` (the SSD), ``resnetv10_``
(its backbone), ``stage2_``. :func:`find_groups` turns the nodes of one drawn
cluster into a tree of such blocks, the way Model Explorer shows layers:

- a block is a group when it holds at least two MXNet nodes or at least
  :data:`MIN_NODES` drawn nodes (one conv with its bias is not a block);
- sibling blocks that repeat one block side by side (``convpredictor0`` to
  ``convpredictor11``, with no path from one to another) form one family;
- names that share a first word but no block index (``expand_conv0``,
  ``expand_bn0``) and compute more than one kind of op form a group too;
- one MXNet node that became at least :data:`MIN_NODES` Relax ops (box
  decoding, NMS) is a group of its own.

Names imported from ONNX and PyTorch carry their scopes with dots instead
(``layer1.0.conv1.convolution``, from ``nn_module_stack`` or ONNX's
``/layer1/layer1.0/conv1/Conv``): there every word before the last is a block,
whatever it looks like (``0``, ``classification_head``). A cluster whose
names hold a dot is read that way.

Graphs whose names carry no block prefixes (``relu``, ``lv12``) get no groups.
Everything here is plain data over node ids, names and edges; no graphviz.
"""

from __future__ import annotations

import collections
import dataclasses
import re

MIN_NODES = 4  # a block of one MXNet node needs this many drawn nodes to be a group
MIN_FAMILY = 3  # copies of one block side by side that become a family

# Suffixes other steps add to an MXNet node's name: the importer's inner bindings and extra
# outputs (``__3``, ``__out1``), batch-norm folding (``_scaled``, ``_bn``), a partitioned
# call's tuple of outputs (``_outs``) and repeated node ids (``~2``).
_SUFFIX = re.compile(r"(?:_outs|_scaled|_bn|__(?:out)?\d+|~\d+)$")
_BLOCK = re.compile(r"[A-Za-z]+\d+")

# Roles of well-known GluonCV blocks, by the start of their name without its index. The first
# match wins, so a longer name comes before a name it starts with (rpnproposal before rpn).
ROLES = (
    ("resnet", "backbone"),
    ("mobilenet", "backbone"),
    ("vgg", "backbone"),
    ("darknet", "backbone"),
    ("stage", "backbone stage"),
    ("layers", "backbone stage"),
    ("deconvresnet", "backbone and upsampling"),
    ("yolodetectionblock", "detection blocks"),
    ("yolooutput", "outputs and box decoding"),
    ("centernetdecoder", "peak decoding"),
    ("rpnproposal", "proposal decoding"),
    ("rpnanchorgenerator", "anchors"),
    ("rpn", "region proposals"),
    ("bboxcliptoimage", "box clipping"),
    ("fcnhead", "segmentation head"),
    ("pyramidpooling", "pyramid pooling"),
    ("aspp", "atrous spatial pyramid pooling"),
    ("expand", "extra feature layers"),
    ("convpredictor", "class and box heads"),
    ("ssdanchorgenerator", "anchors"),
    ("multiperclassdecoder", "class decoding"),
    ("normalizedboxcenterdecoder", "box decoding"),
    ("box_nms", "non-maximum suppression"),
    # torchvision's module names (scoped names)
    ("layer", "backbone stage"),
    ("features", "feature extractor"),
    ("backbone", "backbone"),
    ("encoder", "transformer encoder"),
    ("conv_proj", "patch embedding"),
    ("trunk_output", "backbone stages"),
    ("classifier", "classifier"),
    ("head", "heads"),
    ("classification_head", "class head"),
    ("regression_head", "box head"),
)


def source_name(name: str) -> str:
    """The MXNet node a variable came from: ``name`` without the suffixes later steps add."""
    while True:
        stripped = _SUFFIX.sub("", name)
        if stripped == name:
            return name
        name = stripped


def block_path(name: str, scoped: bool = False) -> tuple[str, ...]:
    """The Gluon block prefixes around an MXNet node's name, outermost first:
    ``ssd0_resnetv10_stage1_conv0_fwd`` -> ``("ssd0_", "ssd0_resnetv10_", "ssd0_resnetv10_stage1_",
    "ssd0_resnetv10_stage1_conv0_")``. A word with an index (``stage1``) followed by more words is a block.
    ``scoped``: dotted module paths, ``layer1.0.conv1.convolution`` -> ``("layer1.", "layer1.0.", "layer1.0.conv1.")``.
    """
    if scoped:
        words = source_name(name).split(".")
        return tuple(".".join(words[: i + 1]) + "." for i in range(len(words) - 1))
    words = source_name(name).split("_")
    path, prefix = [], ""
    for word in words[:-1]:
        if not _BLOCK.fullmatch(word):
            break
        prefix += word + "_"
        path.append(prefix)
    return tuple(path)


def _word(prefix: str) -> str:
    """The last block of a prefix: ``ssd0_convpredictor11_`` -> ``convpredictor11``; ``layer1.0.`` -> ``0``."""
    sep = prefix[-1:]
    return prefix[:-1].rsplit(sep, 1)[-1] if sep in "._" and sep else prefix


def _stem(prefix: str) -> str:
    """``ssd0_convpredictor11_`` -> ``convpredictor``; ``head.module_list.3.`` -> ``module_list[]``."""
    word = _word(prefix)
    if word.isdigit() and prefix.endswith("."):  # an nn.Sequential or nn.ModuleList child
        parent = prefix[: -len(word) - 1]
        return (_word(parent) if parent else "") + "[]"
    return word.rstrip("0123456789")


def _name(prefix: str) -> str:
    """How a block is labelled: its last word; a numbered child of a list with its list, ``layer1.0``."""
    word = _word(prefix)
    if word.isdigit() and prefix.endswith("."):
        parent = prefix[: -len(word) - 1]
        return f"{_word(parent)}.{word}" if parent else word
    return word


def role(word: str) -> str:
    return next((r for start, r in ROLES if word.startswith(start)), "")


def _block_word(name: str) -> str | None:
    """The block under the model's own one that ``name`` (an MXNet node, or a block's prefix) sits in
    (``ssd0_ssdanchorgenerator0_reshape1`` -> ``ssdanchorgenerator0``), else its own name under the model
    (``ssd0_box_nms0__1`` -> ``box_nms0``); None for a name without Gluon block prefixes."""
    path = block_path(name)
    if not path:
        return None
    if len(path) > 1:
        return path[1][len(path[0]) :].rstrip("_")
    return source_name(name)[len(path[0]) :].rstrip("_") or None


def _side(names) -> str:
    words = list(dict.fromkeys(w for w in map(_block_word, names) if w))
    stems: dict = collections.defaultdict(list)
    for w in words:
        stems[w.rstrip("0123456789") or w].append(w)
    parts = []
    for stem, ws in stems.items():
        part = role(stem) or (f"{stem} ×{len(ws)}" if len(ws) > 1 else ws[0])
        if part not in parts:
            parts.append(part)
    return ", ".join(parts[:3]) + (" …" if len(parts) > 3 else "")


def run_title(sources, sinks) -> str:
    """What a run of ops connects, in block words: ``anchors → box decoding`` for the run that reads
    the anchor generators' outputs and feeds the box decoder. ``sources`` and ``sinks`` are the MXNet
    names (or block prefixes) of the nodes that feed the run and read it; "" when none has Gluon names."""
    a, b = _side(sources), _side(sinks)
    if not a and not b:
        return ""
    return f"{a or 'inputs'} → {b or 'outputs'}"


@dataclasses.dataclass
class Group:
    """A block of a drawn cluster: its node ``members`` (not those of its subgroups) and ``children``."""

    id: str
    name: str  # e.g. "resnetv10", "convpredictor ×12"
    cluster: str
    parent: str | None = None
    members: list = dataclasses.field(default_factory=list)
    children: list = dataclasses.field(default_factory=list)
    scope: str = ""  # ``id`` is ``<scope>/<key>``, ``~`` added for a key taken twice
    key: str = ""  # the block's name prefix (``ssd0_resnetv10_``) or family (``ssd0_convpredictor*``)

    @property
    def label(self) -> str:
        word = self.name.split(" ")[0]
        return f"{self.name} — {role(word)}" if role(word) else self.name


@dataclasses.dataclass
class _Item:
    """One node on its way through the tree: its place in binding order, id, MXNet name, block path and op."""

    index: int
    nid: str
    source: str
    path: tuple
    op: str


def find_groups(items: dict, edges, id_prefix) -> dict[str, Group]:
    """``{group id: Group}`` for the nodes of each cluster.

    ``items`` maps a cluster id to its ``[(node id, variable name, op)]`` in binding
    order; ``edges`` are ``(src, dst)`` node ids, for telling side-by-side
    copies from a chain; ``id_prefix(node id)`` is where a group id starts
    (``main`` for ``main/relu``). Group ids are ``<prefix>/<block prefix>``
    (``main/ssd0_resnetv10_``), so a group keeps its id from stage to stage.
    """
    succ: dict = collections.defaultdict(list)
    for src, dst in edges:
        succ[src].append(dst)
    groups: dict = {}
    for cluster, rows in items.items():
        scoped = any("." in name for _, name, _ in rows)
        nodes = [
            _Item(i, nid, source_name(name), block_path(name, scoped), op) for i, (nid, name, op) in enumerate(rows)
        ]
        if not any(n.path for n in nodes):
            continue
        paths = [n.path for n in nodes if n.path]
        depth = _common_depth(paths)
        _Tree(groups, cluster, succ, id_prefix, scoped).level(nodes, depth, None, paths[0][depth - 1] if depth else "")
    return _squash(groups)


def _squash(groups: dict) -> dict:
    """A group that only holds one other group takes over its content (the box decoder holds box_decode)."""
    for gid in list(groups):
        group = groups.get(gid)
        while group is not None and not group.members and len(group.children) == 1:
            child = groups.pop(group.children[0])
            group.members, group.children = child.members, child.children
            for c in child.children:
                groups[c].parent = gid
    return groups


def _common_depth(paths: list) -> int:
    """How many outer blocks every path shares (``ssd0_`` holds the whole SSD: no group for it)."""
    depth = 0
    while all(len(p) > depth for p in paths) and len({p[depth] for p in paths}) == 1:
        depth += 1
    return depth


class _Tree:
    def __init__(self, groups, cluster, succ, id_prefix, scoped=False):
        self.groups, self.cluster, self.succ, self.id_prefix = groups, cluster, succ, id_prefix
        self.scoped = scoped  # dotted module paths: their words are op names, not Gluon blocks

    def new(self, key: str, name: str, parent, first) -> Group:
        scope = self.id_prefix(first.nid)
        gid = f"{scope}/{key}"
        while gid in self.groups:
            gid += "~"
        group = Group(gid, name, self.cluster, parent, scope=scope, key=key)
        self.groups[gid] = group
        if parent is not None:
            self.groups[parent].children.append(gid)
        return group

    def level(self, nodes: list, depth: int, parent, prefix: str) -> None:
        """Group ``nodes`` below ``parent`` (None: the cluster itself)."""
        blocks: dict = {}
        loose = []
        for n in nodes:
            (blocks.setdefault(n.path[depth], []) if len(n.path) > depth else loose).append(n)
        kept, single = {}, {}
        for key, members in blocks.items():
            big = len({m.source for m in members}) >= 2 or len(members) >= MIN_NODES
            (kept if big else single)[key] = members
        for stem, keys in self.families({**kept, **single}).items():
            family = [n for k in keys for n in (kept.get(k) or single[k])]
            group = self.new(f"{prefix}{stem}*", f"{stem} ×{len(keys)}", parent, family[0])
            for k in keys:
                if k in kept:
                    self.block(k, kept.pop(k), depth, group.id)
                else:
                    group.members += [n.nid for n in single.pop(k)]
        for key, members in kept.items():
            self.block(key, members, depth, parent)
        for members in single.values():
            loose += members
        loose.sort(key=lambda n: n.index)
        rest = self.by_words(loose, prefix, parent)
        if parent is not None:
            self.groups[parent].members += rest

    def block(self, key: str, members: list, depth: int, parent) -> None:
        group = self.new(key, _name(key), parent, members[0])
        self.level(members, depth + 1, group.id, key)

    def families(self, blocks: dict) -> dict[str, list[str]]:
        """``{stem: [block keys]}`` for blocks repeated side by side at least MIN_FAMILY times."""
        by_stem: dict = {}
        for key in blocks:
            by_stem.setdefault(_stem(key), []).append(key)
        out = {}
        for stem, keys in by_stem.items():
            if len(keys) >= MIN_FAMILY and self.independent([{n.nid for n in blocks[k]} for k in keys]):
                out[stem] = keys
        return out

    def independent(self, sets: list) -> bool:
        """No path leads from one of ``sets`` to another."""
        owner = {nid: i for i, s in enumerate(sets) for nid in s}
        for i, s in enumerate(sets):
            seen, stack = set(s), list(s)
            while stack:
                for nxt in self.succ.get(stack.pop(), ()):
                    if nxt in seen:
                        continue
                    if owner.get(nxt, i) != i:
                        return False
                    seen.add(nxt)
                    stack.append(nxt)
        return True

    def by_words(self, loose: list, prefix: str, parent) -> list:
        """Group loose nodes by a shared first word (``expand_``) or by one MXNet node; returns the rest."""
        by_word: dict = {}
        for n in loose:
            rest = n.source[len(prefix) :] if n.source.startswith(prefix) else n.source
            words = rest.split("_")
            if not self.scoped and n.path and len(words) > 1 and words[0].isalpha():
                by_word.setdefault(words[0], []).append(n)
        out = []
        taken = set()
        for word, members in by_word.items():
            if len({m.source for m in members}) >= 2 and len({m.op for m in members if m.op}) >= 2:
                group = self.new(f"{prefix}{word}_", word, parent, members[0])
                group.members += [m.nid for m in members]
                taken |= {m.nid for m in members}
        by_source: dict = {}
        for n in loose:
            if n.nid not in taken:
                by_source.setdefault(n.source, []).append(n)
        for source, members in by_source.items():
            if members[0].path and len(members) >= MIN_NODES:
                name = source[len(prefix) :] if source.startswith(prefix) else source
                group = self.new(f"{source}_", name, parent, members[0])
                group.members += [m.nid for m in members]
            else:
                out += [m.nid for m in members]
        return out
