"""`genni tune`: a tiny search, resuming it, the best config, bad space files."""

import json

import keras_tuner as kt
import pytest

from genni.pipeline.cli import main as cli
from genni.pipeline.training import config as configs
from genni.pipeline.training import tune
from genni.pipeline.training.config import TrainConfig
from tests.conftest import make_dataset

SMALL_SPACE = {
    "sampler": {"type": "choice", "values": ["genni", "uniform"]},
    "hidden_size": 16,
    "num_layers": 1,
    "num_heads": 2,
    "learning_rate": {"type": "float", "min": 1e-3, "max": 1e-2, "log": True},
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(
        tmp_path_factory.mktemp("tune"), num_users=200, num_items=60, seed=9, max_len=8
    )[0]


def test_tiny_search_writes_table_and_best_config_and_resumes(
    dataset, tmp_path, capsys
):
    space = tmp_path / "space.json"
    space.write_text(json.dumps(SMALL_SPACE))
    out = tmp_path / "search"
    args = [
        "tune",
        "--data",
        dataset,
        "--output",
        str(out),
        "--max-trials",
        "2",
        "--epochs-per-trial",
        "1",
        "--space",
        str(space),
    ]
    assert cli.main(args) == 0
    results = json.loads((out / tune.RESULTS_FILE).read_text())
    assert len(results["trials"]) == 2
    scores = [t[tune.OBJECTIVE] for t in results["trials"]]
    assert scores == sorted(scores, reverse=True)
    # Trial 0 trains the defaults (GenNi, learning rate 1e-3).
    first = next(t for t in results["trials"] if t["trial"] == "0")
    assert first["hyperparameters"]["sampler"] == "genni"
    assert first["hyperparameters"]["learning_rate"] == pytest.approx(1e-3)
    assert "| rank |" in (out / tune.TABLE_FILE).read_text()

    # Re-running with a larger budget continues: only one new trial is
    # trained, here on packed batches.
    args[args.index("--max-trials") + 1] = "3"
    assert cli.main([*args, "--pack"]) == 0
    results = json.loads((out / tune.RESULTS_FILE).read_text())
    assert sorted(t["trial"] for t in results["trials"]) == ["0", "1", "2"]
    packed = {t["trial"]: t["config"]["pack"] for t in results["trials"]}
    assert packed == {"0": False, "1": False, "2": True}

    # The best config round-trips into `genni train --config`.
    best = out / tune.BEST_CONFIG_FILE
    config = json.loads(best.read_text())
    assert config["hidden_size"] == 16
    assert "epochs" not in config and "pack" not in config
    # (What `genni train --config` would train, without training it.)
    from genni.pipeline.cli import train_args

    argv = ["train", "--data", dataset, "--output", "o", "--config", str(best)]
    retrain = train_args.config_from_args(cli.build_parser().parse_args(argv))
    retrained = retrain.to_dict()
    for key, value in config.items():
        assert retrained[key] == value


def test_hyperparameters_map_to_a_valid_config():
    hp = kt.HyperParameters()
    base = TrainConfig.of(data="d", output="o", **tune.DEFAULT_SETTINGS)
    config = tune.config_from_hp(hp, tune.DEFAULT_SPACE, base)
    assert config == base  # Defaults: `genni train`'s (the recommended preset).
    assert base == TrainConfig.of(
        data="d", output="o", **configs.preset(configs.DEFAULT_PRESET)
    )
    hp = kt.HyperParameters()
    hp.Fixed("sampler", "genni")
    hp.Fixed("hidden_size", 32)
    hp.Fixed("num_heads", 4)
    hp.Fixed("self_adjust_alpha", True)
    config = tune.config_from_hp(hp, tune.DEFAULT_SPACE, base)
    assert (
        config.sampler.alpha_step == configs.DEFAULT_ALPHA_STEP
        and 32 % config.model.num_heads == 0
    )


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not YAML/JSON"),
        ('["sampler"]', "must hold a mapping"),
        ('{"alpha": 1, "alpha": 2}', "the key 'alpha' is given twice"),
        ('{"alpha": {"type": "float", "min": 0, "max": 1, "logg": true}}', "logg"),
        ('{"hidden_size": {"type": "int", "min": 16, "max": 64.5}}', "whole number"),
        ('{"learning_rate": {"type": "choice", "values": ["fast"]}}', "finite number"),
        ('{"alpah": 1}', "unknown settings"),
        ('{"alpha": {"type": "float", "min": 3, "max": 1}}', "above max"),
        ('{"beta": {"type": "float", "min": 0, "max": 1, "log": true}}', "log scale"),
        ('{"sampler": {"type": "choice", "values": []}}', "non-empty list"),
        ('{"dropout": {"type": "gaussian"}}', "type must be"),
    ],
)
def test_bad_space_file(tmp_path, content, message, capsys):
    space = tmp_path / "space.json"
    space.write_text(content)
    code = cli.main(
        [
            "tune",
            "--data",
            str(tmp_path),
            "--output",
            str(tmp_path / "o"),
            "--space",
            str(space),
        ]
    )
    assert code == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_yaml_space(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("sampler: genni\nalpha:\n  type: float\n  min: 1.0\n  max: 3.0\n")
    loaded = tune.load_space(str(space))
    assert loaded["sampler"] == "genni" and loaded["alpha"]["max"] == 3.0
