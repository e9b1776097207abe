"""Safe .pt loading: ogb's dicts of NumPy arrays load, anything else is refused unexecuted."""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
import torch

from preprocess.ogb.errors import RawDataError, RawFileNotFoundError, UnsafePickleError
from preprocess.ogb.ptload import load_pt


def test_plain_dicts_of_numpy_load(tmp_path):
    obj = {"train": np.arange(10, dtype=np.int64), "valid": np.arange(3, dtype=np.int32),
           "f16": np.ones((2, 3), np.float16), "b": np.array([True, False]),
           "paper": 121751666, "num_classes": np.int64(153), "u": np.uint8(7),
           "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3))}
    torch.save(obj, tmp_path / "x.pt")
    got = load_pt(tmp_path / "x.pt")
    assert set(got) == set(obj)
    for k, v in obj.items():
        np.testing.assert_array_equal(got[k], v)
        assert np.asarray(got[k]).dtype == np.asarray(v).dtype


class _Evil:
    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (os.system, (f"touch {self.flag}",))


class _Custom:
    pass


@pytest.mark.parametrize("payload", ["system", "custom_class", "nested"])
def test_split_dict_with_other_pickled_object_is_refused(tmp_path, payload):
    flag = tmp_path / "executed"
    bad = {"system": _Evil(flag), "custom_class": _Custom(),
           "nested": [np.arange(2), {"deep": _Evil(flag)}]}[payload]
    path = tmp_path / "split_dict.pt"
    torch.save({"train": np.arange(5), "valid": np.arange(2), "test": bad}, path)
    with pytest.raises(UnsafePickleError, match="split_dict.pt") as ei:
        load_pt(path)
    assert not flag.exists(), "the pickled call must never run"
    assert "weights_only` set to `False`" not in str(ei.value)
    assert isinstance(ei.value, __import__("pickle").UnpicklingError)


def test_missing_and_garbage(tmp_path):
    with pytest.raises(RawFileNotFoundError, match="nope.pt"):
        load_pt(tmp_path / "nope.pt")
    (tmp_path / "g.pt").write_bytes(b"not a torch file at all")
    with pytest.raises((RawDataError, UnsafePickleError), match="g.pt"):
        load_pt(tmp_path / "g.pt")
    (tmp_path / "t.pt").write_text("hello world\n")  # a text file: torch raised KeyError: 101
    with pytest.raises(RawDataError, match="t.pt"):
        load_pt(tmp_path / "t.pt")


def test_torch_default_containers_still_load(tmp_path):
    torch.save(collections.OrderedDict(a=np.arange(3)), tmp_path / "o.pt")
    assert list(load_pt(tmp_path / "o.pt")) == ["a"]


def test_empty_arrays_load(tmp_path):
    torch.save({"valid": np.zeros(0, np.int64), "x": np.zeros((0, 3), np.float16)},
               tmp_path / "e.pt")
    got = load_pt(tmp_path / "e.pt")
    assert got["valid"].shape == (0,) and got["x"].dtype == np.float16


def test_old_torch_is_refused_not_bypassed(tmp_path, monkeypatch):
    from preprocess.ogb.errors import TorchTooOldError

    torch.save({"train": np.arange(3)}, tmp_path / "s.pt")
    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    with pytest.raises(TorchTooOldError, match="torch >= 2.6"):
        load_pt(tmp_path / "s.pt")
