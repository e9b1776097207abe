"""The demo pipeline runs end to end and reports every step."""

from __future__ import annotations

import numpy as np

import featurestore as fs
from preprocess.synth.demo import format_report, run_demo


def test_demo_small(tmp_path):
    res = run_demo(tmp_path, 0.00005, batches=3, batch_size=64, memory=64 << 20)
    assert [s.name for s in res.steps] == ["synth", "preprocess", "open", "gather"]
    assert all(s.seconds >= 0 and s.amount > 0 for s in res.steps)
    text = format_report(res)
    assert "gather" in text and "M edges/s" in text
    s = fs.open_store(res.store)
    assert s.feature_names("author") == ["feat"]
    ids = np.arange(min(10, s.num_nodes("paper")))
    assert s.features("paper").gather(ids).shape == (ids.size, 768)
