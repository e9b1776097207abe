"""Fixtures: small synthetic OGB datasets in both official layouts."""

from __future__ import annotations

import pytest

from ogb_helpers import MAG_SPEC, PAPERS_SPEC
from preprocess.synth import synth_mag240m, synth_papers100m


@pytest.fixture(scope="session")
def mag_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mag")
    synth_mag240m(root, 0, seed=3, labeled_share=0.3, progress=False, spec=MAG_SPEC)
    return root


@pytest.fixture(scope="session", params=[False, True], ids=["stored", "deflated"])
def papers_root(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("papers")
    synth_papers100m(root, 0, seed=5, labeled_share=0.3, compress=request.param,
                     progress=False, spec=PAPERS_SPEC)
    return root
