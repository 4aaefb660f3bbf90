"""The ANN path (`genni ann-index`, `genni serve --ann`) on a tiny export: it
answers as the SavedModel's brute-force `top_k` does when it searches every
item, keeps the export's contract, and is refused where it cannot answer."""

import json
import os
import shutil
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from genni.pipeline.serving import ann, export
from genni.pipeline.serving import server as serving
from tests.conftest import train_and_export

pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("ann")
    run, base, path, items = train_and_export(
        root, num_users=120, num_items=60, seed=3, max_len=10
    )
    return run, base, path, items


def _histories(items, rng, batch=16):
    rows = [list(rng.choice(items, size=rng.integers(1, 6))) for _ in range(batch)]
    width = max(map(len, rows))
    return np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)


def _brute(path, history, k):
    top_k = tf.saved_model.load(path).signatures[export.SIGNATURE_TOP_K]
    out = top_k(history=tf.constant(history, dtype=tf.string), k=tf.constant(k))
    return {name: value.numpy() for name, value in out.items()}


def test_an_index_that_searches_every_item_answers_as_brute_force(exported):
    _, _, path, items = exported
    meta = ann.build(path, "ivf", nlist=1, nprobe=1, log=lambda *_: None)
    assert meta["num_items"] == len(items) and meta["candidates"] == "new"
    index = ann.AnnIndex(path)
    rng = np.random.default_rng(0)
    history = _histories(items, rng)
    history[0] = ["not-an-item"] + [""] * (history.shape[1] - 1)  # Fallback row.
    got, want = index.top_k(history, 7), _brute(path, history, 7)
    np.testing.assert_array_equal(got[export.ITEM_IDS], want[export.ITEM_IDS])
    np.testing.assert_allclose(
        got[export.SCORES], want[export.SCORES], rtol=1e-5, atol=1e-5
    )
    np.testing.assert_array_equal(got[export.NUM_RESULTS], [7] * len(history))
    for row, answer in zip(history, got[export.ITEM_IDS], strict=True):
        assert not {a.decode() for a in answer} & set(row)  # "new": no history.
    # The default k is the export's (5); recall against brute force is 1.
    assert index.top_k(history)[export.ITEM_IDS].shape == (len(history), 5)
    exact = want[export.ITEM_IDS]
    assert ann.recall_at_k(got[export.ITEM_IDS], exact, 7) == 1.0


def test_hnsw_finds_the_brute_force_top_10_of_a_small_catalog(exported):
    _, _, path, items = exported
    ann.build(path, "hnsw", log=lambda *_: None)
    history = _histories(items, np.random.default_rng(1))
    got = ann.AnnIndex(path).top_k(history, 10)[export.ITEM_IDS]
    assert ann.recall_at_k(got, _brute(path, history, 10)[export.ITEM_IDS]) >= 0.95


def test_default_ivf_settings_follow_the_catalog():
    assert ann.default_nlist(717_168) == 847  # About sqrt(N).
    assert ann.default_nprobe(847) == 211  # A quarter of the clusters.
    assert ann.default_nlist(60) == 1 and ann.default_nprobe(1) == 1
    assert ann.default_nprobe(20) == 8


def test_recall_is_the_share_of_the_exact_top_k_found():
    exact = np.array([[b"a", b"b"], [b"c", b""]], dtype=object)
    approximate = np.array([[b"b", b"x"], [b"c", b"a"]], dtype=object)
    assert ann.recall_at_k(approximate, exact, 2) == pytest.approx((0.5 + 1.0) / 2)


def test_missing_stale_or_unknown_indexes_are_clear_errors(exported, tmp_path):
    _, _, path, _ = exported
    copy = str(tmp_path / "1")
    shutil.copytree(path, copy)
    shutil.rmtree(os.path.join(copy, ann.ANN_DIR), ignore_errors=True)
    with pytest.raises(FileNotFoundError, match="genni ann-index --model"):
        ann.AnnIndex(copy)
    with pytest.raises(ValueError, match="kind"):
        ann.build(copy, "lsh")
    with pytest.raises(FileNotFoundError, match="MODEL_BASE/<version>"):
        ann.build(str(tmp_path))  # The base, not a version.
    ann.build(copy, "ivf", nlist=2, log=lambda *_: None)
    meta_path = os.path.join(copy, ann.ANN_DIR, ann.META_FILE)
    with open(meta_path) as f:
        meta = json.load(f)
    meta["num_items"] += 1
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match="rebuild it"):
        ann.AnnIndex(copy)
    os.remove(os.path.join(copy, export.SETTINGS_FILE))  # An older export.
    with pytest.raises(ValueError, match="export it again"):
        ann.build(copy)


def test_serve_with_ann_answers_from_the_index_and_refuses_versions_without_one(
    exported, tmp_path
):
    _, _, path, items = exported
    base = tmp_path / "models"
    shutil.copytree(path, base / "1")
    # A coarse index (1 of 8 clusters searched): its answers differ from brute
    # force, so the server's answers show where they came from.
    ann.build(str(base / "1"), "ivf", nlist=8, nprobe=1, log=lambda *_: None)
    shutil.copytree(path, base / "2")
    shutil.rmtree(base / "2" / ann.ANN_DIR, ignore_errors=True)
    server = serving.Server(str(base), rest_port=0, grpc_port=0, ann=True).start()
    try:
        assert server.repository.served.version == 1  # 2 has no index.
        assert "no ANN index" in server.repository.refused[2]
        history = _histories(items, np.random.default_rng(2))
        rows = [[h for h in row if h] for row in history]
        body = json.dumps({"instances": [{"history": r, "k": 4} for r in rows]})
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.rest_port}/v1/models/genni:predict",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            predictions = json.loads(response.read())["predictions"]
        answers = [p["item_ids"] for p in predictions]
        index = ann.AnnIndex(str(base / "1")).top_k(history, 4)[export.ITEM_IDS]
        brute = _brute(path, history, 4)[export.ITEM_IDS]
        decoded = lambda ids: [[i.decode() for i in row] for row in ids]  # noqa: E731
        assert answers == decoded(index) != decoded(brute)
    finally:
        server.stop()
