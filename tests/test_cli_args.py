"""Bad numbers on the command line are usage errors naming the option (exit 2), not
tracebacks (issue 23 item 10): `plan --batch-size 0`, non-numeric fanouts, `replicate
--part-mib 0`; and replicate() refuses them by name too."""

import pytest

import featurestore as fs
from featurestore.cli import main


@pytest.mark.parametrize("argv,what", [
    (["plan", "STORE", "--batch-size", "0"], "--batch-size"),
    (["plan", "STORE", "--batch-size", "x"], "--batch-size"),
    (["plan", "STORE", "--fanouts", "a,b"], "--fanouts"),
    (["plan", "STORE", "--fanouts", "15,-3"], "--fanouts"),
    (["replicate", "SRC", "DST", "--part-mib", "0"], "--part-mib"),
    (["replicate", "SRC", "DST", "--threads", "0"], "--threads"),
    (["preprocess", "reorder", "SRC", "DST", "--fanouts", "a,b"], "--fanouts"),
    (["preprocess", "reorder", "SRC", "DST", "--batch-size", "0"], "--batch-size"),
    (["preprocess", "reorder", "SRC", "DST", "--expand-max-degree", "-1"], "--expand-max-degree"),
])
def test_bad_numbers_are_usage_errors(argv, what, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert what in err and "Traceback" not in err


def test_replicate_refuses_zero_part_bytes(tmp_path):
    from featurestore.remote.replicate import replicate

    with pytest.raises(fs.InvalidArgumentError, match="part_bytes"):
        replicate(tmp_path / "src", tmp_path / "dst", part_bytes=0)
