"""Every command refuses what it does not understand, before it writes
anything (issue 46): typo'd flags, values of the wrong type, unfinished runs,
retries after a refusal."""

import json
import os

import pytest

from genni.pipeline.cli import main as cli
from genni.pipeline.training.config import refuse_output_in_data


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


@pytest.mark.parametrize("inside", ["", "runs/r1"])
def test_train_refuses_an_output_that_is_or_is_inside_its_data(
    tmp_path, capsys, inside
):
    data = tmp_path / "data"
    data.mkdir()
    output = data / inside if inside else data
    args = ["train", "--data", str(data), "--output", str(output)]
    assert cli.main(args) == 2
    assert "is, or is inside, --data" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == []  # Nothing written.
    # A sibling whose name starts the same is not inside.
    refuse_output_in_data(str(tmp_path / "data2"), str(data))
    with pytest.raises(ValueError, match="is, or is inside"):
        refuse_output_in_data(str(data / "x"), str(data))


OLD_RUNS = os.path.join(os.path.dirname(__file__), "..", "data", "old_runs")


def test_an_unfinished_run_is_never_published_and_export_warns(tmp_path, capsys):
    from genni.pipeline.cli.serving import warn_unfinished

    killed = next(  # Runs killed in their last epoch: best weights, no metrics.
        os.path.join(OLD_RUNS, name)
        for name in sorted(os.listdir(OLD_RUNS))
        if os.path.isdir(os.path.join(OLD_RUNS, name, "best"))
    )
    base = tmp_path / "models"
    args = ["export", "--run", killed, "--output", str(base), "--against", str(base)]
    assert cli.main(args) == 2
    assert "is an unfinished run" in capsys.readouterr().err
    assert not base.exists()  # Nothing written.
    warn_unfinished(killed)
    assert "Warning:" in capsys.readouterr().err


def test_a_refused_run_leaves_nothing_behind(tmp_path, capsys):
    run = tmp_path / "r2"
    for command in ("train", "train", "pretrain"):  # A retry: the same refusal.
        args = [command, "--data", str(tmp_path / "none"), "--output", str(run)]
        assert cli.main(args) == 2
        assert "stats.json not found" in capsys.readouterr().err
        assert not run.exists()
    killed = os.path.join(OLD_RUNS, "recommended")  # A train run, not a pretrain.
    with pytest.raises(ValueError, match="is a `genni train` run, not a"):
        from genni.pipeline.training import pretrain

        pretrain.read_config(killed)
