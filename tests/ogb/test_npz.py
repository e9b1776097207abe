"""Out-of-core .npz members against numpy's own np.load (the independent reference)."""

from __future__ import annotations

import numpy as np
import pytest

from preprocess.ogb.errors import RawDataError, RawFileNotFoundError
from preprocess.ogb.npz import NpzArchive, NpzWriter


@pytest.fixture
def arrays():
    rng = np.random.default_rng(1)
    return {"node_feat": rng.standard_normal((1001, 7)).astype(np.float32),
            "edge_index": rng.integers(0, 1000, (2, 3333)),
            "node_year": rng.integers(1990, 2020, (1001, 1)),
            "num_nodes_list": np.array([1001]),
            "f": np.asfortranarray(rng.standard_normal((5, 9))),
            "empty": np.zeros((0, 4), np.float16)}


@pytest.mark.parametrize("writer", ["savez", "savez_compressed", "ours", "ours_deflated"])
def test_members_match_np_load(tmp_path, arrays, writer):
    path = tmp_path / "a.npz"
    if writer.startswith("savez"):
        getattr(np, writer)(path, **arrays)
    else:
        with NpzWriter(path, compress=writer.endswith("deflated")) as w:
            for k, v in arrays.items():
                if v.flags.f_contiguous and not v.flags.c_contiguous:
                    continue  # the writer writes C order only
                w.write(k, v.shape, v.dtype, (v[i:i + 100] for i in range(0, len(v), 100)))
    ref = np.load(path)
    arc = NpzArchive(path)
    assert set(arc.members) == set(ref.files)
    compressed = writer.endswith(("compressed", "deflated"))
    for k in ref.files:
        m = arc[k]
        want = ref[k]
        assert m.shape == want.shape and m.dtype == want.dtype and m.compressed == compressed
        np.testing.assert_array_equal(m.read(), want)
        flat = list(m.iter_flat(block_elems=97))
        assert all(b.size <= 97 for b in flat)
        got = np.concatenate(flat) if flat else np.empty(0, m.dtype)
        np.testing.assert_array_equal(got, want.reshape(-1, order="F" if m.fortran_order else "C"))
        if not m.fortran_order and want.ndim == 2 and want.size:
            np.testing.assert_array_equal(np.concatenate(list(m.iter_rows(64))), want)
        np.testing.assert_array_equal(m.to_npy(tmp_path / f"{k}.npy"), want)
        if not compressed and want.size:
            mm = m.memmap()
            assert isinstance(mm, np.memmap) and mm.offset == m.data_offset
            np.testing.assert_array_equal(mm, want)
        elif compressed:
            with pytest.raises(RawDataError, match="compressed"):
                m.memmap()


def test_stored_member_is_not_read_into_memory(tmp_path):
    big = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32,
                                    shape=(1 << 16, 64))
    big[::1000] = 1.0
    with NpzWriter(tmp_path / "a.npz") as w:
        w.write("x", big.shape, big.dtype, (big[i:i + 4096] for i in range(0, len(big), 4096)))
    m = NpzArchive(tmp_path / "a.npz")["x"]
    mm = m.memmap()
    assert mm.base is not None and not mm.flags.owndata  # a view of the file's pages
    np.testing.assert_array_equal(mm[::1000], 1.0)


def test_errors(tmp_path):
    with pytest.raises(RawFileNotFoundError, match="none.npz"):
        NpzArchive(tmp_path / "none.npz")
    (tmp_path / "bad.npz").write_bytes(b"hello")
    with pytest.raises(RawDataError, match="bad.npz"):
        NpzArchive(tmp_path / "bad.npz")
    np.savez(tmp_path / "obj.npz", o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(RawDataError, match="numeric"):
        NpzArchive(tmp_path / "obj.npz")
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(1000))
    arc = NpzArchive(tmp_path / "c.npz")
    with pytest.raises(RawDataError, match="Expected a member 'y'"):
        arc["y"]
    with pytest.raises(ValueError, match="Expected 10 elements"):
        with NpzWriter(tmp_path / "w.npz") as w:
            w.write("x", (10,), np.int64, [np.arange(4)])
    assert not (tmp_path / "w.npz").exists() and not (tmp_path / "w.npz.partial").exists()


@pytest.mark.parametrize("compression", ["stored", "deflated"])
def test_header_claiming_more_rows_than_the_body_is_refused(tmp_path, compression):
    import io
    import zipfile

    body = np.arange(2600, dtype=np.float64)  # ~21 KB
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                                "shape": (20_000_000,)})
    buf.write(body.tobytes())
    ct = zipfile.ZIP_STORED if compression == "stored" else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(tmp_path / "lie.npz", "w", compression=ct) as zf:
        zf.writestr("node_feat.npy", buf.getvalue())
    with pytest.raises(RawDataError, match="node_feat.npy.*160000000 bytes|160000000 bytes"):
        NpzArchive(tmp_path / "lie.npz")["node_feat"]
