"""Nothing lost (issue 10, items 1-3 and 15): hostile names, replacing only our own stores,
inputs inside the output, one writer at a time, YAML aliases."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import featurestore as fs
from featurestore.errors import FeatureStoreError, UnsafePathError
from preprocess import Job
from preprocess.errors import SpecError
from preprocess.jobs.spec import load_spec
from preprocess.jobs.spec_steps import run_spec

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _tree(path) -> dict:
    """Every file under ``path`` with its bytes (what must survive untouched)."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def _victim(tmp_path):
    v = tmp_path / "victim"
    (v / "sub").mkdir(parents=True)
    (v / "precious.txt").write_text("do not delete")
    (v / "sub" / "more.bin").write_bytes(b"\x00\x01")
    return v, _tree(v)


def _spec(tmp_path, nt="paper", rel="cites", split="train", feat="feat", extra=""):
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    np.save(d / "e.npy", np.array([[0, 1, 2], [1, 2, 0]]))
    np.save(d / "f.npy", np.ones((3, 2), np.float32))
    np.save(d / "t.npy", np.array([0, 1]))
    spec = d / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        nodes:
          {nt!r}:
            count: 3
            features: {{{feat!r}: f.npy}}
        edges:
          - relation: [{nt!r}, {rel!r}, {nt!r}]
            path: e.npy
        splits:
          {split!r}: {{{nt!r}: t.npy}}
        """) + extra)
    return spec


@pytest.mark.parametrize("where", ["nt", "rel", "split", "feat"])
@pytest.mark.parametrize("kind", ["dotdot", "absolute"])
def test_hostile_names_in_a_spec_touch_nothing(tmp_path, where, kind):
    victim, before = _victim(tmp_path)
    name = "../../victim" if kind == "dotdot" else str(victim)
    spec = _spec(tmp_path, **{where: name})
    with pytest.raises(UnsafePathError, match="spec.yaml"):
        load_spec(spec)
    with pytest.raises(UnsafePathError):
        run_spec(spec, tmp_path / "out", progress=False)
    assert _tree(victim) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["a/b", "a\\b", "a\x00b", ".hidden", "a__b", ""])
def test_writer_refuses_bad_names(tmp_path, name):
    w = fs.create_store(tmp_path / "s")
    with pytest.raises(FeatureStoreError):
        w.add_node_type(name, 3)
    w.add_node_type("v", 3)
    with pytest.raises(FeatureStoreError):
        w.add_features("v", name, np.ones((3, 2)))
    with pytest.raises(FeatureStoreError):
        w.add_split(name, "v", [0])
    w.close()


def test_yaml_aliases_are_refused(tmp_path):
    spec = _spec(tmp_path)
    bomb = "\n".join([f"x{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]" if i else
                      "x0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(8)])
    spec.write_text(spec.read_text() + bomb + "\n")
    with pytest.raises(SpecError, match="aliases"):
        load_spec(spec)


def test_replace_refuses_directories_that_are_not_our_stores(tmp_path):
    victim, before = _victim(tmp_path)
    for mode in ("w", "w-", "a"):
        with pytest.raises(fs.StoreExistsError, match="nothing was removed"):
            fs.create_store(victim, mode=mode)
    import zarr

    zarr.open_group(str(victim / "z"), mode="w")  # a zarr group of another format
    zbefore = _tree(victim)
    with pytest.raises(FeatureStoreError):
        fs.create_store(victim / "z", mode="w")
    with pytest.raises(fs.StoreExistsError):
        Job(victim / "z", "t", [], {}, progress=False, force=True)
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(fs.StoreExistsError, match="A file is there"):
        fs.create_store(f, mode="w")
    assert _tree(victim) == zbefore and {k: v for k, v in zbefore.items() if k in before} == before
    assert f.read_text() == "x"


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nothing can be written in: a read-only tmpfs as root (chmod does not stop
    root), else a directory without write permission."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() == 0:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M,ro", "tmpfs", str(d)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {p.stderr.strip()}")
        try:
            yield d
        finally:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)
    else:
        d.chmod(0o555)
        try:
            yield d
        finally:
            d.chmod(0o755)


def test_read_only_output_is_a_named_error(read_only_dir, tmp_path):
    """Issue 10 item 13: an output in a read-only place (a read-only file system gave a bare
    ``OSError: [Errno 30]``) is an UnsafePathError naming the store, for the writer and for a
    job, both for a new store directory and for the directory itself."""
    for out in (read_only_dir / "s", read_only_dir):
        with pytest.raises(UnsafePathError, match=str(out)):
            fs.create_store(out)
    np.save(tmp_path / "e.npy", np.array([[0, 1], [1, 2]]))
    from featurestore.cli import main as cli_main

    assert cli_main(["preprocess", "edges", str(tmp_path / "e.npy"), str(read_only_dir / "s"),
                     "--no-progress"]) == 2


def test_replacing_our_store_keeps_the_users_files(tmp_path):
    p = tmp_path / "s"
    w = fs.create_store(p)
    w.add_node_type("old", 5)
    w.commit()
    (p / "notes.txt").write_text("mine")
    (p / "nodes" / "README").write_text("inside our group: ours to replace")
    w = fs.create_store(p, mode="w")
    w.add_node_type("new", 2)
    w.commit()
    s = fs.open_store(p)
    assert s.node_types == ["new"]
    assert (p / "notes.txt").read_text() == "mine"
    assert not (p / "nodes" / "README").exists()


def test_input_inside_the_output_is_refused_even_with_force(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    f = out / "edges.npy"
    np.save(f, np.array([[0, 1], [1, 0]]))
    before = f.read_bytes()
    for force in (False, True):
        with pytest.raises(UnsafePathError, match="inside"):
            Job(out, "t", [f], {}, progress=False, force=force)
    from featurestore.cli import main

    assert main(["preprocess", "edges", str(f), str(out), "--force", "--no-progress"]) != 0
    assert "inside" in capsys.readouterr().err
    assert f.read_bytes() == before and sorted(os.listdir(out)) == ["edges.npy"]


def test_second_writer_is_refused(tmp_path):
    p = tmp_path / "s"
    w = fs.create_store(p)
    w.add_node_type("v", 3)
    for mode in ("a", "w"):
        with pytest.raises(fs.StoreLockedError, match="write lock"):
            fs.create_store(p, mode=mode)
    with pytest.raises(fs.StoreLockedError):
        Job(p, "t", [], {}, progress=False, force=True)
    w.commit()  # committing releases the lock
    w2 = fs.create_store(p, mode="w")
    w2.add_node_type("v", 4)
    w2.commit()
    assert fs.open_store(p).num_nodes("v") == 4


HOLD = """
import sys, time
import featurestore as fs
w = fs.create_store(sys.argv[1], mode="w")
w.add_node_type("v", 3)
print("locked", flush=True)
time.sleep(120)
"""


def test_writer_in_another_process_holds_the_lock_until_it_dies(tmp_path):
    p = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(p)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(fs.StoreLockedError, match=f"pid.*{proc.pid}"):
            fs.create_store(p, mode="a")
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    w = fs.create_store(p, mode="a")  # kill -9 released the lock: the store resumes
    assert w.has_array("nodes/v/orig_id")
    w.commit()


def test_two_jobs_into_one_output(tmp_path):
    f = tmp_path / "in.npy"
    np.save(f, np.arange(4))
    a = Job(tmp_path / "out", "t", [f], {}, progress=False)
    a.run_step("nodes", lambda: a.writer.add_node_type("n", 4))
    with pytest.raises(fs.StoreLockedError):
        Job(tmp_path / "out", "t", [f], {}, progress=False)
    a.commit()
    assert fs.open_store(tmp_path / "out").num_nodes("n") == 4


def test_remote_lock_object(tmp_path):
    url = f"memory://lock-test/{tmp_path.name}"
    w = fs.create_store(url)
    w.add_node_type("v", 2)
    with pytest.raises(fs.StoreLockedError, match="lock object"):
        fs.create_store(url, mode="a")
    w.commit()
    w2 = fs.create_store(url, mode="w")
    w2.add_node_type("v", 3)
    w2.commit()
    assert fs.open_store(url).num_nodes("v") == 3


def test_too_small_budget_is_refused_before_anything_is_written(tmp_path, capsys):
    from featurestore.cli import main
    from preprocess.errors import BudgetTooSmallError

    spec = _spec(tmp_path)
    with pytest.raises(BudgetTooSmallError, match="nothing was written"):
        run_spec(spec, tmp_path / "out", budget_bytes=1 << 20, progress=False)
    assert main(["preprocess", "spec", str(spec), str(tmp_path / "out"), "--memory", "1MiB",
                 "--no-progress"]) != 0
    assert "at least" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_dry_run_reports_the_disk_the_declared_ids_need(tmp_path):
    (tmp_path / "e.csv").write_text("src,dst\n0,1\n1,20000000\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  n: {}\nedges:\n  - relation: [n, e, n]\n    path: e.csv\n")
    job = run_spec(spec, tmp_path / "out", dry_run=True, progress=False)
    need = sum(int(st.plan.get("disk_bytes", 0)) for st in job.steps)
    assert need >= 20_000_001 * 16  # orig_id + indptr, int64 each: what the real run writes
    assert not (tmp_path / "out").exists()


def test_edges_dry_run_counts_node_ids_and_edges(tmp_path):
    """Issue 22 item 3: the edges job's dry run scans the ids (as the spec job's does): 20M
    node ids need ~160 MB of indptr, not the 8 bytes it planned; two edges counted from the
    CSV; nothing written."""
    from preprocess.jobs.edges import run_edges_job

    (tmp_path / "e.csv").write_text("src,dst\n0,1\n1,20000000\n")
    job = run_edges_job(tmp_path / "e.csv", tmp_path / "out", dry_run=True, progress=False)
    plans = {st.name: st.plan for st in job.steps}
    assert plans["nodes:node"]["nodes"] == 20_000_001
    assert plans["csc:node__to__node"]["edges"] == 2
    need = sum(int(p.get("disk_bytes", 0)) for p in plans.values())
    assert need >= 20_000_001 * 8  # indptr, int64: what the real run writes
    assert not (tmp_path / "out").exists()
