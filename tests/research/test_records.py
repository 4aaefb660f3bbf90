"""The compact record of finished runs: one line per run, read and appended
by `python -m research.report --archive`, and the reports rendered from it."""

import json
import os
import threading
from pathlib import Path

import pytest

from genni.pipeline.training import keys
from genni.pipeline.training.config import TrainConfig
from research import commands, records, report, run_names
from tests.research.test_report import GRID, _stats, finish, value_of

RECORD = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "runs.jsonl"
FINGERPRINT = '{"items": 50, "users": 100}'


def metrics_of(seed=0, alpha=2.5, alpha_step=None, epochs=4):
    """A metrics.json as `genni train` writes it (made-up numbers)."""
    config = TrainConfig.of(
        data="/machine/data", output="/machine/runs/r", seed=seed, alpha=alpha
    )
    config = TrainConfig.from_dict(dict(config.to_dict(), alpha_step=alpha_step))
    history = [
        {
            "epoch": e,
            "train_seconds": 2.5 + e,
            "eval_seconds": 0.5,
            "loss": 1.0 / e,
            "alpha": alpha + 0.1234567 * e,
            "valid": {"NDCG@10": 1.23456789 * e, "HR@10": 2.0 * e},
        }
        for e in range(1, epochs + 1)
    ]
    test = {"HR@5": 1.0 + seed, "HR@10": 2.0, "NDCG@5": 0.5, "NDCG@10": 0.75}
    return {
        "config": config.to_dict(),
        "best_epoch": 2,
        "epochs_run": epochs,
        "stopped_early": False,
        "valid": {"NDCG@10": 2.46913578, "HR@10": 4.0},
        "test": test,
        "seconds_per_epoch": 4.5,
        "seconds_per_eval": 0.5,
        "sampler_over_time": [{"epoch": r["epoch"]} for r in history],
        "history": history,
    }


def test_a_record_keeps_what_reports_read_and_no_machine_paths():
    metrics = metrics_of(alpha_step=0.1)
    record = records.to_record(metrics, FINGERPRINT, "toy_run")
    config = TrainConfig.from_dict(metrics["config"])
    assert record["key"] == keys.run_key(config, FINGERPRINT)
    assert record["name"] == "toy_run" and record["dataset"] == FINGERPRINT
    assert "data" not in record["config"] and "output" not in record["config"]
    assert "/machine" not in json.dumps(record)
    assert "history" not in record and "sampler_over_time" not in record
    for field in ("best_epoch", "epochs_run", "test", "valid", "seconds_per_epoch"):
        assert record[field] == metrics[field]
    # Per epoch: valid NDCG@10, rounded, and the moving alpha of this run.
    assert record["per_epoch"]["valid_ndcg10"] == [1.2346, 2.4691, 3.7037, 4.9383]
    assert record["per_epoch"]["alpha"][1] == round(2.5 + 2 * 0.1234567, 6)
    assert "epoch" not in record["per_epoch"]  # 1..n goes without saying.
    # A fixed alpha is the config's: no series of it.
    fixed = records.to_record(metrics_of(), FINGERPRINT, "toy_fixed")
    assert set(fixed["per_epoch"]) == {"valid_ndcg10"}


def test_record_and_metrics_round_trip():
    metrics = metrics_of(alpha_step=0.1)
    record = records.to_record(metrics, FINGERPRINT, "toy_run")
    back = records.to_metrics(record)
    assert back["config"] == dict(metrics["config"], data="", output="")
    assert back["dataset"] == FINGERPRINT
    for field in ("best_epoch", "test", "valid", "stopped_early", "seconds_per_eval"):
        assert back[field] == metrics[field]
    # The history keeps the epochs, valid NDCG@10 and alpha the figures use.
    assert [r["epoch"] for r in back["history"]] == [1, 2, 3, 4]
    assert back["history"][1] == {
        "epoch": 2,
        "valid": {"NDCG@10": 2.4691},
        "alpha": round(2.5 + 2 * 0.1234567, 6),
    }
    # Archiving a restored run again gives the same record.
    restored = dict(back, config=dict(back["config"], data="/b", output="/b/r"))
    assert records.to_record(restored, FINGERPRINT, "toy_run") == record
    # A run without a history (restored from a report's table long ago).
    bare = {k: v for k, v in metrics.items() if k != "history"}
    assert "history" not in records.to_metrics(records.to_record(bare, "D", "x"))


def test_the_file_holds_one_sorted_line_per_run_and_reads_back(tmp_path):
    path = str(tmp_path / "runs.jsonl")
    made = [
        records.to_record(metrics_of(seed=s), FINGERPRINT, f"toy_{n}")
        for s, n in ((2, "c"), (0, "a"), (1, "b"))
    ]
    records.write(path, made)
    lines = Path(path).read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["toy_a", "toy_b", "toy_c"]
    assert all(
        line == json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
        for line in lines
    )
    assert sorted(records.read(path), key=lambda r: r["name"]) == sorted(
        made, key=lambda r: r["name"]
    )
    assert os.listdir(tmp_path) == ["runs.jsonl"]  # No temporary file left.
    with pytest.raises(ValueError, match="one run key"):
        records.write(path, [made[0], dict(made[0], name="toy_z")])
    Path(path).write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ValueError, match=r"runs.jsonl:2"):
        records.read(path)


def test_appending_replaces_the_line_of_its_key(tmp_path):
    path = str(tmp_path / "runs.jsonl")
    first = [
        records.to_record(metrics_of(seed=s), FINGERPRINT, f"toy_{s}") for s in (0, 1)
    ]
    records.append(path, first)
    again = dict(first[1], best_epoch=99)  # The same run, archived again.
    new = records.to_record(metrics_of(seed=2), FINGERPRINT, "toy_2")
    records.append(path, [again, new])
    kept = {r["key"]: r for r in records.read(path)}
    assert len(kept) == len(records.read(path)) == 3
    assert kept[first[1]["key"]]["best_epoch"] == 99
    assert kept[first[0]["key"]] == first[0]


def test_appends_of_several_processes_lose_no_run(tmp_path):
    """Report grids sharing an archive each append their finished runs."""
    path = str(tmp_path / "runs.jsonl")

    def archive(worker):
        for i in range(6):
            seed = 100 * worker + i
            records.append(
                path,
                [records.to_record(metrics_of(seed=seed), FINGERPRINT, f"w{seed}")],
            )

    threads = [threading.Thread(target=archive, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(records.read(path)) == 24


def test_an_archive_path_names_a_record_or_an_old_directory(tmp_path):
    old = tmp_path / "results" / "runs"
    assert records.resolve(str(old)) == str(old) + ".jsonl"  # The old name.
    assert records.resolve(str(tmp_path / "x.jsonl")) == str(tmp_path / "x.jsonl")
    os.makedirs(old)
    assert records.resolve(str(old)) == str(old)  # An old directory archive.


def test_a_report_renders_from_the_record_as_from_its_runs(tmp_path):
    # Machine 1 finishes the grid; its report, and its runs in a record.
    data_1 = _stats(tmp_path / "m1" / "data", users=100)
    runs_1 = report.plan(data_1, str(tmp_path / "m1" / "runs"), GRID)
    finish(runs_1, value_of)
    results_1 = report.run_grid(runs_1, verbose=0, train_missing=False)
    speed = None  # Training time from the runs themselves: the record's median.
    text_1 = report.render(str(tmp_path / "r1"), runs_1, results_1, None, "toys", [])
    record = str(tmp_path / "runs.jsonl")
    assert len(report.archive_runs(results_1, record, "toy")) == len(runs_1)
    assert os.path.getsize(record) < 2000 * len(runs_1)
    # Machine 2: only the record, and the dataset elsewhere.
    data_2 = _stats(tmp_path / "m2" / "data", users=100)
    runs_dir_2 = str(tmp_path / "m2" / "runs")
    assert len(report.restore_runs(record, runs_dir_2, data_2)) == len(runs_1)
    runs_2 = report.plan(data_2, runs_dir_2, GRID)
    results_2 = report.run_grid(runs_2, verbose=0, train_missing=False)
    assert len(results_2) == len(runs_2) == len(runs_1)
    text_2 = report.render(
        str(tmp_path / "r2"), runs_2, results_2, None, "toys", [], speed
    )
    assert text_2 == text_1
    summary = [
        json.loads((tmp_path / r / "results.json").read_text()) for r in ("r1", "r2")
    ]
    assert summary[0] == summary[1]
    for plot in ("alpha", "beta", "k", "valid_vs_time", "self_adjust"):
        assert (tmp_path / "r2" / f"{plot}.png").stat().st_size > 1000
    # Archiving the restored runs again changes nothing.
    before = Path(record).read_text()
    assert report.archive_runs(results_2, record, "toy") == []
    assert Path(record).read_text() == before


def test_converting_an_old_directory_keeps_one_run_per_key(tmp_path):
    old = tmp_path / "runs"
    os.makedirs(old)
    plain, packed = metrics_of(), metrics_of()
    packed["config"] = dict(packed["config"], pack=True)  # Same key, packed.
    for name, metrics in (
        ("toy_a", plain),
        ("toy_a_pack", packed),
        ("toy_b", metrics_of(seed=1)),
    ):
        (old / f"{name}.json").write_text(
            json.dumps(dict(metrics, dataset=FINGERPRINT))
        )
    (old / "notes.json").write_text("{}")
    path = str(tmp_path / "runs.jsonl")
    count, left_out = records.convert(str(old), path)
    assert count == 2
    assert left_out == ["notes.json", "toy_a_pack.json"]  # The unpacked one wins.
    assert sorted(r["name"] for r in records.read(path)) == ["toy_a", "toy_b"]
    assert records.archived_runs(path).keys() == records.archived_runs(str(old)).keys()


@pytest.mark.skipif(not RECORD.exists(), reason="no benchmarks/results/runs.jsonl")
def test_the_committed_record_keeps_every_run_key():
    found = records.read(str(RECORD))
    # About 2 KB a run (its curve, not its per-epoch files): small to commit.
    assert RECORD.stat().st_size < 2_500 * len(found)
    assert (
        len({r["key"] for r in found}) == len({r["name"] for r in found}) == len(found)
    )
    assert [r["name"] for r in found] == sorted(r["name"] for r in found)
    for r in found:  # The key it was archived under is the one computed today.
        config = TrainConfig.from_dict(records.to_metrics(r)["config"])
        assert keys.run_key(config, r["dataset"]) == r["key"], r["name"]
    # The report grid's own names carry their key.
    assert any(r["name"] == "beauty_genni_a0.5_b1_k1_s0-a4855ada42" for r in found)


def test_recorded_commands_are_quoted_and_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = report_args(
        data=str(tmp_path / "my data"), output="out/", archive="runs.jsonl"
    )
    line = commands.report_command(args)
    assert line == (
        "python -m research.report --data 'my data' --output out --seeds 1 "
        "--archive runs.jsonl --pack"
    )
    assert str(tmp_path) not in line


def report_args(**values):
    args = report.build_parser().parse_args(["--data", "D", "--output", "O"])
    for name, value in dict(values, seeds=1, pack=True).items():
        setattr(args, name, value)
    return args


def test_the_log_q_correction_keys_only_sampled_softmax_runs():
    bce = TrainConfig.of(data="D", output="o")
    ssm = bce.replace(loss="sampled_softmax", num_negatives=8)
    key = keys.run_key
    assert key(bce.replace(logq_correction=False), "F") == key(bce, "F")
    assert key(ssm.replace(logq_correction=False), "F") != key(ssm, "F")
    assert key(ssm, "F") != key(bce, "F")


def test_an_encoder_is_keyed_by_the_settings_it_reads():
    sasrec = TrainConfig.of(data="D", output="o")
    mixed = sasrec.replace(encoder="filtermix")
    key = keys.run_key
    assert key(sasrec.replace(filter_alpha=0.2), "F") == key(sasrec, "F")
    assert key(mixed.replace(filter_alpha=0.2), "F") != key(mixed, "F")
    assert key(mixed.replace(filter_window=3), "F") != key(mixed, "F")
    assert key(mixed, "F") != key(sasrec, "F")
    # Its name says which encoder it is; the first encoder's names stay.
    assert keys.slug(sasrec.to_dict(), 0) == "genni_a2.5_b1_k1_s0"
    assert keys.slug(mixed.to_dict(), 0) == "filtermix_genni_a2.5_b1_k1_s0"
    softmax = mixed.replace(loss="softmax").to_dict()
    assert keys.slug(softmax, 1) == "filtermix_softmax_s1"


def test_a_cap_on_genni_candidates_keys_a_run_only_where_it_bites():
    config = TrainConfig.of(data="D", output="o")
    capped = config.replace(max_candidates=16384)
    small, large = '{"items": 12101}', '{"items": 1000000}'
    assert keys.run_key(capped, small) == keys.run_key(config, small)
    assert keys.run_key(capped, large) != keys.run_key(config, large)
    assert keys.run_key(capped, "/a/path") != keys.run_key(config, "/a/path")


def test_a_draw_budget_keys_a_run_by_the_candidates_it_leaves():
    config = TrainConfig.of(data="D", output="o", max_candidates=16384)
    budget = config.replace(draw_budget=1 << 27)
    short = '{"items": 1000000, "events": 600000, "users": 100000, "max_len": 50}'
    long = '{"items": 1000000, "events": 4600000, "users": 100000, "max_len": 50}'
    # Short histories: M stays 16,384, the capped run's experiment.
    assert keys.run_key(budget, short) == keys.run_key(config, short)
    # Long ones: M 8,192, the same experiment as --max-candidates 8192.
    m8192 = config.replace(max_candidates=8192)
    assert keys.run_key(budget, long) == keys.run_key(m8192, long)
    assert keys.run_key(budget, long) != keys.run_key(config, long)
    # Without statistics the budget is part of the key.
    assert keys.run_key(budget, "/a/path") != keys.run_key(config, "/a/path")


def test_pretrainings_of_other_lengths_or_seeds_never_share_a_run_name():
    default = run_names.DEFAULT_PRETRAIN_EPOCHS
    # The archived runs' names stand at the default length and own seed.
    assert run_names.pretrain_run_name("beauty", 0) == "beauty_pretrain_s0"
    assert run_names.pretrain_run_name("beauty", 0, default) == "beauty_pretrain_s0"
    assert run_names.finetune_variant_name("s3rec", 1, default) == "s3rec"
    assert run_names.finetune_variant_name("s3rec", 1, default, 1) == "s3rec"
    # A shorter pre-training, or one shared from another seed, has its own.
    assert run_names.pretrain_run_name("beauty", 0, 20) == "beauty_pretrain20_s0"
    names = {
        run_names.finetune_variant_name("s3rec", 1, epochs, shared)
        for epochs in (default, 20)
        for shared in (None, 0)
    }
    assert names == {"s3rec", "s3rec_p20", f"s3rec_p{default}from0", "s3rec_p20from0"}
