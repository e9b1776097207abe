"""Batches as DGL message-flow graphs (blocks), as DGL's ``DataLoader`` yields them.

``to_dgl(batch)`` returns ``(input_nodes, output_nodes, blocks)``; ``to_dgl_link(batch)``
``(input_nodes, pair_graph, neg_pair_graph, blocks)`` of a link batch; :func:`to_blocks` builds
the blocks of a sampled subgraph; :func:`require_dgl` imports DGL or says what to install.
The DGL-facing shims over the loader (``DataLoader``, ``NodeCollator``) are in
:mod:`loaders.dgl`, which re-exports these names.

How the sampled graph maps onto blocks. Our sampler samples like PyG's: hop ``h`` nodes are the
nodes first reached at hop ``h`` (seeds are hop 0), and layer ``l`` edges point into hop ``l-1``
nodes, each node's neighbours sampled once. A GNN of ``L`` layers needs, at its layer ``k``
(``k = 0`` next to the input), representations of the nodes of hops ``0 .. L-1-k`` computed from
the edges of sampling layers ``1 .. L-k``. Because nodes are ordered by hop and edges by layer,
block ``k`` is a *prefix* of the sampled graph: its destination nodes are the first nodes of each
type, its source nodes a longer prefix (so destination nodes come first among the sources, as DGL
requires) and its edges the first edges of each type. This is the block form of PyG's
``trim_to_layer``. DGL's own ``NeighborSampler`` draws fresh neighbours for every layer instead;
both are unbiased neighbourhood samples and train the same models.

Fanout order: DGL lists fanouts from the input layer (``NeighborSampler([5, 10, 15])`` samples
15 neighbours per seed), PyG from the seeds. ``NeighborLoader(..., output="dgl")`` reads fanout
lists in DGL's order (``fanout_order="dgl"``, its default there) and accepts a
``dgl.dataloading.NeighborSampler`` as ``num_neighbors``; ``docs/compat.md`` has the rule and
every DGL ``DataLoader`` argument.

DGL is an optional dependency imported only when this module's functions run. The newest DGL
wheel for Linux is 2.1.0, which needs torch 2.0-2.2.1 and numpy 1.x; ``scripts/dgl-env.sh``
builds such an environment.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from featurestore.errors import MissingDependencyError
from loaders.errors import LoaderArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from loaders.sample.sampler import MiniBatch, SampledSubgraph

__all__ = ["to_dgl", "to_dgl_link", "to_blocks", "require_dgl", "DGLNotInstalledError",
           "INSTALL_HINT"]


#: what to install, named in the error raised when DGL is missing.
INSTALL_HINT = ("pip install dgl==2.1.0 'torch>=2.0,<=2.2.1' torchdata==0.7.1 pandas 'numpy<2' "
                "(or run scripts/dgl-env.sh, which builds .venv-dgl)")


class DGLNotInstalledError(MissingDependencyError):
    """``output="dgl"`` was asked for but DGL cannot be imported."""


def require_dgl(device=None):
    """Import and return the ``dgl`` module, or raise :class:`DGLNotInstalledError` saying what
    to install.

    With ``device`` (e.g. ``"cuda"``), also check that this DGL build can place graphs there
    (PyPI's dgl 2.1.0 is CPU-only). Call it where a DGL pipeline is set up (when a loader with
    ``output="dgl"`` is built) so that a missing or CPU-only DGL fails before the first batch.
    """
    import torch

    try:
        import dgl
    except ImportError as e:  # dgl missing, or built for another torch (it fails on import then)
        raise DGLNotInstalledError(
            f"Expected DGL to be importable for output='dgl' (torch {torch.__version__} here). "
            f"Import failed: {e}. DGL 2.1.0 needs torch 2.0-2.2.1 and numpy 1.x: {INSTALL_HINT}."
        ) from e
    if getattr(dgl, "__file__", None) is None:  # a directory named dgl on sys.path, not DGL
        raise DGLNotInstalledError(
            f"Expected the DGL package for output='dgl'. 'import dgl' found a plain directory "
            f"instead ({list(getattr(dgl, '__path__', []))}): DGL is not installed here. "
            f"{INSTALL_HINT}.")
    if device is not None and torch.device(device).type != "cpu":
        _check_device(str(torch.device(device)))
    return dgl


def to_dgl(batch: MiniBatch) -> tuple[Any, Any, list]:
    """``(input_nodes, output_nodes, blocks)`` of a mini-batch, as DGL's ``DataLoader`` yields them.

    Parameters
    ----------
    batch
        A :class:`loaders.sample.sampler.MiniBatch` (what ``NeighborLoader(output="raw")`` yields):
        the sampled subgraph, the features ``x`` of its nodes and the labels ``y`` of its seeds,
        already on ``batch.device``.

    Returns
    -------
    input_nodes
        Global store ids of the input nodes (``blocks[0].srcdata[dgl.NID]``): a tensor when the
        store has one node type, else a dict per node type.
    output_nodes
        Global store ids of the seeds: a tensor, or ``{seed_type: tensor}``.
    blocks
        One DGL block (message-flow graph) per layer, from the input layer to the output
        layer, on ``batch.device``. Every block's destination nodes are a prefix of its source
        nodes. ``srcdata``/``dstdata[dgl.NID]`` hold global node ids and ``edata[dgl.EID]`` the
        position of each edge in the store's CSC ``indices`` (DGL's edge id of a graph built with
        ``dgl.graph(("csc", (indptr, indices, [])))``). ``blocks[0].srcdata["feat"]`` holds the
        features and ``blocks[-1].dstdata["label"]`` the labels of the seeds (when ``batch.y``
        is not None). Each block's ``edata`` also holds the edge features and values the
        loader carries (``edge_attrs=``; DGL's ``prefetch_edge_feats``), by name.
    """
    dgl = require_dgl()
    sub = batch.subgraph
    blocks = to_blocks(sub, device=batch.device)
    homogeneous = len(sub.node) == 1
    first, last = blocks[0], blocks[-1]
    for nt, x in batch.x.items():
        if x is not None:
            first.srcnodes[nt].data["feat"] = x
    if batch.y is not None:
        last.dstnodes[sub.seed_type].data["label"] = batch.y
    for et, attrs in (getattr(batch, "edge_attrs", None) or {}).items():
        for b in blocks:  # a block's edges are a prefix of the sampled edges of each type
            m = b.num_edges(tuple(et))
            for name, v in attrs.items():
                b.edges[tuple(et)].data[name] = v[:m]
    if getattr(batch, "node_type", None) is not None:  # the relational view
        _type_blocks(dgl, blocks, batch.node_type, batch.edge_type)
    input_nodes = first.srcdata[dgl.NID]
    seeds = (last.dstdata[dgl.NID] if homogeneous
             else {sub.seed_type: last.dstdata[dgl.NID][sub.seed_type]})
    return input_nodes, seeds, blocks


def to_dgl_link(batch: MiniBatch) -> tuple:
    """``(input_nodes, pair_graph, neg_pair_graph, blocks)`` of a link batch (one with
    ``subgraph.link``), as DGL's ``DataLoader`` with ``as_edge_prediction_sampler`` yields
    them; ``(input_nodes, pair_graph, blocks)`` when the batch has no negatives.

    The pair graphs have every node and edge type of the blocks and the nodes of
    ``blocks[-1]``'s destination side (the batch's endpoints, same order; ``ndata[dgl.NID]``
    their store ids); their edges are the positive (negative) pairs of the seed edge types.
    ``pair_graph.edata[dgl.EID]`` holds the seed edge ids when the batch has them, and the
    link's ``edata`` (DGL's ``prefetch_labels``) is set on the pair graph's edges.
    """
    import torch

    dgl = require_dgl()
    input_nodes, _, blocks = to_dgl(batch)
    pairs, has_neg = _link_pairs(batch.subgraph.link)
    last = blocks[-1].cpu() if batch.device.type != "cpu" else blocks[-1]
    num = {nt: last.num_dst_nodes(nt) for nt in last.dsttypes}

    def pair_graph(which: int):
        empty = torch.zeros(0, dtype=torch.int64)
        data = {cet: (empty, empty) for cet in last.canonical_etypes}
        for et, p in pairs.items():
            data[et] = tuple(torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64))
                             for x in p[which])
        g = dgl.heterograph(data, num_nodes_dict=num, idtype=torch.int64)
        for nt in num:
            g.nodes[nt].data[dgl.NID] = last.dstnodes[nt].data[dgl.NID]
        return g

    pg = pair_graph(0)
    for et, (_, _, eids, edata) in pairs.items():
        if eids is not None:
            pg.edges[et].data[dgl.EID] = torch.from_numpy(np.asarray(eids, np.int64))
        for name, v in edata.items():
            pg.edges[et].data[name] = torch.as_tensor(np.asarray(v))
    graphs = [pg, pair_graph(1)] if has_neg else [pg]
    if batch.device.type != "cpu":
        graphs = [g.to(batch.device) for g in graphs]
    return (input_nodes, *graphs, blocks)


def _link_pairs(link: dict) -> tuple[dict, bool]:
    """``({edge type: (positives, negatives, e_id, edata)}, has negatives?)`` of a link batch,
    local ids: the edge-prediction layout (``pairs``) or PyG's (binary ``edge_label_index``,
    the positives first; triplet ``src_index``/``dst_pos_index``/``dst_neg_index``, the
    source repeated for its negatives, as DGL's ``Uniform(k)``)."""
    if "pairs" in link:
        return {tuple(et): v for et, v in link["pairs"].items()}, bool(link["has_neg"])
    et, n = tuple(link["edge_type"]), len(link["input_id"])
    if "src_index" in link:
        s, neg_dst = link["src_index"], np.asarray(link["dst_neg_index"]).reshape(n, -1)
        pos = np.stack([s, link["dst_pos_index"]])
        neg = np.stack([np.repeat(s, neg_dst.shape[1]), neg_dst.ravel()])
        return {et: (pos, neg, None, {})}, True
    eli = np.asarray(link["edge_label_index"])
    return {et: (eli[:, :n], eli[:, n:], None, {})}, eli.shape[1] > n


def _type_blocks(dgl, blocks: list, node_type, edge_type) -> None:
    """``dgl.NTYPE`` on both sides and ``dgl.ETYPE`` (also ``"etype"``) on the edges of each
    block of a homogeneous batch, as ``dgl.to_homogeneous`` leaves them on its graph
    (prefixes: hop-ordered nodes, layer-ordered edges)."""
    for b in blocks:
        b.srcdata[dgl.NTYPE] = node_type[: b.num_src_nodes()]
        b.dstdata[dgl.NTYPE] = node_type[: b.num_dst_nodes()]
        et = edge_type[: b.num_edges()]
        b.edata[dgl.ETYPE] = et
        b.edata["etype"] = et


def to_blocks(sub: SampledSubgraph, device=None) -> list:
    """The DGL blocks of a sampled subgraph, input layer first (no features; see :func:`to_dgl`).

    Node types are the keys of ``sub.node``; edge types the keys of ``sub.row``. The number of
    layers is the length of ``sub.num_sampled_edges``' lists.
    """
    import torch

    dgl = require_dgl(device)
    etypes = list(sub.row)
    ntypes = list(sub.node) + sorted({t for et in etypes for t in (et[0], et[2])} - set(sub.node))
    num_layers = _num_layers(sub)
    empty = np.zeros(0, np.int64)
    node_ids = {nt: torch.from_numpy(np.ascontiguousarray(sub.node.get(nt, empty), dtype=np.int64))
                for nt in ntypes}
    def tensors(d):
        return {et: torch.from_numpy(np.ascontiguousarray(d[et], dtype=np.int64))
                for et in etypes}

    rows, cols, eids = tensors(sub.row), tensors(sub.col), tensors(sub.edge)
    # prefix lengths: nodes of hops 0..h per type, edges of layers 1..l per edge type
    node_cum = {nt: np.concatenate([[0], np.cumsum(_pad(sub.num_sampled_nodes.get(nt, []),
                                                        num_layers + 1))])
                for nt in ntypes}
    edge_cum = {et: np.concatenate([[0], np.cumsum(_pad(sub.num_sampled_edges.get(et, []),
                                                        num_layers))])
                for et in etypes}
    for nt in ntypes:
        if node_cum[nt][-1] != len(node_ids[nt]):
            raise LoaderArgumentError(
                f"Expected num_sampled_nodes[{nt!r}] to sum to the {len(node_ids[nt])} sampled "
                f"nodes of that type. Got {node_cum[nt][-1]} instead.")
    for et in etypes:
        if edge_cum[et][-1] != len(rows[et]):
            raise LoaderArgumentError(
                f"Expected num_sampled_edges[{tuple(et)!r}] to sum to the {len(rows[et])} "
                f"sampled edges of that type. Got {edge_cum[et][-1]} instead.")

    on_device = device is not None and torch.device(device).type != "cpu"
    blocks = []
    for k in range(num_layers):  # k = 0 is the input layer
        depth = num_layers - k   # this block holds the edges of sampling layers 1..depth
        n_src = {nt: int(node_cum[nt][depth + 1]) for nt in ntypes}
        n_dst = {nt: int(node_cum[nt][depth]) for nt in ntypes}
        data = {}
        n_e = {}
        for et in etypes:
            m = int(edge_cum[et][depth])
            n_e[et] = m
            data[tuple(et)] = (rows[et][:m], cols[et][:m])
        block = dgl.create_block(data, num_src_nodes=n_src, num_dst_nodes=n_dst, idtype=torch.int64)
        # per type: DGL 2.1's dict form of block.dstdata[...] = {...} writes to the src side
        for nt in ntypes:
            block.srcnodes[nt].data[dgl.NID] = node_ids[nt][:n_src[nt]]
            block.dstnodes[nt].data[dgl.NID] = node_ids[nt][:n_dst[nt]]
        for et in etypes:
            block.edges[tuple(et)].data[dgl.EID] = eids[et][:n_e[et]]
        if on_device:
            block = block.to(device)
        blocks.append(block)
    return blocks


@functools.cache
def _check_device(device: str) -> None:
    """Fail clearly when this DGL build cannot hold graphs on ``device`` (PyPI's dgl 2.1.0 is
    a CPU-only build: GPU training needs a CUDA build of DGL)."""
    dgl = require_dgl()
    try:
        dgl.graph(([0], [0])).to(device)
    except Exception as e:  # DGLError, or torch's error when the device does not exist
        raise DGLNotInstalledError(
            f"Expected a DGL build that can place graphs on {device} for output='dgl'. It cannot: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}. "
            "PyPI's dgl 2.1.0 is CPU-only: pass device='cpu' to the loader, or install a CUDA "
            "build of DGL (see https://www.dgl.ai/pages/start.html).") from e


def _num_layers(sub) -> int:
    lengths = {len(v) for v in sub.num_sampled_edges.values()}
    if len(lengths) != 1:
        raise LoaderArgumentError("Expected num_sampled_edges to hold one count per layer for "
                                  f"every edge type. Got lists of lengths {sorted(lengths)} "
                                  "instead.")
    return lengths.pop()


def _pad(counts, n: int) -> np.ndarray:
    """``counts`` as an int64 array of length ``n`` (missing trailing hops count 0)."""
    a = np.zeros(n, dtype=np.int64)
    c = np.asarray(counts, dtype=np.int64)[:n]
    a[:len(c)] = c
    return a
