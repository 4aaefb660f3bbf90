"""benchmarks/ablation.py: which recorded runs fill which cell of the encoder
x loss/sampler table, their means, and the side-by-side timing's settings."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import ablation

from genni.pipeline.training.config import TrainConfig

BEAUTY = json.dumps({"users": 22363, "items": 12101})
RECOMMENDED = dict(
    loss="sampled_softmax",
    sampler="genni",
    num_negatives=64,
    alpha=1.0,
    logq_correction=True,
    pack=True,
    patience=10,
)
PAPER = dict(loss="bce", sampler="genni", num_negatives=1, alpha=2.5, patience=40)


def run(name, config, ndcg, hr=10.0, seed=0, dataset=BEAUTY):
    return dict(
        name=name,
        dataset=dataset,
        config=dict(config, seed=seed),
        best_epoch=30,
        seconds_per_epoch=20.0,
        valid={"NDCG@10": ndcg},
        test={"HR@10": hr, "NDCG@10": ndcg - 1},
    )


@pytest.mark.parametrize(
    "config, cell",
    [
        (RECOMMENDED, "recommended"),
        (dict(RECOMMENDED, encoder="filtermix"), "recommended"),
        (PAPER, "paper"),
        (dict(loss="softmax", alpha=2.5, num_negatives=1), "softmax"),
        # Other experiments: another alpha, no log Q correction, another
        # learning rate or its decay, another filter, a fine-tuned encoder,
        # uniform negatives.
        (dict(RECOMMENDED, alpha=2.5), None),
        (dict(RECOMMENDED, logq_correction=False), None),
        (dict(PAPER, learning_rate=5e-4), None),
        (dict(RECOMMENDED, encoder="filtermix", lr_half_life=2000), None),
        (dict(RECOMMENDED, encoder="filtermix", filter_alpha=0.9), None),
        (dict(PAPER, init_from="pretrain/"), None),
        (dict(PAPER, sampler="uniform"), None),
        (dict(PAPER, beta=0.01), None),
    ],
)
def test_a_run_fills_the_cell_of_its_training_only_at_the_shared_settings(config, cell):
    assert ablation.cell_of(config) == cell


def test_cells_average_one_run_per_seed_per_encoder_and_layout(tmp_path):
    record = tmp_path / "runs.jsonl"
    runs = [
        run("a", RECOMMENDED, 7.0, seed=0),
        run("a_again", RECOMMENDED, 7.2, seed=0),  # Newest of seed 0 counts.
        run("b", RECOMMENDED, 7.6, seed=1),
        run("fm", dict(RECOMMENDED, encoder="filtermix"), 8.0),
        run("paper", PAPER, 6.5),
        run("paper_packed", dict(PAPER, pack=True), 6.6),
        run("toys", RECOMMENDED, 9.0, dataset=json.dumps({"users": 19412})),
        run("other", dict(RECOMMENDED, hidden_size=128), 9.9),
        run("ml", RECOMMENDED, 9.9, dataset=json.dumps({"users": 943})),
    ]
    record.write_text("".join(json.dumps(r) + "\n" for r in runs))
    rows = ablation.rows_of(ablation.recorded(record, ["Beauty", "Toys"]), {})
    cells = {(r["data"], r["training"], r["encoder"], r["packed"]): r for r in rows}
    assert set(cells) == {
        ("Beauty", "recommended", "sasrec", True),
        ("Beauty", "recommended", "filtermix", True),
        ("Beauty", "paper", "sasrec", False),
        ("Beauty", "paper", "sasrec", True),
        ("Toys", "recommended", "sasrec", True),
    }
    sasrec = cells["Beauty", "recommended", "sasrec", True]
    assert sasrec["names"] == ["a_again", "b"]
    assert sasrec["valid_ndcg10"] == [7.2, 7.6]
    assert [r["training"] for r in rows if r["data"] == "Beauty"][-2:] == [
        "paper",
        "paper",
    ]
    text = "\n".join(ablation.markdown(rows, None))
    assert "| Beauty | recommended | sasrec | yes | 10 | 0, 1 | 7.40 ± 0.28 |" in text


def test_the_timing_runs_every_encoder_under_each_training_packed():
    configs = ablation.configs()
    assert set(configs) == {
        f"{encoder}, {training}"
        for encoder in ("sasrec", "filtermix")
        for training in ablation.TRAININGS
    }
    for name, settings in configs.items():
        encoder, training = name.split(", ")
        assert settings["encoder"] == encoder and settings["pack"]
        # As the run would record it: every setting, the unset at their defaults.
        recorded = TrainConfig.of(data="d", output="o", **settings).to_dict()
        assert ablation.cell_of(recorded) == training
