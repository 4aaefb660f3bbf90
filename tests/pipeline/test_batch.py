"""`genni batch-recommend`: Beam RunInference over the exported SavedModel."""

import json
import os
import shutil
import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from genni.pipeline.preprocess import outputs
from genni.pipeline.serving import batch, export
from genni.pipeline.serving import server as serving
from tests.conftest import review, train_and_export

K = 4


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    run, base, path, _ = train_and_export(
        tmp_path_factory.mktemp("batch"), num_users=150, num_items=50, seed=5
    )
    data = os.path.join(os.path.dirname(run), "data")
    return base, path, data


def _sequences(data: str) -> dict[str, list[str]]:
    with open(os.path.join(data, "sequences.tsv")) as f:
        return {u: items.split() for u, _, items in (x.partition("\t") for x in f)}


def _signature_top_k(path: str, histories: list[list[str]], k: int = K) -> list:
    model = tf.saved_model.load(path)
    width = max(len(h) for h in histories)
    padded = np.array([h + [""] * (width - len(h)) for h in histories], dtype=object)
    out = model.signatures[export.SIGNATURE_TOP_K](
        history=tf.constant(padded), k=tf.constant(k)
    )
    return [
        ([i.decode() for i in ids], scores)
        for ids, scores in zip(
            out[export.ITEM_IDS].numpy().tolist(),
            out[export.SCORES].numpy().tolist(),
            strict=True,
        )
    ]


def _run(exported, tmp_path, input_path, name="out", **kwargs):
    base, _, _ = exported
    config = batch.BatchConfig(
        model=kwargs.pop("model", base),
        input=input_path,
        output=str(tmp_path / name),
        k=K,
        batch_size=kwargs.pop("batch_size", 16),
        **kwargs,
    )
    return config, batch.run(config)


def test_every_user_of_sequences_gets_the_signatures_answer(exported, tmp_path):
    _, path, data = exported
    config, summary = _run(exported, tmp_path, os.path.join(data, "sequences.tsv"))
    histories = _sequences(data)
    found = batch.read_recommendations(config.output)
    assert sorted(found) == sorted(histories)
    assert summary["users_written"] == len(histories)
    assert summary["version"] == 1 and summary["users_popular_fallback"] == 0
    users = sorted(histories)
    expected = _signature_top_k(path, [histories[u] for u in users])
    for user, (ids, scores) in zip(users, expected, strict=True):
        record = found[user]
        assert record["items"] == ids
        np.testing.assert_allclose(record["scores"], scores, rtol=0, atol=1e-6)
        assert not set(record["items"]) & set(histories[user])  # The "new" rule.
    assert sorted(os.listdir(config.output)) == [
        "_SUCCESS",
        "dead_letter",
        "recommendations-00000-of-00001.jsonl",
        "summary.json",
    ]
    assert not [n for n in os.listdir(tmp_path) if "staging" in n]
    with pytest.raises(outputs.OutputExistsError):
        batch.run(config)


def test_batch_answers_equal_the_servers(exported, tmp_path):
    base, _, data = exported
    config, _ = _run(exported, tmp_path, os.path.join(data, "sequences.tsv"))
    found = batch.read_recommendations(config.output)
    histories = _sequences(data)
    users = sorted(histories)[:20]
    srv = serving.Server(base, rest_port=0, grpc_port=0).start()
    try:
        body = {
            "signature_name": export.SIGNATURE_TOP_K,
            "instances": [{"history": histories[u], "k": K} for u in users],
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{srv.rest_port}/v1/models/genni:predict",
            data=json.dumps(body).encode(),
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            predictions = json.loads(response.read())["predictions"]
    finally:
        srv.stop()
    for user, answer in zip(users, predictions, strict=True):
        assert found[user]["items"] == answer["item_ids"]
        np.testing.assert_allclose(
            found[user]["scores"], answer["scores"], rtol=0, atol=1e-5
        )


def test_raw_logs_are_grouped_as_preprocess_groups_them(exported, tmp_path, write_log):
    """Events out of time order, an exact duplicate, a malformed line, and a
    user whose items the model has never seen."""
    _, path, data = exported
    histories = _sequences(data)
    user = sorted(histories)[0]
    items = histories[user]
    lines = [review(user, item, 1000 + t) for t, item in enumerate(items)]
    strangers = [review("stranger", "NEW1", 5), review("stranger", "NEW2", 6)]
    lines = [*lines[::-1], lines[0], "{not json", "", *strangers]
    config, summary = _run(exported, tmp_path, write_log(lines))
    found = batch.read_recommendations(config.output)
    assert sorted(found) == sorted([user, "stranger"])
    (ids, scores), (fallback, _) = _signature_top_k(path, [items, ["NEW1", "NEW2"]])
    assert found[user]["items"] == ids and "popular_fallback" not in found[user]
    np.testing.assert_allclose(found[user]["scores"], scores, rtol=0, atol=1e-6)
    assert found["stranger"]["items"] == fallback
    assert found["stranger"]["popular_fallback"] is True
    assert summary["users_popular_fallback"] == 1
    assert summary["malformed_lines"] == 1 and summary["duplicate_events"] == 1
    dead = os.path.join(config.output, "dead_letter")
    (name,) = os.listdir(dead)
    with open(os.path.join(dead, name)) as f:
        (letter,) = [json.loads(line) for line in f]
    assert letter["line"] == "{not json" and "bad JSON" in letter["reason"]


def test_empty_input_is_an_error_and_writes_nothing(exported, tmp_path, write_log):
    with pytest.raises(ValueError, match="is empty"):
        _run(exported, tmp_path, write_log(["", "  "], name="empty.json"))
    assert not os.path.exists(tmp_path / "out")


def test_all_malformed_input_keeps_its_dead_letters_without_success(
    exported, tmp_path, write_log
):
    lines = ['{"reviewerID": "u"}', "{broken"]
    with pytest.raises(ValueError, match=r"No user .* has a valid record"):
        _run(exported, tmp_path, write_log(lines), format="amazon")
    out = tmp_path / "out"
    assert not (out / "_SUCCESS").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["users_written"] == 0 and summary["malformed_lines"] == 2


def test_model_directories_without_a_servable_version(exported, tmp_path):
    base, path, data = exported
    sequences = os.path.join(data, "sequences.tsv")
    empty = tmp_path / "empty_base"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="No servable model version"):
        _run(exported, tmp_path, sequences, model=str(empty))
    foreign = tmp_path / "foreign" / "1"
    module = tf.Module()
    module.f = tf.function(
        lambda x: {"y": x * 2}, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    tf.saved_model.save(module, str(foreign), signatures={"serving_default": module.f})
    with pytest.raises(ValueError, match="signature mismatch"):
        _run(exported, tmp_path, sequences, model=str(foreign.parent))
    broken = tmp_path / "broken" / "3"
    shutil.copytree(path, broken)
    for name in os.listdir(broken / "variables"):
        if name.startswith("variables.data"):
            (broken / "variables" / name).write_bytes(b"\0" * 10)
    with pytest.raises(ValueError, match=r"Cannot load the SavedModel .*/3"):
        _run(exported, tmp_path, sequences, model=str(broken.parent))
    with open(os.path.join(data, "items.txt")) as f:
        num_items = len(f.read().split())
    too_many = batch.BatchConfig(
        model=base, input=sequences, output=str(tmp_path / "o"), k=num_items + 1
    )
    with pytest.raises(ValueError, match=f"--k must be between 1 and {num_items}"):
        batch.run(too_many)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(("o", ".o"))]


def test_cli_multi_processing_matches_in_process_and_is_quiet(exported, tmp_path):
    base, _, data = exported
    sequences = os.path.join(data, "sequences.tsv")
    config, _ = _run(exported, tmp_path, sequences, name="inprocess")
    out = tmp_path / "multi"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "genni.pipeline.cli.main",
            "batch-recommend",
            "--model",
            base,
            "--input",
            sequences,
            "--output",
            str(out),
            "--k",
            str(K),
            "--direct_running_mode=multi_processing",
            "--direct_num_workers=2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "users written" in result.stdout
    assert result.stderr.strip() == "", result.stderr  # No worker start-up noise.
    multi = batch.read_recommendations(str(out))
    single = batch.read_recommendations(config.output)
    assert sorted(multi) == sorted(single)
    for user, record in single.items():  # Batches differ, so the last bits may.
        assert multi[user]["items"] == record["items"]
        np.testing.assert_allclose(
            multi[user]["scores"], record["scores"], rtol=0, atol=1e-5
        )
