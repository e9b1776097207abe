"""Without DGL, ``output="dgl"`` fails with an error that says what to install (runs in any env)."""

from __future__ import annotations

import sys

import pytest


def test_missing_dgl_names_what_to_install(monkeypatch):
    from loaders.dgl import DGLNotInstalledError, require_dgl, to_blocks

    monkeypatch.setitem(sys.modules, "dgl", None)  # makes `import dgl` raise ImportError
    with pytest.raises(DGLNotInstalledError, match=r"dgl==2\.1\.0.*scripts/dgl-env\.sh") as e:
        require_dgl()
    from featurestore.errors import FeatureStoreError

    assert isinstance(e.value, ImportError) and isinstance(e.value, FeatureStoreError)
    with pytest.raises(ImportError, match="output='dgl'"):
        to_blocks(None)


def test_importing_the_adapter_does_not_import_dgl(monkeypatch):
    monkeypatch.delitem(sys.modules, "loaders.dgl", raising=False)
    monkeypatch.setitem(sys.modules, "dgl", None)
    import loaders.dgl  # would raise if it imported dgl at module level

    assert sys.modules["dgl"] is None  # dgl was not imported behind our back either
    assert callable(loaders.dgl.DataLoader)


def test_a_directory_named_dgl_is_not_taken_for_dgl(monkeypatch, tmp_path):
    import types

    from loaders.dgl import DGLNotInstalledError, require_dgl

    fake = types.ModuleType("dgl")
    fake.__path__ = [str(tmp_path / "dgl")]  # what a namespace package looks like: no __file__
    monkeypatch.setitem(sys.modules, "dgl", fake)
    with pytest.raises(DGLNotInstalledError, match="plain directory"):
        require_dgl()
