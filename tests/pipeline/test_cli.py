import pytest

from genni.components import schema
from genni.pipeline.cli import main as cli


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("preprocess", "synth", "stats"):
        assert command in out


def test_preprocess_help_explains_flags(capsys):
    with pytest.raises(SystemExit):
        cli.main(["preprocess", "--help"])
    out = capsys.readouterr().out
    for flag in (
        "--input",
        "--output",
        "--format",
        "--min-count",
        "--min-rating",
        "--max-len",
        "--item-attributes",
        "--overwrite",
    ):
        assert flag in out


def test_synth_then_stats(tmp_path, capsys):
    log = tmp_path / "log.json.gz"
    assert (
        cli.main(
            ["synth", "--output", str(log), "--num-users", "60", "--num-items", "20"]
        )
        == 0
    )
    out = tmp_path / "data"
    assert cli.main(["preprocess", "--input", str(log), "--output", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["stats", str(out)]) == 0
    table = capsys.readouterr().out
    assert "users" in table and "sparsity" in table
    assert cli.main(["stats", str(tmp_path)]) == cli.EXIT_USAGE
    assert schema.STATS_FILE in capsys.readouterr().err


def test_unknown_flag_for_synth(tmp_path, capsys):
    code = cli.main(["synth", "--output", str(tmp_path / "x.json"), "--bogus"])
    assert code == cli.EXIT_USAGE
    assert "--bogus" in capsys.readouterr().err
