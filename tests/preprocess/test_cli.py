"""``featurestore preprocess ...`` on the command line."""

from __future__ import annotations

import numpy as np
import pytest

import featurestore as fs
from featurestore.cli import build_parser, main

from pp_helpers import make_toy_dataset, reference_csc


def test_edges_command(tmp_path, capsys):
    rng = np.random.default_rng(0)
    e = rng.integers(0, 50, (2, 400))
    np.save(tmp_path / "e.npy", e)
    store = str(tmp_path / "s")
    args = ["preprocess", "edges", str(tmp_path / "e.npy"), store, "--undirected", "--csr",
            "--memory", "64MiB", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "csc:node__to__node" in out and "edges/s" in out
    s = fs.open_store(store)
    want = reference_csc(e[0], e[1], 50, 50, coalesce=True, symmetrize=True)
    np.testing.assert_array_equal(s.csc(("node", "to", "node"))[1], want[1])
    assert main(args) == 0  # complete: every step is skipped
    assert "done before" in capsys.readouterr().out
    assert main([a for a in args if a != "--csr"]) == 2  # options changed
    assert "--force" in capsys.readouterr().err


def test_spec_command_dry_run_and_run(tmp_path, capsys):
    spec, _ = make_toy_dataset(tmp_path / "d")
    store = str(tmp_path / "s")
    assert main(["preprocess", "spec", spec, store, "--dry-run", "--no-progress"]) == 0
    assert "disk needed" in capsys.readouterr().out
    assert main(["preprocess", "spec", spec, store, "--memory", "32MiB", "--no-progress"]) == 0
    assert fs.open_store(store).num_nodes("venue") == 7


def test_missing_spec_file_is_a_clean_error(tmp_path, capsys):
    assert main(["preprocess", "spec", str(tmp_path / "none.yaml"), str(tmp_path / "s")]) == 2
    assert "none.yaml" in capsys.readouterr().err


def test_other_jobs_can_add_commands():
    from preprocess.cli import add_preprocess_command

    build_parser()
    p = add_preprocess_command("extra-test-job", "a job added by another module")
    args = p.parse_args(["--memory", "1GiB", "--dry-run"])
    assert args.memory == "1GiB" and args.dry_run


@pytest.mark.parametrize("text", ["2GB", "2GiB"])
def test_memory_reads_gb_as_gib(text):
    """``--memory 2GB`` is 2 GiB, as ``NeighborLoader(memory="2GB")`` reads it."""
    from preprocess.cli import job_kwargs

    args = build_parser().parse_args(["preprocess", "edges", "e.npy", "s", "--memory", text])
    assert job_kwargs(args)["budget_bytes"] == 2 << 30
