"""The full-size projection reads a real job manifest and scales each step by its bound."""

from __future__ import annotations

import json

import pytest

from preprocess.ogb.layout import MAG240M
from preprocess.ogb.mag240m import preprocess_mag240m
from preprocess.ogb.project import Target, format_projection, main, project


def test_projection_from_manifest(mag_root, tmp_path, capsys):
    out = tmp_path / "s"
    preprocess_mag240m(mag_root, out, derive_features="mean", budget_bytes=32 << 20,
                       progress=False)
    manifest = json.loads((out / ".preprocess" / "manifest.json").read_text())
    rows = project(manifest, Target(iops_ratio=4.0, seq_gbps=1.0))
    by = {r["step"]: r for r in rows}
    assert set(by) == set(manifest["steps"])
    f = by["features:paper"]
    assert f["full"] == MAG240M["paper"] * 768 * 2
    assert f["full_seconds_target"] == pytest.approx(f["full"] / 1e9)
    d = by["derive:author-feat"]
    assert d["full_seconds_target"] == pytest.approx(d["full_seconds_here"] / 4.0)
    c = by["csc:paper__cites__paper"]
    assert c["full"] == pytest.approx(c["measured"] * MAG240M["paper"] / 3000)
    assert "total" in format_projection(rows)
    assert main([str(out)]) == 0 and "derive:author-feat" in capsys.readouterr().out
