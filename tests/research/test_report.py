"""The research report: rendering from finished runs, and a grid that skips them."""

import dataclasses
import json
import os
import re

import pytest

from genni.pipeline.training import rundir, train
from genni.pipeline.training.config import TrainConfig
from research import records, report
from tests.conftest import make_dataset

GRID = dataclasses.replace(
    report.QUICK,
    seeds=(0, 1),
    alphas=(0.0, 2.5, 5.0),
    betas=(0.1, 1.0),
    ks=(1, 3),
    bpr_ks=(1, 2),
    initial_alphas=(0.0, 2.5),
    case_epochs=(),
)
METRIC_NAMES = ("HR@5", "HR@10", "NDCG@5", "NDCG@10", "HR@20", "NDCG@20", "MRR")


def fake_metrics(config, value):
    """A metrics.json as `genni train` writes it, with made-up numbers."""
    history = [
        {
            "epoch": e,
            "train_seconds": 2.0 + (config.sampler.name == "genni"),
            "valid": {"NDCG@10": value * e / 3},
            "alpha": config.sampler.alpha,
        }
        for e in (1, 2, 3)
    ]
    test = {name: value + i for i, name in enumerate(METRIC_NAMES)}
    return {
        "config": config.to_dict(),
        "best_epoch": 3,
        "epochs_run": 3,
        "test": test,
        "valid": test,
        "seconds_per_epoch": history[0]["train_seconds"],
        "history": history,
    }


def finish(runs, value_of):
    for run_dir, entry in runs.items():
        os.makedirs(run_dir, exist_ok=True)
        config = entry["config"]
        with open(os.path.join(run_dir, train.CONFIG_FILE), "w") as f:
            json.dump(config.to_dict(), f)
        with open(os.path.join(run_dir, train.METRICS_FILE), "w") as f:
            json.dump(fake_metrics(config, value_of(config)), f)


def value_of(config):
    """GenNi well ahead, a peak at alpha 2.5, and seeds differing by 0.5."""
    value = 3.0 + 0.5 * config.seed
    if config.loss == "softmax":  # The reference ceiling, above them all.
        return value + 2.5
    if config.sampler.name == "genni":
        value += 2.0 - abs(config.sampler.alpha - 2.5) * 0.3
    return value


def test_report_renders_from_finished_runs(tmp_path, monkeypatch):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    # Shared runs are planned once: GenNi alpha 2.5, beta 1, k 1 serves the main
    # table, the efficiency table and the alpha, beta and k sweeps.
    shared = [e for e in runs.values() if len(e["uses"]) >= 5]
    assert len(shared) == len(GRID.seeds)
    finish(runs, value_of)
    monkeypatch.setattr(train, "train", pytest.fail)  # Nothing is retrained.
    results = report.run_grid(runs, verbose=0)
    case = {
        "alpha": 2.5,
        "points": [
            {
                "epoch": 1,
                "users": [
                    {
                        "user": 1,
                        "target": "B001",
                        "target_score": 0.5,
                        "target_rank": 3,
                        "negatives": [
                            {"item": "B007", "score": 0.9, "probability": 0.2}
                        ],
                    }
                ],
            }
        ],
    }
    out = tmp_path / "report"
    speed = {
        "ms_per_step": {
            "uniform": 100.0,
            "genni beta 0.1": 105.0,
            "genni beta 1": 140.0,
        },
        "steps_per_epoch": 88,
        "batch_size": 256,
        "rounds": 5,
        "steps": 10,
        "cpus": 2,
    }
    text = report.render(
        str(out), runs, results, case, "beauty", ["genni report ..."], speed
    )
    for plot in ("alpha", "beta", "k", "valid_vs_time", "self_adjust"):
        assert (out / f"{plot}.png").stat().st_size > 1000
    assert (out / report.REPORT_FILE).read_text() == text
    # The main table holds each run's metrics (mean ± std over the 2 seeds).
    genni = [value_of(e["config"]) for e in shared]
    mean = sum(genni) / 2
    assert f"| SASRec_GenNi | {mean:.2f} ± 0.35 | {mean + 1:.2f} ± 0.35 |" in text
    assert "| SASRec_GenNi (paper) | 6.30 | 8.79 | 4.48 | 5.33 |" in text
    # The full-softmax reference has its own runs and no paper row.
    softmax = [d for d in runs if os.path.basename(d).startswith("softmax_s")]
    assert len(softmax) == len(GRID.seeds)
    assert "| SASRec, full softmax (reference) | 5.75 ± 0.35 | 6.75 ± 0.35 |" in text
    assert "full softmax (reference) (paper)" not in text
    # So has the recommended preset, `genni train`'s default.
    recommended = [d for d in runs if "_k64_sampled_softmax_s" in d]
    assert len(recommended) == len(GRID.seeds)
    assert "| SASRec_GenNi, recommended preset | " in text
    assert "`genni train`'s default" in text
    assert "| 1 | B001 (0.50, 3) | B007 (0.90, 0.200) |" in text
    # Efficiency: the side-by-side step times, not the runs' own epoch times.
    assert f"| genni beta 1 | 140 | 12.3 | 1.40 | {mean:.2f} ± 0.35 |" in text
    assert "| genni growing beta m=1 | - | - | - |" in text
    # Beta 0.01 ran only with a fresh V' per 50 positions; 0.1 only per batch.
    assert "| 0.01 | - | - | 8.25 ± 0.35 |" in text
    assert re.search(r"\| 0\.1 \| [0-9.]+ ± 0\.35 \| [0-9.]+ ± 0\.35 \| - \|", text)
    assert "(beta x |V|)" in text  # The fake dataset has no statistics.
    verdicts = {
        c["claim"]: c["reproduced"]
        for c in json.loads((out / report.RESULTS_FILE).read_text())["claims"]
    }
    assert verdicts["Quality rises with alpha, then falls"] is True
    assert verdicts["GenNi beats uniform by a wide margin (>= 30% NDCG@10)"] is True
    assert len(verdicts) == 5


def test_grid_trains_only_what_is_missing(tmp_path, monkeypatch):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    names = list(runs)
    finish({d: runs[d] for d in names[:-3]}, value_of)
    started = names[-1]
    os.makedirs(started)
    with open(os.path.join(started, train.CONFIG_FILE), "w") as f:
        json.dump(runs[started]["config"].to_dict(), f)
    calls = []

    def fake_train(config, resume=False, verbose=1):
        calls.append((config.output, resume))
        finish({config.output: {"config": config}}, value_of)

    monkeypatch.setattr(train, "train", fake_train)
    report.run_grid(runs, verbose=0, first={("main", "genni")})
    # The started run resumes first, before even the runs put first.
    assert calls == [(started, True), (names[-3], False), (names[-2], False)]
    calls.clear()
    report.run_grid(runs, verbose=0)  # Everything is finished now.
    assert calls == []


def test_grid_leaves_the_runs_other_processes_train_or_finished(tmp_path, monkeypatch):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    names = list(runs)
    finish({d: runs[d] for d in names[:-3]}, value_of)
    busy, mine, theirs = names[-3:]
    calls = []

    def claiming_train(config, resume=False, verbose=1):
        with rundir.claim(config.output):  # As `train.train` does.
            calls.append(config.output)
            finish({config.output: {"config": config}}, value_of)
            if config.output == mine:  # Meanwhile a second process finishes one.
                finish({theirs: runs[theirs]}, value_of)

    monkeypatch.setattr(train, "train", claiming_train)
    with rundir.claim(busy):  # A second grid is training this one.
        results = report.run_grid(runs, verbose=0)
    assert calls == [mine]
    assert set(results) == set(names) - {busy}
    assert set(report.run_grid(runs, verbose=0)) == set(names)  # Free again.
    assert calls == [mine, busy]


def test_the_claims_runs_train_first_and_decide_every_claim(tmp_path, monkeypatch):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    first = report.claim_runs(GRID)
    needed = [d for d, e in runs.items() if any(u[:2] in first for u in e["uses"])]
    assert 0 < len(needed) < len(runs)
    order = []

    def fake_train(config, resume=False, verbose=1):
        order.append(config.output)
        finish({config.output: {"config": config}}, value_of)
        if len(order) == len(needed):
            raise KeyboardInterrupt  # Stop the grid once the claims' runs ran.

    monkeypatch.setattr(train, "train", fake_train)
    with pytest.raises(KeyboardInterrupt):
        report.run_grid(runs, verbose=0, first=first)
    assert sorted(order) == sorted(needed)
    results = report.run_grid(runs, verbose=0, train_missing=False)
    verdicts = report.claims(report.collect(runs, results))
    assert None not in [ok for _, ok, _ in verdicts]  # Each one decided.


def test_an_undecided_alpha_claim_trains_the_alpha_nearest_the_best_end(
    tmp_path, monkeypatch
):
    grid = dataclasses.replace(GRID, seeds=(0,), alphas=(0.0, 1.0, 2.5, 4.0, 5.0, 6.0))
    runs = report.plan("DATA", str(tmp_path / "runs"), grid)

    gain = {0.0: 1.0, 1.0: 1.2, 2.5: 1.5, 4.0: 1.9, 5.0: 1.6, 6.0: 1.7}

    def rising(config):  # The best is 4; 6 beats 5 and 2.5.
        return 3.0 + (
            gain.get(config.sampler.alpha, 1.5)
            if config.sampler.name == "genni"
            else 0.0
        )

    # The claims' first runs have finished: alpha 0, 2.5 and 6, and 6 is best.
    first = report.claim_runs(grid)
    finish(
        {d: e for d, e in runs.items() if any(u[:2] in first for u in e["uses"])},
        rising,
    )
    table = report.collect(runs, report.run_grid(runs, verbose=0, train_missing=False))
    assert report.claim_runs(grid, table) - first == {("alpha", "5")}
    order = []

    def fake_train(config, resume=False, verbose=1):
        order.append(config.sampler.alpha)
        finish({config.output: {"config": config}}, rising)
        if len(order) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(train, "train", fake_train)
    with pytest.raises(KeyboardInterrupt):
        report.run_grid(
            runs,
            verbose=0,
            first=lambda done: report.claim_runs(grid, report.collect(runs, done)),
        )
    # 5 loses to 6, still the best and an end, so 4 next, which beats 6: a peak.
    assert order == [5.0, 4.0]
    table = report.collect(runs, report.run_grid(runs, verbose=0, train_missing=False))
    assert report.claim_runs(grid, table) == first
    verdicts = {c: ok for c, ok, _ in report.claims(table)}
    assert verdicts["Quality rises with alpha, then falls"] is True


def test_tiers_train_in_order_then_the_grid_order(tmp_path, monkeypatch):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    order = []

    def fake_train(config, resume=False, verbose=1):
        order.append(config.output)
        finish({config.output: {"config": config}}, value_of)

    monkeypatch.setattr(train, "train", fake_train)
    tiers = [{("beta", "0.1")}, {("alpha", "0"), ("bpr", "uniform k=2")}]
    report.run_grid(runs, verbose=0, first=tiers)
    assert sorted(order) == sorted(runs)  # Every run, once.

    def uses(run_dir):
        return {use[:2] for use in runs[run_dir]["uses"]}

    # Tier by tier, each run of a tier in the grid's order (seed 0 then 1),
    # then the rest in the grid's order.
    assert [uses(d) & tiers[0] for d in order[:2]] == [tiers[0]] * 2
    assert all(uses(d) & tiers[1] for d in order[2:6])
    assert not any(uses(d) & (tiers[0] | tiers[1]) for d in order[6:])
    assert order[6:] == [d for d in runs if d not in order[:6]]


def test_after_the_claims_every_figure_gets_its_first_points(tmp_path):
    grid = dataclasses.replace(report.FULL, seeds=(0,))
    runs = report.plan("DATA", str(tmp_path / "runs"), grid)
    claims, *sketch = report.priorities(grid)
    assert claims == report.claim_runs(grid)
    assert [sorted({e for e, _ in tier}) for tier in sketch] == [
        ["self_adjust"],
        ["beta", "beta_group"],
        ["k"],
        ["bpr"],
    ]
    # The lowest beta, with one V' per batch and one per 50 positions.
    assert sketch[1] == {("beta", "0.001"), ("beta_group", "0.001")}
    assert sketch[0] == {
        ("self_adjust", "self-adjusted alpha0=0"),
        ("self_adjust", "self-adjusted alpha0=2.5"),
    }
    labels = {use[:2] for entry in runs.values() for use in entry["uses"]}
    for tier in sketch:  # Each one a run of the grid that no claim needs.
        assert tier <= labels
        assert not tier & claims
    for entry in runs.values():  # The self-adjusted runs move alpha.
        if any(use[:2] in sketch[0] for use in entry["uses"]):
            assert entry["config"].sampler.alpha_step is not None


def _stats(path, users):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "stats.json"), "w") as f:
        json.dump({"users": users, "items": 50, "events": 900, "max_len": 50}, f)
    return str(path)


def test_runs_are_keyed_by_settings_and_dataset_not_paths(tmp_path):
    same_a = _stats(tmp_path / "a", users=100)
    same_b = _stats(tmp_path / "b", users=100)
    other = _stats(tmp_path / "c", users=101)
    runs = str(tmp_path / "runs")
    a, b, c = (report.plan(d, runs, GRID) for d in (same_a, same_b, other))
    assert list(a) == list(b)  # A copy of the dataset elsewhere: same runs.
    assert not set(a) & set(c)  # Another dataset: other runs.
    names = [os.path.basename(d) for d in a]
    assert len(set(names)) == len(names)
    assert any(n.startswith("genni_a2.5_b1_k1_s0-") for n in names)
    # A run made by `genni train` under any name is found by its settings.
    planned = next(e["config"] for d, e in a.items() if "genni_a2.5_b1_k1_s0" in d)
    mine = tmp_path / "runs" / "my_own_genni_run"
    os.makedirs(mine)
    with open(mine / train.CONFIG_FILE, "w") as f:
        json.dump(planned.replace(output=str(mine)).to_dict(), f)
    again = report.plan(same_b, runs, GRID)
    assert str(mine) in again and len(again) == len(a)


@pytest.mark.parametrize("kind", ["record", "directory"])
def test_finished_runs_outlive_their_machine_through_the_archive(
    tmp_path, monkeypatch, kind
):
    # Machine 1 finishes half the grid and archives it: in a record (one line
    # per run), or in a directory of metrics.json files (the old archives).
    data_1 = _stats(tmp_path / "m1" / "data", users=100)
    runs_1 = report.plan(data_1, str(tmp_path / "m1" / "runs"), GRID)
    done = dict(list(runs_1.items())[::2])
    finish(done, value_of)
    results = report.run_grid(done, verbose=0, train_missing=False)
    archive = str(tmp_path / "archive")
    if kind == "directory":
        os.makedirs(archive)
    written = report.archive_runs(results, archive, "toy")
    if kind == "record":  # A new archive is a record: .jsonl is added.
        assert not os.path.exists(archive)
        kept = records.read(archive + records.RECORD_SUFFIX)
    else:
        kept = os.listdir(archive)
    assert len(written) == len(done) == len(kept)
    assert all(os.path.basename(w).startswith("toy_") for w in written)
    assert report.archive_runs(results, archive, "toy") == []  # Kept once.
    # Machine 2: the same dataset elsewhere, an empty runs dir.
    data_2 = _stats(tmp_path / "m2" / "data", users=100)
    runs_dir_2 = str(tmp_path / "m2" / "runs")
    restored = report.restore_runs(archive, runs_dir_2, data_2)
    assert len(restored) == len(done)
    assert report.restore_runs(archive, runs_dir_2, data_2) == []
    runs_2 = report.plan(data_2, runs_dir_2, GRID)
    assert len(runs_2) == len(runs_1)
    calls = []

    def fake_train(config, resume=False, verbose=1):
        calls.append(config.output)
        finish({config.output: {"config": config}}, value_of)

    monkeypatch.setattr(train, "train", fake_train)
    results_2 = report.run_grid(runs_2, verbose=0)
    assert len(calls) == len(runs_1) - len(done)  # Only what never finished.
    assert not set(calls) & set(restored)
    assert sorted(results_2[d]["test"]["NDCG@10"] for d in restored) == sorted(
        m["test"]["NDCG@10"] for m in results.values()
    )
    assert all(results_2[d]["config"]["data"] == data_2 for d in restored)
    # Another dataset restores nothing.
    other = _stats(tmp_path / "m3" / "data", users=101)
    assert report.restore_runs(archive, str(tmp_path / "m3" / "runs"), other) == []


def test_a_pretrained_run_is_keyed_by_its_pretraining_name_not_place():
    config = report.plan("DATA", "runs", GRID)
    config = next(iter(config.values()))["config"]
    here, there = (
        config.replace(init_from=f"{d}/beauty_pretrain_s0")
        for d in ("/a/runs", "/b/runs/")
    )
    other = config.replace(init_from="/a/runs/beauty_pretrain_s1")
    assert report.run_key(here, "D") == report.run_key(there, "D")
    assert report.run_key(here, "D") != report.run_key(other, "D")


def test_a_packed_grid_reuses_finished_runs_and_packs_the_rest(tmp_path):
    runs_dir = str(tmp_path / "runs")
    plain = report.plan("DATA", runs_dir, GRID)
    packed_grid = dataclasses.replace(GRID, pack=True)
    packed = report.plan("DATA", runs_dir, packed_grid)
    assert len(packed) == len(plain)
    assert all(e["config"].pack for e in packed.values())
    assert not any(e["config"].pack for e in plain.values())
    # Packing changes the batch layout, not the experiment: one key.
    assert [report.run_key(e["config"], "D") for e in plain.values()] == [
        report.run_key(e["config"], "D") for e in packed.values()
    ]
    # Half the unpacked grid finished: a packed grid reuses those and packs
    # only the rest.
    done = dict(list(plain.items())[::2])
    finish(done, value_of)
    again = report.plan("DATA", runs_dir, packed_grid)
    assert set(done) <= set(again) and len(again) == len(plain)
    assert not any(again[d]["config"].pack for d in done)
    assert all(e["config"].pack for d, e in again.items() if d not in done)
    # A started packed run beside an unstarted unpacked one: resumed, and
    # a finished packed run is reused by an unpacked grid.
    todo = {d: e for d, e in again.items() if d not in done}
    finish(todo, value_of)
    results = report.run_grid(report.plan("DATA", runs_dir, GRID), verbose=0)
    assert set(results) == set(again)
    # The report names the packed runs.
    text = report.render(
        str(tmp_path / "out"), again, results, None, "beauty", [], None
    )
    assert f"{len(todo)} of the finished runs trained on packed batches" in text
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sum(r["packed"] for r in summary["runs"].values()) == len(todo)


def test_a_finished_run_wins_over_an_unfinished_one_of_the_same_key(tmp_path):
    runs_dir = tmp_path / "runs"
    config = next(iter(report.plan("DATA", str(runs_dir), GRID).values()))["config"]
    for name, pack, done in (("a_packed", True, True), ("b_plain", False, False)):
        run = runs_dir / name
        os.makedirs(run)
        with open(run / train.CONFIG_FILE, "w") as f:
            json.dump(config.replace(pack=pack).to_dict(), f)
        if done:
            (run / train.METRICS_FILE).write_text("{}")
    found = report.existing_runs(str(runs_dir))
    assert [os.path.basename(d) for d, _ in found.values()] == ["a_packed"]
    (runs_dir / "b_plain" / train.METRICS_FILE).write_text("{}")
    found = report.existing_runs(str(runs_dir))  # Both finished: unpacked.
    assert [os.path.basename(d) for d, _ in found.values()] == ["b_plain"]


def test_report_renders_a_partial_grid(tmp_path):
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    main = {
        d: e
        for d, e in runs.items()
        if any(u[:2] in (("main", "uniform"), ("main", "genni")) for u in e["uses"])
    }  # Popularity has not run: the main table says so, the claim needs none.
    finish(main, value_of)
    results = report.run_grid(runs, verbose=0, train_missing=False)
    assert set(results) == set(main)
    text = report.render(str(tmp_path / "r"), runs, results, None, "toys", [])
    assert "SASRec_GenNi (paper) | 7.18 | 9.96 | 5.15 | 5.90 |" in text
    # That row fails the HR/NDCG bound; the uniform one passes.
    assert "The paper's SASRec_GenNi row cannot come from one set of rankings" in text
    assert "The paper's SASRec (uniform) row" not in text
    assert "| SASRec_pop | not run yet |" in text
    # The alpha sweep shows the alpha that has run (the main GenNi run) and
    # names the others.
    assert "| 2.5 | 6.25 ± 0.35 | 8.25 ± 0.35 |" in text
    assert "Not run yet: 0, 5." in text
    # Efficiency: the finished samplers against uniform, the others named; the
    # validation-vs-time plot draws the finished ones.
    assert "Speed: not timed" in text
    assert "| genni beta 1 | - | - | - | 5.25 ± 0.35 | 7.25 ± 0.35 | 100% |" in text
    assert (
        "| genni beta 0.1 | - | - | - | not run yet | not run yet | not run yet |"
        in text
    )
    assert os.path.exists(tmp_path / "r" / "valid_vs_time.png")
    # Self-adjusted: fixed alpha 2.5 is the main GenNi run; the rest named.
    assert "| 2.5 | 8.25 ± 0.35 | not run yet | - |" in text
    assert "| 0 | not run yet | not run yet | - |" in text
    assert os.path.exists(tmp_path / "r" / "self_adjust.png")
    assert "Not run yet: it trains after the grid" in text  # The case study.
    verdicts = json.loads((tmp_path / "r" / report.RESULTS_FILE).read_text())["claims"]
    assert verdicts[0]["reproduced"] is True
    assert [v["reproduced"] for v in verdicts[1:]] == [None] * 4
    # A claim not yet judged names every run it still needs.
    assert verdicts[4]["numbers"] == (
        "missing: uniform k=1, uniform k=2, genni k=1, genni k=2"
    )


def test_claims_need_only_the_runs_they_compare(tmp_path):
    """GenNi k=1 vs uniform with the most negatives, BPR at both ends of its
    sweep, and alpha at both ends and one between, are judged before the rest
    of their sweeps has run."""
    grid = dataclasses.replace(GRID, bpr_ks=(1, 2, 3), alphas=(0.0, 1.0, 2.5, 5.0))
    runs = report.plan("DATA", str(tmp_path / "runs"), grid)
    needed = {
        ("alpha", "0"),
        ("alpha", "5"),  # alpha 2.5 is the GenNi k=1 run.
        ("k", "genni k=1"),
        ("k", "uniform k=3"),
        ("bpr", "uniform k=1"),
        ("bpr", "uniform k=3"),
        ("bpr", "genni k=1"),
        ("bpr", "genni k=3"),
    }
    some = {d: e for d, e in runs.items() if any(u[:2] in needed for u in e["uses"])}
    finish(some, value_of)
    results = report.run_grid(runs, verbose=0, train_missing=False)
    text = report.render(str(tmp_path / "r"), runs, results, None, "toys", [])
    # The k table shows what has run and names what has not.
    assert "| uniform k=3 | 4.25 ± 0.35 | 6.25 ± 0.35 |" in text
    assert "Not run yet: uniform k=1, genni k=3." in text
    assert "| uniform | 3.25 ± 0.35 | not run yet | 3.25 ± 0.35 |" in text  # BPR
    verdicts = json.loads((tmp_path / "r" / report.RESULTS_FILE).read_text())["claims"]
    judged = {v["claim"]: (v["reproduced"], v["numbers"]) for v in verdicts}
    # Uniform is 3.0 + 0.5 * seed whatever k (NDCG@10 is 3 above HR@5 in the
    # fake metrics); GenNi alpha 2.5 is 2 above uniform.
    assert judged[report.CLAIMS[3].text] == (
        True,
        "NDCG@10 GenNi k=1 8.25 vs uniform k=3 6.25",
    )
    # Flat for both samplers: uniform does not gain (reproduced), GenNi neither.
    assert judged[report.CLAIMS[4].text][0] is False
    assert judged[report.CLAIMS[4].text][1].startswith("HR@5 uniform 3.25 -> 3.25")
    assert judged[report.CLAIMS[1].text] == (
        True,
        "NDCG@10 by alpha: 0: 7.50, 2.5: 8.25, 5: 7.50 (not run yet: 1); "
        "a peak must beat both ends by 2%",
    )
    assert [judged[report.CLAIMS[i].text][0] for i in (0, 2)] == [None] * 2


def alpha_table(labels, finished):
    """An alpha sweep of which the alphas in `finished` (alpha -> NDCG@10) ran."""
    return {
        "alpha": {
            label: [{"test": {"NDCG@10": finished[float(label)]}}]
            if float(label) in finished
            else []
            for label in labels
        }
    }


@pytest.mark.parametrize(
    ("finished", "verdict"),
    [
        ({0.0: 1.0, 2.5: 2.0, 5.0: 3.0}, None),  # Best at an end, alpha 1 missing.
        ({0.0: 1.0, 1.0: 1.5, 2.5: 2.0, 5.0: 3.0}, False),  # all run: a no.
        ({0.0: 1.0, 2.5: 3.0, 5.0: 2.0}, True),  # A peak between the ends.
        # Best between the ends, but within 2% of one: no fall shown yet.
        ({0.0: 1.0, 2.5: 5.59, 5.0: 5.58}, None),
        ({0.0: 1.0, 1.0: 1.5, 2.5: 5.59, 5.0: 5.58}, False),
        ({0.0: 1.0, 2.5: 5.70, 5.0: 5.58}, True),
    ],
)
def test_the_alpha_claim_waits_without_a_clear_peak(finished, verdict):
    labels = ("0", "1", "2.5", "5")
    table = alpha_table(labels, finished)
    judged = {c: ok for c, ok, _ in report.claims(table)}
    assert judged[report.CLAIMS[1].text] is verdict


def _sequences(data) -> dict[str, list[str]]:
    """Raw user id -> raw item ids, from `sequences.tsv` of a preprocessed dir."""
    lines = (data / "sequences.tsv").read_text().splitlines()
    return {u: items.split() for u, items in (x.split("\t") for x in lines)}


def test_case_study_on_tiny_data(tmp_path, capsys):
    data, _ = make_dataset(tmp_path, num_users=80, num_items=30, seed=2, max_len=6)
    config = train.TrainConfig.of(
        data=data, output="", hidden_size=8, num_layers=1, batch_size=32
    )
    grid = dataclasses.replace(GRID, case_epochs=(1, 2), case_users=2)
    case = report.case_study(config, grid, str(tmp_path), verbose=1)
    assert "Case study: training GenNi for 2 epochs" in capsys.readouterr().out
    sequences = _sequences(tmp_path / "data")
    assert [p["epoch"] for p in case["points"]] == [1, 2]
    for point in case["points"]:
        assert len(point["users"]) == 2
        for user in point["users"]:
            probabilities = [n["probability"] for n in user["negatives"]]
            assert probabilities == sorted(probabilities, reverse=True)
            assert user["target"] not in [n["item"] for n in user["negatives"]]
            # Raw ids, as in the log: the user's second-to-last item is the target.
            assert sequences[user["user"]][-2] == user["target"]
    assert os.path.exists(tmp_path / report.CASE_STUDY_FILE)


def test_a_killed_case_study_resumes_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    data, _ = make_dataset(tmp_path, num_users=80, num_items=30, seed=2, max_len=6)
    config = train.TrainConfig.of(
        data=data,
        output="",
        hidden_size=8,
        num_layers=1,
        batch_size=32,
        exclude_seen=True,
    )
    grid = dataclasses.replace(GRID, case_epochs=(1, 3), case_users=2)
    from genni.pipeline.training import data as data_module

    train_dataset = data_module.train_dataset
    epochs_trained = []
    kill_at = [1]  # The epoch whose dataset is never built: a kill in epoch 2.

    def recorded(cached, max_len, batch_size, seed, epoch, pack):
        if epoch in kill_at:
            raise KeyboardInterrupt
        epochs_trained.append(epoch)
        return train_dataset(cached, max_len, batch_size, seed, epoch, pack=pack)

    monkeypatch.setattr(data_module, "train_dataset", recorded)
    with pytest.raises(KeyboardInterrupt):
        report.case_study(config, grid, str(tmp_path))
    assert not os.path.exists(tmp_path / report.CASE_STUDY_FILE)
    kill_at.clear()
    case = report.case_study(config, grid, str(tmp_path), verbose=1)
    assert "resumed at epoch 1" in capsys.readouterr().out
    assert epochs_trained == [0, 1, 2]  # Epoch 1 (the first) was not trained again.
    assert [p["epoch"] for p in case["points"]] == [1, 3]
    assert not os.path.exists(tmp_path / report.CASE_STUDY_CHECKPOINT)
    # With --exclude-seen the sampler never draws the user's own items: nor does Q.
    sequences = _sequences(tmp_path / "data")
    for point in case["points"]:
        for user in point["users"]:
            seen = sequences[user["user"]][:-2]
            assert not set(seen) & {n["item"] for n in user["negatives"]}
    assert "and the user's earlier items (`--exclude-seen`)" in "\n".join(
        report.case_lines(case)
    )


def test_speed_is_timed_side_by_side_once_per_report(tmp_path, monkeypatch):
    data, _ = make_dataset(tmp_path, num_users=80, num_items=30, seed=3, max_len=6)
    grid = dataclasses.replace(GRID, speed_rounds=2, speed_steps=1)
    speed = report.measure_speed(data, grid, str(tmp_path / "r"))
    assert set(speed["ms_per_step"]) == set(report.TIMED)
    assert all(ms > 0 for ms in speed["ms_per_step"].values())
    assert speed["steps_per_epoch"] == 1  # 80 users, batch 256.
    saved = json.loads((tmp_path / "r" / report.SPEED_FILE).read_text())
    assert saved == speed
    # A report renders with the saved times and does not time again.
    monkeypatch.setattr(report, "measure_speed", pytest.fail)
    text = report.report(
        data, str(tmp_path / "r"), None, True, None, None, 0, report_only=True
    )
    assert "side by side in one process, median of 2 interleaved rounds" in text
    # Timed before any run has finished: the times show, the quality waits.
    assert re.search(
        r"\| genni beta 1 \| \d+ \| [\d.]+ \| [\d.]+ \| not run yet \|", text
    )


def test_the_report_is_rewritten_after_each_run(tmp_path, monkeypatch):
    data, _ = make_dataset(tmp_path, num_users=80, num_items=30, seed=3, max_len=6)
    out = tmp_path / "r"
    monkeypatch.setattr(report, "measure_speed", lambda *args: None)
    monkeypatch.setattr(report, "case_study", lambda *args: None)
    seen = []

    def fake_train(config, resume=False, verbose=1):
        path = out / report.REPORT_FILE
        text = path.read_text() if path.exists() else ""
        seen.append(re.search(r"(\d+) of \d+ runs finished", text))
        finish({config.output: {"config": config}}, value_of)

    monkeypatch.setattr(train, "train", fake_train)
    text = report.report(data, str(out), None, True, None, None, 0)
    assert seen[0] is None  # Nothing had finished before the first run.
    assert [int(m.group(1)) for m in seen[1:]] == list(range(1, len(seen)))
    assert f"{len(seen)} of {len(seen)} runs finished" in text


def test_report_needs_a_dataset(tmp_path, capsys):
    code = report.main(["--data", str(tmp_path), "--output", str(tmp_path / "r")])
    assert code == 2
    assert "genni preprocess" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("finished", "after"),
    [
        ({0.0: 3.35, 2.5: 5.28, 6.0: 5.58}, "5"),  # Best at the top end.
        ({0.0: 3.35, 2.5: 5.28, 5.0: 5.59, 6.0: 5.58}, "4"),  # A peak within 2%.
        ({0.0: 5.6, 2.5: 5.28, 6.0: 3.0}, "1"),  # Best at the bottom end.
        ({0.0: 3.35, 2.5: 5.9, 6.0: 5.58}, None),  # A clear peak: decided.
    ],
)
def test_the_next_alpha_is_the_missing_one_nearest_the_best(finished, after):
    grid = dataclasses.replace(GRID, alphas=(0.0, 1.0, 2.5, 4.0, 5.0, 6.0))
    labels = [f"{a:g}" for a in grid.alphas]
    table = alpha_table(labels, finished)
    added = report.claim_runs(grid, table) - report.claim_runs(grid)
    assert added == ({("alpha", after)} if after else set())


def bpr_table(uniform_1, uniform_8, genni_1, genni_8):
    """A BPR sweep (k = 1, 4, 8) with these HR@5 at its ends; None: not run."""
    hr5 = {
        "uniform k=1": uniform_1,
        "uniform k=8": uniform_8,
        "genni k=1": genni_1,
        "genni k=8": genni_8,
    }
    return {
        "bpr": {
            f"{s} k={k}": []
            if hr5.get(f"{s} k={k}") is None
            else [{"test": {"HR@5": hr5[f"{s} k={k}"]}}]
            for s in ("uniform", "genni")
            for k in (1, 4, 8)
        }
    }


@pytest.mark.parametrize(
    ("hr5", "verdict", "genni_first"),
    [
        # Uniform's ends missing: nothing decided, GenNi's ends still wanted.
        ((None, None, 6.0, 7.0), None, True),
        # Uniform flat (within 2%), GenNi's top end missing: waits for it.
        ((4.0, 4.05, 6.0, None), None, True),
        # Uniform gains: a no before GenNi's top end runs, which no longer
        # trains first.
        ((5.08, 5.64, 6.96, None), False, False),
        # Both ends of both: uniform flat and GenNi gains is a yes.
        ((4.0, 3.9, 6.0, 6.5), True, True),
        # GenNi does not gain either: a no.
        ((4.0, 3.9, 6.0, 5.9), False, True),
    ],
)
def test_the_bpr_claim_is_a_no_as_soon_as_uniform_gains(hr5, verdict, genni_first):
    table = bpr_table(*hr5)
    reproduced = {c: ok for c, ok, _ in report.claims(table)}[report.CLAIMS[4].text]
    assert reproduced is verdict
    grid = dataclasses.replace(GRID, bpr_ks=(1, 4, 8))
    wanted = report.claim_runs(grid, table)
    assert {("bpr", "uniform k=1"), ("bpr", "uniform k=8")} <= wanted
    genni = {("bpr", "genni k=1"), ("bpr", "genni k=8")}
    assert (genni & wanted) == (genni if genni_first else set())


def test_the_beta_note_counts_the_items_of_the_reports_own_dataset(tmp_path):
    data = _stats(tmp_path / "data", users=100)  # 50 items.
    runs = report.plan(data, str(tmp_path / "runs"), GRID)
    finish(runs, value_of)
    results = report.run_grid(runs, verbose=0, train_missing=False)
    text = report.render(str(tmp_path / "out"), runs, results, None, None, [], None)
    assert "(beta x |V|: about 5 at beta 0.1)" in text
    assert "Toys" not in text


def _beauty_grid(tmp_path) -> tuple[str, list[str]]:
    """A dataset with Beauty's statistics, and the full grid's run names on it."""
    data = tmp_path / "beauty"
    os.makedirs(data)
    stats = {"users": 22363, "items": 12101, "events": 198502, "max_len": 50}
    (data / "stats.json").write_text(json.dumps(dict(stats, min_count=5)))
    names = [os.path.basename(d) for d in report.plan(str(data), "runs", report.FULL)]
    return str(data), names


def test_run_keys_stay_those_of_the_archived_runs(tmp_path):
    # Beauty's statistics; its alpha 0.5 grid run was keyed a4855ada42 before
    # any setting was added since (docs/results/beauty/results.json): a new
    # setting at its default must leave every archived key as it was.
    data, names = _beauty_grid(tmp_path)
    assert "genni_a0.5_b1_k1_s0-a4855ada42" in names
    config = TrainConfig.of(data=data, output="", alpha=0.5)
    grouped = config.replace(beta_group=50)
    assert report.run_key(grouped, "D") != report.run_key(config, "D")


def test_a_softmax_run_is_keyed_without_the_sampler_it_does_not_have(tmp_path):
    data, names = _beauty_grid(tmp_path)
    assert "softmax_s0-bc92395817" in names  # The key it had before this rule.
    softmax = TrainConfig.of(data=data, output="", loss="softmax")
    flags = dict(sampler="uniform", alpha=4.0, num_negatives=9, exclude_seen=True)
    other_flags = softmax.replace(**flags)
    assert report.run_key(other_flags, "D") == report.run_key(softmax, "D")
    # The sampler's settings still tell apart runs that use a sampler.
    bce = softmax.replace(loss="bce")
    assert report.run_key(bce.replace(**flags), "D") != report.run_key(bce, "D")
    assert report.run_key(softmax.replace(seed=1), "D") != (
        report.run_key(softmax, "D")
    )
