"""``examples/dgl_link_pred.py``: DGL 2.1.0's GraphSAGE link-prediction example ported onto a
store (run in .venv-dgl). The port is DGL's file plus the hunks of
``examples/dgl_link_pred.patch``: undoing them gives back DGL's file byte for byte (its git
blob id), and they count as ``diff -U0`` hunks (per hunk the larger of removed and added
lines). Then the script runs as DGL wrote it (10 epochs, fanouts [15, 10, 5], batch 512) on a
small community graph and ranks held-out edges above random negatives."""

from __future__ import annotations

import hashlib
import re
import runpy
import sys
from pathlib import Path

import numpy as np

from dgl_helpers import csc_of, import_dgl, patch_hunks, unport

dgl = import_dgl()

import featurestore as fs  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SCRIPT, PATCH = EXAMPLES / "dgl_link_pred.py", EXAMPLES / "dgl_link_pred.patch"
UPSTREAM_BLOB = "18fae41af7eef44e809cac89f7112c98cd228fde"  # v2.1.0:examples/.../link_pred.py
HEADER_END = "# --- end of header ---\n"


def test_port_is_dgl_file_plus_patch_and_counts():
    text = SCRIPT.read_text()
    assert text.startswith("# Ported from DGL 2.1.0") and "Apache License" in text
    body = text.split(HEADER_END, 1)[1].splitlines(keepends=True)
    hunks = patch_hunks(PATCH.read_text())
    original = "".join(unport(body, hunks)).encode()
    blob = hashlib.sha1(b"blob %d\0" % len(original) + original).hexdigest()
    assert blob == UPSTREAM_BLOB
    changed = sum(max(len(r), len(a)) for _, _, r, a in hunks)
    assert changed == 4 <= 10  # docs/migrate.md lists 4


def _community_store(root: Path, n=300, m=1500, groups=6, dim=16, seed=0):
    """A simple symmetric graph, mostly within communities; features carry the community;
    held-out within-community pairs as valid/test edge splits with 20 random negatives."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, groups, n)
    x = np.eye(groups, dim, dtype=np.float32)[comm] + 0.5 * rng.standard_normal((n, dim),
                                                                                dtype=np.float32)
    members = [np.flatnonzero(comm == c) for c in range(groups)]
    a = rng.integers(0, n, m)
    b = np.where(rng.random(m) < 0.9, [rng.choice(members[comm[i]]) for i in a],
                 rng.integers(0, n, m))
    pairs = {(min(i, j), max(i, j)) for i, j in zip(a.tolist(), b.tolist()) if i != j}
    pairs = np.array(sorted(pairs))
    rng.shuffle(pairs)
    held, kept = pairs[:200], pairs[200:]
    s = np.concatenate([kept[:, 0], kept[:, 1]])
    d = np.concatenate([kept[:, 1], kept[:, 0]])
    w = fs.create_store(root / "dataset" / "ogbl-citation2", mode="w")
    w.add_node_type("paper", n)
    w.add_edge_type(("paper", "cites", "paper"), *csc_of(s, d, n))
    w.add_features("paper", "feat", x)
    for name, part in (("valid", held[:100]), ("test", held[100:])):
        w.add_edge_split(name, ("paper", "cites", "paper"), src=part[:, 0], dst=part[:, 1],
                         neg_dst=rng.integers(0, n, (len(part), 20)))
    w.commit()


def test_runs_and_ranks_held_out_edges(tmp_path, monkeypatch, capsys):
    _community_store(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--mode", "cpu"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"Loss (\d+\.\d+)", out)]
    assert len(losses) == 10 and losses[-1] < losses[0]
    valid, test = (float(v) for v in re.search(r"Validation MRR (\S+), Test MRR (\S+)",
                                                 out).groups())
    # random ranking among 1 + 20: MRR = H(21) / 21 ~ 0.17
    assert valid > 0.3 and test > 0.3
