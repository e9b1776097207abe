"""Tail prediction on WikiKG90Mv2 (OGB-LSC) from a store, scored by WikiKG90Mv2Evaluator.

The model reads everything from the store written by ``featurestore preprocess wikikg90mv2``:
entity features (rows gathered per batch by ``FeatureArray.gather``), relation features, the
``train`` edge split and each entity's in-degree in the ``("entity", "relation", "entity")``
CSC. A query ``(h, r)`` is encoded as ``MLP([W x_h, relation(r)])``, a candidate tail as
``V [x_t, log(1 + indegree_t)]``; the score is their dot product, trained with a softmax over
the batch's tails and uniformly drawn entities. Validation streams every entity's features
once, keeps each query's top 10 and reports ogb's MRR next to that of a random ranking.

With ``--neighbors K`` the head is also encoded from ``K`` sampled neighbours in each
direction (a one-layer R-GCN-like mean of ``W x_u + R[relation]``): training batches come
from :class:`loaders.LinkNeighborLoader` over the store's ``train`` edge split (triplet
negatives; each batch's positive edges and their reverses left out of its sampled graph,
``batch[etype].relation`` the sampled edges' relation ids), validation heads from
:class:`loaders.NeighborLoader`.

    featurestore synth wikikg90mv2 data --scale 0.001
    featurestore preprocess wikikg90mv2 data store
    python examples/train_wikikg90m.py --store store [--steps 400 --eval-queries 2000]
    python examples/train_wikikg90m.py --demo          # a tiny twin in a temporary folder
    python examples/train_wikikg90m.py --demo --neighbors 5   # with sampled neighbours
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

import featurestore as fs
from loaders import LinkNeighborLoader, NeighborLoader
from loaders.datasets.lsc import WikiKG90Mv2Dataset, WikiKG90Mv2Evaluator
from loaders.datasets.lsc_wikikg import KG_ETYPE

REV_ETYPE = ("entity", "rev_relation", "entity")

log = logging.getLogger("train_wikikg90m")


class KGModel(torch.nn.Module):
    """Query encoder over (head features, relation), tail encoder over (features, degree)."""

    def __init__(self, feat_dim: int, relation_feat: np.ndarray, dim: int):
        super().__init__()
        self.head = torch.nn.Linear(feat_dim, dim)
        self.tail = torch.nn.Linear(feat_dim + 1, dim)
        self.register_buffer("rel_x", torch.from_numpy(np.asarray(relation_feat, np.float32)))
        self.rel = torch.nn.Linear(relation_feat.shape[1], dim)
        self.rel_id = torch.nn.Embedding(relation_feat.shape[0], dim)
        self.query_mlp = torch.nn.Sequential(torch.nn.Linear(2 * dim, 2 * dim), torch.nn.ReLU(),
                                             torch.nn.Linear(2 * dim, dim))

        self.msg = torch.nn.ModuleList([torch.nn.Linear(feat_dim, dim) for _ in range(2)])

    def query(self, xh: torch.Tensor, r: torch.Tensor, nbr: torch.Tensor | None = None
              ) -> torch.Tensor:
        """``(B, dim)`` query vectors of heads' features ``xh`` and relation ids ``r`` (plus
        their neighbourhood vectors ``nbr``, see :meth:`neighbours`)."""
        rel = self.rel(self.rel_x[r]) + self.rel_id(r)
        head = self.head(xh) if nbr is None else self.head(xh) + nbr
        return self.query_mlp(torch.cat([head, rel], dim=1))

    def neighbours(self, b, x: torch.Tensor) -> torch.Tensor:
        """Per node of batch ``b``: the mean over its sampled in-edges of each type of
        ``W_type x_src + R[relation]``, summed over the two types."""
        out = torch.zeros(x.shape[0], self.head.out_features, device=x.device)
        for lin, et in zip(self.msg, (KG_ETYPE, REV_ETYPE)):
            ei, rel = b[et].edge_index, b[et].relation.long()
            m = lin(x[ei[0]]) + self.rel_id(rel)
            agg = torch.zeros_like(out).index_add_(0, ei[1], m)
            cnt = torch.bincount(ei[1], minlength=x.shape[0]).clamp(min=1)
            out = out + agg / cnt[:, None]
        return out

    def entity(self, xt: torch.Tensor, log_deg: torch.Tensor) -> torch.Tensor:
        """``(B, dim)`` tail vectors of features ``xt`` and ``log(1 + indegree)``."""
        return self.tail(torch.cat([xt, log_deg[:, None]], dim=1))


def rows(feat, ids: np.ndarray, device) -> torch.Tensor:
    """Feature rows of ``ids`` from the store, as float32 on ``device``."""
    return torch.from_numpy(feat.gather(ids)).to(device).float()


@torch.no_grad()
def queries(model, store, feat, hr: np.ndarray, a) -> torch.Tensor:  # noqa: D103
    """Query vectors of ``(h, r)`` rows (heads' neighbours sampled when ``a.neighbors``)."""
    r = torch.from_numpy(hr[:, 1]).to(a.device)
    if not a.neighbors:
        return model.query(rows(feat, hr[:, 0], a.device), r)
    heads, inv = np.unique(hr[:, 0], return_inverse=True)
    fan = {KG_ETYPE: [a.neighbors], REV_ETYPE: [a.neighbors]}
    parts = []
    for b in NeighborLoader(store, fan, ("entity", heads), batch_size=1024, output="pyg",
                            device=a.device, seed=a.seed):
        x = b["entity"].x.float()
        k = b["entity"].batch_size
        parts.append((x[:k], model.neighbours(b, x)[:k]))
    xh = torch.cat([p[0] for p in parts])[torch.from_numpy(inv)]
    nbr = torch.cat([p[1] for p in parts])[torch.from_numpy(inv)]
    return model.query(xh, r, nbr)


@torch.no_grad()
def top10(model, q: torch.Tensor, feat, log_deg: np.ndarray, device, chunk: int = 16384):
    """Each query's (rows of ``q``) 10 best tails over every entity, streaming the features
    once."""
    best_s = torch.full((len(q), 10), -np.inf, device=device)
    best_i = torch.zeros((len(q), 10), dtype=torch.long, device=device)
    n = feat.shape[0]
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        x = torch.from_numpy(np.asarray(feat[lo:hi])).to(device).float()
        e = model.entity(x, torch.from_numpy(log_deg[lo:hi]).to(device))
        s = torch.cat([best_s, q @ e.T], dim=1)
        ids = torch.cat([best_i, torch.arange(lo, hi, device=device).expand(len(q), -1)], 1)
        best_s, at = s.topk(10, dim=1)
        best_i = ids.gather(1, at)
    return best_i.cpu().numpy()


def random_top10(n: int, queries: int, seed: int) -> np.ndarray:
    """10 distinct uniformly drawn entities per query: the random-ranking baseline."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, n, (queries, 10))
    while True:  # redraw rows that repeat an entity
        s = np.sort(out, axis=1)
        bad = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if not bad.size:
            return out
        out[bad] = rng.integers(0, n, (bad.size, 10))


def demo_store(workdir: str) -> str:
    """A tiny WikiKG90Mv2 twin, preprocessed: the store's path."""
    from preprocess.ogb.wikikg90mv2 import preprocess_wikikg90mv2
    from preprocess.synth.wikikg import WikiSynthSpec, synth_wikikg90mv2

    spec = WikiSynthSpec(num_entities=3000, num_relations=40, train=40000, valid=1000,
                         test_dev=300, test_challenge=200, feat_dim=32, num_types=8)
    synth_wikikg90mv2(workdir, 0, seed=1, progress=False, spec=spec)
    store = os.path.join(workdir, "store")
    preprocess_wikikg90mv2(workdir, store, budget_bytes=64 << 20, progress=False)
    return store


def softmax_loss(q: torch.Tensor, e: torch.Tensor, tail_ids: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each query's own tail (column ``i``) against every candidate; a
    candidate that is another query's answer too is not a negative for it."""
    same = tail_ids[None, :] == tail_ids[: q.shape[0], None]
    same.fill_diagonal_(False)
    return F.cross_entropy((q @ e.T).masked_fill(same, -1e9),
                           torch.arange(q.shape[0], device=q.device))


def feature_batches(store, feat, deg_t, model, a, n: int):
    """Losses of batches of uniformly drawn training triples (no neighbours)."""
    hrt = WikiKG90Mv2Dataset(store).train_hrt
    rng = np.random.default_rng(a.seed)
    while True:
        b = hrt[np.sort(rng.integers(0, len(hrt), a.batch_size))]
        tails = torch.from_numpy(np.concatenate([b[:, 2], rng.integers(0, n, a.negatives)]))
        tails = tails.to(a.device)
        q = model.query(rows(feat, b[:, 0], a.device), torch.from_numpy(b[:, 1]).to(a.device))
        e = model.entity(rows(feat, tails.cpu().numpy(), a.device), deg_t[tails])
        yield softmax_loss(q, e, tails)


def neighbour_batches(store, deg_t, model, a):
    """Losses of LinkNeighborLoader batches of the ``train`` split (triplet negatives)."""
    rel_of = torch.from_numpy(np.asarray(store.edge_split("train", KG_ETYPE)["relation"],
                                         np.int64))
    fan = {KG_ETYPE: [a.neighbors], REV_ETYPE: [a.neighbors]}
    loader = LinkNeighborLoader(store, fan, (KG_ETYPE, "train"), neg_sampling="triplet",
                                exclude="reverse", reverse_edge_type=REV_ETYPE, shuffle=True,
                                batch_size=a.batch_size, output="pyg", device=a.device,
                                seed=a.seed)
    while True:  # epochs
        for b in loader:
            ent = b["entity"]
            x = ent.x.float()
            r = rel_of[b[KG_ETYPE].input_id.cpu()].to(a.device)
            h = ent.src_index
            q = model.query(x[h], r, model.neighbours(b, x)[h])
            cand = torch.cat([ent.dst_pos_index, ent.dst_neg_index.reshape(-1)])
            gid = ent.n_id[cand]
            yield softmax_loss(q, model.entity(x[cand], deg_t[gid]), gid)


def train(store, a) -> dict:
    """Train ``a.steps`` batches, then score ``a.eval_queries`` validation queries."""
    ds = WikiKG90Mv2Dataset(store)
    feat = store.features("entity", "feat")
    indptr, _ = store.csc(KG_ETYPE)
    log_deg = np.log1p(np.diff(np.asarray(indptr))).astype(np.float32)
    deg_t = torch.from_numpy(log_deg).to(a.device)
    n = ds.num_entities
    torch.manual_seed(a.seed)
    model = KGModel(ds.num_feat_dims, ds.relation_feat, a.dim).to(a.device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    batches = (neighbour_batches(store, deg_t, model, a) if a.neighbors
               else feature_batches(store, feat, deg_t, model, a, n))
    t0, loss_sum = time.perf_counter(), 0.0
    for step, loss in zip(range(a.steps), batches):
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum += float(loss.detach())
        if (step + 1) % max(1, a.steps // 5) == 0:
            log.info("step %d: loss %.3f", step + 1, loss_sum / (step + 1))
    batches.close()
    train_s = time.perf_counter() - t0
    valid = ds.valid_dict["h,r->t"]
    m = min(a.eval_queries, len(valid["t"]))
    ev = WikiKG90Mv2Evaluator()
    t1 = time.perf_counter()
    model.eval()
    pred = top10(model, queries(model, store, feat, valid["hr"][:m], a), feat, log_deg,
                 a.device)
    mrr = ev.eval({"h,r->t": {"t_pred_top10": pred, "t": valid["t"][:m]}})["mrr"]
    rand = ev.eval({"h,r->t": {"t_pred_top10": random_top10(n, m, a.seed),
                               "t": valid["t"][:m]}})["mrr"]
    r = dict(mrr=mrr, random_mrr=rand, expected_random_mrr=float(sum(1 / k for k in
                                                                      range(1, 11)) / n),
             loss=loss_sum / max(1, a.steps), queries=m, train_seconds=train_s,
             eval_seconds=time.perf_counter() - t1)
    print(f"validation MRR {mrr:.4f} on {m} queries (random ranking {rand:.2e}, expected "
          f"{r['expected_random_mrr']:.2e}); {a.steps} steps in {train_s:.1f} s")
    if a.save_test:
        hr = ds.test_dict("test-dev")["h,r->t"]["hr"]
        sizes = {"test-dev": len(hr), "test-challenge": len(ds.test_dict("test-challenge")
                                                             ["h,r->t"]["hr"])}
        path = WikiKG90Mv2Evaluator(sizes).save_test_submission(
            {"h,r->t": {"t_pred_top10": top10(model, queries(model, store, feat, hr, a),
                                              feat, log_deg, a.device)}},
            a.save_test, "test-dev")
        print(f"test-dev submission: {path}")
    return r


def main(argv=None) -> dict:  # noqa: D103
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="a store written by featurestore preprocess wikikg90mv2")
    ap.add_argument("--demo", action="store_true", help="train on a tiny twin")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--negatives", type=int, default=512, help="uniform negatives per batch")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--neighbors", type=int, default=0,
                    help="K > 0: heads also encoded from K sampled neighbours per direction "
                         "(LinkNeighborLoader batches)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-queries", type=int, default=2000)
    ap.add_argument("--save-test", metavar="DIR", help="write the test-dev submission there")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    if a.demo or a.store is None:
        a.store = demo_store(tempfile.mkdtemp(prefix="wikikg-demo-"))
    with fs.open_store(a.store) as store:
        return train(store, a)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    main()
