"""Every command refuses what it does not understand, before it writes
anything (issue 46): typo'd flags, values of the wrong type, unfinished runs,
retries after a refusal."""

import json

import pytest

from genni.pipeline.cli import main as cli


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("log") / "log.json"
    assert cli.main(["synth", "--output", str(log), "--num-users", "60"]) == 0
    return log


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--mincount", "10"], "--mincount: did you mean --min-count?"),
        (["--min_count", "10"], "--min_count: did you mean --min-count?"),
        (["--max-lenn=20"], "--max-lenn"),
    ],
)
def test_preprocess_refuses_flags_neither_it_nor_beam_knows(
    small_log, tmp_path, capsys, flags, named
):
    out = tmp_path / "data"
    args = ["preprocess", "--input", str(small_log), "--output", str(out)]
    assert cli.main(args + flags) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and named in err
    assert not out.exists()  # Refused before anything ran.


def test_beam_options_still_reach_beam(small_log, tmp_path):
    out = tmp_path / "data"
    args = ["preprocess", "--input", str(small_log), "--output", str(out)]
    assert cli.main([*args, "--runner", "DirectRunner", "--direct_num_workers=1"]) == 0
    assert json.loads((out / "stats.json").read_text())["users"] > 0


def test_batch_recommend_refuses_a_flag_it_does_not_have(tmp_path, capsys):
    args = ["batch-recommend", "--model", str(tmp_path), "--input", "x"]
    assert cli.main([*args, "--output", str(tmp_path / "o"), "--top-k", "3"]) == 2
    assert "unrecognized arguments: --top-k 3" in capsys.readouterr().err


def test_tune_refuses_zero_trials_before_writing(tmp_path, capsys):
    out = tmp_path / "search"
    args = ["tune", "--data", str(tmp_path), "--output", str(out), "--max-trials", "0"]
    assert cli.main(args) == 2
    assert "`max_trials` must be at least 1. Got 0." in capsys.readouterr().err
    assert not out.exists()


def test_train_reads_its_config_file_by_the_settings_types(tmp_path, capsys):
    config = tmp_path / "c.yaml"  # YAML too (JSON is YAML).
    config.write_text("exclude_seen: 'false'\npack: 'no'\n")
    args = ["train", "--data", str(tmp_path), "--output", str(tmp_path / "r")]
    assert cli.main([*args, "--config", str(config)]) == 2
    assert "`pack` must be true or false. Got 'no'." in capsys.readouterr().err
    config.write_text('{"epochs": 2, "epochs": 3}')
    assert cli.main([*args, "--config", str(config)]) == 2
    assert "the key 'epochs' is given twice" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
