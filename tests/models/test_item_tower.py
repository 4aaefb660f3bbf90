"""The item tower (`genni.models.item_tower`): an item's vector is its ID row
plus its attributes' mean, at the input and as a candidate; an item without a
trained ID row is scored by its attributes alone, in process and through the
exported SavedModel."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from genni.models.item_tower import ItemTower, item_features
from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.serving import export, guard
from genni.pipeline.training import model, train
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset
from tests.conftest import review

TOWER = dict(hidden_size=8, num_layers=1, num_heads=1, batch_size=32, item_tower=True)


def test_features_number_attributes_by_first_appearance():
    features = item_features({"1": ["b", "a"], "3": ["a", 7]}, 3, untrained={3})
    assert features.names == ("b", "a", "7")
    # "7": no item with a trained ID row holds it, so no training reaches its
    # row: it is left out (item 3 is "a" alone).
    assert features.attributes.tolist() == [[0, 0], [1, 2], [0, 0], [2, 0]]
    assert features.id_rows.tolist() == [0.0, 1.0, 1.0, 0.0]
    assert features.unreached == 1


def test_an_item_without_an_id_row_is_its_attributes():
    features = item_features({"1": ["x", "y"], "2": ["x", "y"], "3": []}, 3, {2})
    tower = ItemTower(features, hidden_size=4, id_dropout=0.5, seed=0)
    tower.build(None)
    ids = tf.random.stateless_normal([4, 4], seed=[1, 2])
    rows = tower.attribute_embedding.embeddings.numpy()
    table = tower(ids).numpy()
    np.testing.assert_allclose(table[1], ids[1] + (rows[1] + rows[2]) / 2, atol=1e-6)
    np.testing.assert_allclose(table[2], (rows[1] + rows[2]) / 2, atol=1e-6)
    np.testing.assert_allclose(table[3], ids[3], atol=1e-6)  # No attributes.
    np.testing.assert_allclose(table[0], 0.0, atol=1e-6)  # Padding.
    # Training leaves some ID rows out (a draw a step), never adds one.
    dropped = [tower(ids, training=True).numpy() for _ in range(8)]
    assert any(np.allclose(d[1], (rows[1] + rows[2]) / 2, atol=1e-6) for d in dropped)
    assert all(np.allclose(d[2], table[2], atol=1e-6) for d in dropped)


@pytest.fixture(scope="module")
def tower_run(tmp_path_factory):
    """A run with the item tower on a log where item "cold" is only ever a
    last event (leave-one-out's test target): in the vocabulary, no training
    event, no trained ID row; its attributes are those of "i0" to "i2"."""
    root = tmp_path_factory.mktemp("tower")
    lines = [
        review(f"u{u}", f"i{(u + j) % 12}", 10 * j + u)
        for u in range(40)
        for j in range(6)
    ]
    lines += [review(f"u{u}", "cold", 1000 + u) for u in range(0, 40, 8)]
    log = root / "log.json"
    log.write_text("\n".join(lines) + "\n")
    attributes = root / "items.jsonl"
    rows = [
        {"item_id": f"i{i}", "kind": f"k{i % 3}", "shelf": f"s{i // 4}"}
        for i in range(12)
    ]
    rows.append({"item_id": "cold", "kind": "k0", "shelf": "s0"})
    # Listed with no event at all: in the catalog, so in the vocabulary.
    rows.append({"item_id": "listed", "kind": "k1", "shelf": "s1"})
    attributes.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = str(root / "data")
    inmemory.run(
        PreprocessConfig(
            str(log), data, min_count=1, max_len=10, item_attributes=str(attributes)
        )
    )
    run = str(root / "run")
    train.train(
        TrainConfig.of(data=data, output=run, epochs=1, candidates="all", **TOWER),
        verbose=0,
    )
    return run, data


@pytest.fixture(scope="module")
def tower_export(tower_run):
    """`tower_run` exported (k: every item), in its own models directory."""
    run, data = tower_run
    base = str(Path(run).parent / "models")
    return base, export.export(run, base, k=Dataset.open(data).num_items)


def test_a_run_scores_an_item_it_never_trained_on(tower_run, tower_export):
    run, data = tower_run
    dataset = Dataset.open(data)
    cold = dataset.ids("items.txt").index("cold")
    assert dataset.item_counts()[cold] == 0
    trained = model.load_run(run)
    tower = trained.encoder.item_tower
    assert tower.id_rows.numpy()[cold] == 0.0
    # Training moved the attribute rows, and the run's weights hold them:
    # they are not the rows a fresh model of the same seed starts from.
    fresh = model.build_model(model.read_config(run), dataset, setup=False)
    moved = np.abs(
        tower.attribute_embedding.embeddings.numpy()
        - fresh.encoder.item_tower.attribute_embedding.embeddings.numpy()
    )
    assert moved[1:].max() > 1e-3
    table = trained.item_embeddings.numpy()
    np.testing.assert_allclose(
        table[cold], tower.attribute_vectors().numpy()[cold], atol=1e-6
    )
    # A history holding it is answered, and it is scored, finitely.
    history = tf.constant([[0] * 8 + [1, cold]], tf.int64)
    scores = trained(history).numpy()[0]
    assert np.isfinite(scores[1:]).all() and np.isfinite(scores[cold])

    # The exported SavedModel ranks it among every item, raw ids in.
    _, path = tower_export
    top_k = guard.top_k_signature(path)
    _, ids = guard.served_rankings(
        top_k,
        np.array([["i0", "cold", "i1"]], dtype=object),
        np.array(["cold"], dtype=object),
    )
    served = [i.decode() for i in ids[0] if i]
    assert "cold" in served and len(served) == dataset.num_items
    # An item with no event at all, listed in the items file, is served too,
    # and a history holding it is answered.
    listed = dataset.ids("items.txt").index("listed")
    assert "listed" in served and tower.id_rows.numpy()[listed] == 0.0
    assert np.isfinite(
        trained(tf.constant([[0] * 9 + [listed]], tf.int64)).numpy()
    ).all()
    answered = top_k(history=tf.constant([["cold", "i3"]]), k=tf.constant(3))
    assert np.isfinite(answered["scores"].numpy()).all()


def test_a_warm_start_carries_the_attribute_rows_by_name(tower_run, tmp_path):
    from genni.pipeline.training import warm_start

    run, data = tower_run
    root = tmp_path
    log = root / "log.json"
    old_lines = (Path(data).parent / "log.json").read_text().splitlines()
    new = [review(f"u{u}", "new1", 2000 + u) for u in range(0, 40, 2)]
    log.write_text("\n".join([*old_lines, *new]) + "\n")
    items = root / "items.jsonl"
    rows = (Path(data).parent / "items.jsonl").read_text().splitlines()
    rows.append(json.dumps({"item_id": "new1", "kind": "k9", "shelf": "s1"}))
    items.write_text("\n".join(rows) + "\n")
    grown = str(root / "grown")
    inmemory.run(
        PreprocessConfig(
            str(log),
            grown,
            min_count=1,
            max_len=10,
            item_attributes=str(items),
            previous=data,
        )
    )
    config = TrainConfig.of(
        data=grown, output="", warm_start=run, candidates="all", **TOWER
    )
    started = model.build_model(config, Dataset.open(grown), setup=False)
    warm_start.initialize(started.encoder, config)
    before = model.load_run(run).encoder.item_tower
    after = started.encoder.item_tower
    old_rows = before.attribute_embedding.embeddings.numpy()
    new_rows = after.attribute_embedding.embeddings.numpy()
    for name in before.names:  # Every old attribute keeps its row.
        np.testing.assert_array_equal(
            new_rows[after.names.index(name) + 1],
            old_rows[before.names.index(name) + 1],
        )
    assert "kind:k9" in after.names and "kind:k9" not in before.names
    # Items the run had trained rows for keep them; "cold" had none, and
    # "new1" (only ever a last event) has none either: their attributes
    # stand for them.
    ids = Dataset.open(grown).ids("items.txt")
    kept = after.id_rows.numpy()
    assert kept[ids.index("i0")] == 1.0
    assert kept[ids.index("cold")] == 0.0 and kept[ids.index("new1")] == 0.0


def test_rest_and_grpc_serve_an_item_with_no_event(tower_export):
    """Through `genni serve` (TF Serving's API): an item listed in the items
    file with no event is answered over REST and gRPC, a history holding it
    too; the SavedModel holds core ops only."""
    import grpc
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from genni.pipeline.serving import server as serving
    from tests.pipeline.test_serving import _rest

    base, path = tower_export
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString(Path(path, "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    ops = {n.op for n in graph.node} | {
        n.op for f in graph.library.function for n in f.node_def
    }
    assert not ops & {"PyFunc", "EagerPyFunc"}
    assert all(op_def_registry.get(op) is not None for op in ops)
    srv = serving.Server(base, rest_port=0, grpc_port=0, poll_seconds=0.2).start()
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
    )
    answers = {}
    try:
        for history in (["i0", "i1"], ["listed"], ["unknown"]):
            status, body = _rest(
                srv, "/v1/models/genni:predict", {"instances": [history]}
            )
            assert status == 200
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "genni"
            request.inputs["history"].CopyFrom(
                tf.make_tensor_proto([history], dtype=tf.string)
            )
            answer = stub.Predict(request, timeout=30)
            ids = [b.decode() for b in tf.make_ndarray(answer.outputs["item_ids"])[0]]
            assert ids == body["predictions"][0]["item_ids"]  # REST as gRPC.
            assert np.isfinite(tf.make_ndarray(answer.outputs["scores"])).all()
            answers[history[0]] = ids
        assert "listed" in answers["i0"]  # Recommended, never trained on.
        # A history of it is read by the model, not the popularity fallback
        # an unknown item gets.
        assert answers["listed"] != answers["unknown"]
    finally:
        srv.stop()


def test_a_newly_listed_item_is_served_by_the_next_version_untrained(
    tower_run, tower_export, tmp_path
):
    """`genni add-items`: an item first listed in a new items file is in the
    REST, gRPC and batch-recommend answers of the next version, with no
    training run; the served items keep their vectors; a file that drops or
    changes a listed item is refused."""
    import shutil
    import time

    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from genni.pipeline.serving import ann, batch, catalog_version
    from genni.pipeline.serving import server as serving
    from tests.pipeline.test_serving import _rest

    run, _ = tower_run
    base = tmp_path / "models"
    shutil.copytree(tower_export[1], base / "1")  # A plain export: no run recorded.
    listed = (Path(run).parent / "items.jsonl").read_text()
    grown = tmp_path / "grown.jsonl"
    fresh = {"item_id": "fresh", "kind": "k2", "shelf": "s2"}
    grown.write_text(listed + json.dumps(fresh) + "\n")
    with pytest.raises(ValueError, match="does not record its run"):
        catalog_version.add_items(str(base), str(grown))

    def answers(srv, stub, k):
        """top_k of a history, k its every item, over REST and gRPC; None
        while the served version has fewer items."""
        status, body = _rest(
            srv,
            "/v1/models/genni:predict",
            {"signature_name": "top_k", "inputs": {"history": [["i0", "i1"]], "k": k}},
        )
        if status == 400 and "`k` must be between" in body["error"]:
            return None
        assert status == 200, body
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "genni"
        request.model_spec.signature_name = "top_k"
        request.inputs["history"].CopyFrom(tf.make_tensor_proto([["i0", "i1"]]))
        request.inputs["k"].CopyFrom(tf.make_tensor_proto(k, dtype=tf.int32))
        answer = stub.Predict(request, timeout=30)
        ids = [b.decode() for b in tf.make_ndarray(answer.outputs["item_ids"])[0]]
        assert ids == body["outputs"]["item_ids"][0]  # REST as gRPC.
        assert np.isfinite(tf.make_ndarray(answer.outputs["scores"])).all()
        return [i for i in ids if i]

    srv = serving.Server(str(base), rest_port=0, grpc_port=0, poll_seconds=0.2).start()
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
    )
    try:
        before = answers(srv, stub, 14)
        assert len(before) == 14 and "fresh" not in before
        decision = catalog_version.add_items(
            str(base), str(grown), run_dir=run, log=lambda *_: None
        )
        assert decision["version"] == 2 and decision["new_items"] == 1
        assert decision["kind"] == "catalog" and decision["unknown_attributes"] == 0
        for _ in range(300):  # The server swaps to version 2 within its polls.
            after = answers(srv, stub, 15)
            if after is not None:
                break
            time.sleep(0.1)
        assert "fresh" in after
        # The served items keep their order: the new one only joins them.
        assert [i for i in after if i != "fresh"] == before
    finally:
        srv.stop()
    model_2 = tf.saved_model.load(str(base / "2"))
    vectors = ann.item_table(model_2)
    tower = model.load_run(run).encoder.item_tower
    rows = tower.attribute_embedding.embeddings.numpy()
    names = {n: i for i, n in enumerate(tower.names, start=1)}
    np.testing.assert_allclose(
        vectors[-1], (rows[names["kind:k2"]] + rows[names["shelf:s2"]]) / 2, atol=1e-6
    )
    # Bulk: batch-recommend on the model base answers from version 2.
    histories = tmp_path / "histories.tsv"
    histories.write_text("u1 i0 i1\n")
    config = batch.BatchConfig(
        model=str(base),
        input=str(histories),
        output=str(tmp_path / "bulk"),
        k=15,
        format="sequences",
    )
    assert batch.run(config)["version"] == 2
    assert "fresh" in batch.read_recommendations(config.output)["u1"]["items"]
    # The next version grows from this one: nothing new is refused, and so is
    # a file that drops or changes a listed item.
    with pytest.raises(ValueError, match="lists no item"):
        catalog_version.add_items(str(base), str(grown))
    dropped = tmp_path / "dropped.jsonl"
    dropped.write_text("".join(grown.read_text().splitlines(True)[1:]))
    with pytest.raises(ValueError, match="drops 1 of the items"):
        catalog_version.add_items(str(base), str(dropped))
    assert sorted(p.name for p in base.iterdir()) == ["1", "2", "decisions.jsonl"]
    # Asked (--allow-changes): "i0" dropped stays served as it was, "i5" (a
    # trained item, k2 on s1) listed as k0 keeps its ID row with its new
    # attributes, "fresh" (k2 on s2) is listed as k1: its attributes alone.
    changed = tmp_path / "changed.jsonl"
    lines = [json.loads(line) for line in dropped.read_text().splitlines()]
    for line in lines:
        if line["item_id"] == "i5":
            line["kind"] = "k0"
        if line["item_id"] == "fresh":
            line["kind"] = "k1"
    changed.write_text("".join(json.dumps(line) + "\n" for line in lines))
    decision = catalog_version.add_items(
        str(base), str(changed), allow_changes=True, log=lambda *_: None
    )
    assert decision["version"] == 3 and decision["new_items"] == 0
    assert decision["changed_items"] == 2 and decision["dropped_items"] == 1
    model_3 = tf.saved_model.load(str(base / "3"))
    strings = [s.decode() for s in model_3.item_strings.numpy()]
    assert strings == [s.decode() for s in model_2.item_strings.numpy()]
    table_2, table_3 = vectors, ann.item_table(model_3)
    row = {item: n for n, item in enumerate(strings)}
    np.testing.assert_array_equal(table_3[row["i0"]], table_2[row["i0"]])
    np.testing.assert_allclose(
        table_3[row["fresh"]],
        (rows[names["kind:k1"]] + rows[names["shelf:s2"]]) / 2,
        atol=1e-6,
    )
    moved = (rows[names["kind:k0"]] - rows[names["kind:k2"]]) / 2
    np.testing.assert_allclose(
        table_3[row["i5"]], table_2[row["i5"]] + moved, atol=1e-5
    )


def test_a_replay_scores_the_targets_without_a_trained_id_row_apart(tower_export):
    """`genni replay`'s `new_targets`: the cases whose target the served
    version has no trained ID row for (no training event), scored apart."""
    from genni.pipeline.loop.scoring import score_version, trained_items

    _, path = tower_export
    trained = trained_items(tf.saved_model.load(path))
    assert "i0" in trained and not {"cold", "listed", ""} & trained
    histories = np.array([["i0", "i1"], ["i2"], ["i3", "i4"], ["i5"]], dtype=object)
    targets = np.array(["listed", "i3", "cold", "i6"], dtype=object)
    scores = score_version(path, histories, targets)
    new = scores["new_targets"]
    assert new["cases"] == 2
    # k covers every item: each target is ranked, in the top 10 or not.
    every = score_version(path, histories[[0, 2]], targets[[0, 2]])
    assert new["HR@10"] == every["HR@10"] and new["NDCG@10"] == every["NDCG@10"]
    assert score_version(path, histories[1:2], targets[1:2])["new_targets"] == {
        "cases": 0
    }


def test_add_items_check_catches_a_served_item_that_moved(
    tower_run, tower_export, tmp_path
):
    """What `genni add-items` checks before it publishes: the new version
    ranks the served items as the served one, but for the changed ones."""
    from genni.pipeline.serving import catalog_version

    run, data = tower_run
    dataset = Dataset.open(data)
    trained = model.load_run(run)
    items = dataset.ids("items.txt")[1:]
    table = trained.encoder.item_embeddings.numpy()

    def version(name, vectors):
        module = export.ServingModule(
            trained,
            items,
            dataset.item_counts(),
            dataset.max_len,
            5,
            "all",
            item_table=vectors,
        )
        return export.save_module(module, str(tmp_path / name), 1, items, model="x")

    served = tower_export[1]
    check = catalog_version._check_served_items
    assert check(served, version("same", table), items, set()) == 0
    moved = table.copy()
    moved[3] = -5.0 * moved[3]  # Item 3 (items[2]) moved.
    moved_path = version("moved", moved)
    assert check(served, moved_path, items, set()) > 0
    assert check(served, moved_path, items, {items[2]}) == 0  # A changed item.


def test_add_items_refuses_what_cannot_score_new_items(
    tower_run, tower_export, tmp_path
):
    """No trained model serving (the popularity ranking), or a run that knows
    items by their IDs alone: nothing to score a new item with."""
    import shutil

    from genni.pipeline.serving import catalog_version

    run, data = tower_run
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"item_id": "fresh", "kind": "k0"}) + "\n")
    popular = tmp_path / "popular"
    export.export_popular(data, str(popular))
    with pytest.raises(ValueError, match="popularity ranking"):
        catalog_version.add_items(str(popular), str(items), run_dir=run)
    ids_only = tmp_path / "ids_only"
    shutil.copytree(run, ids_only)
    config = json.loads((ids_only / "config.json").read_text())
    (ids_only / "config.json").write_text(json.dumps({**config, "item_tower": False}))
    base = tmp_path / "models"
    shutil.copytree(tower_export[1], base / "1")
    with pytest.raises(ValueError, match="IDs alone"):
        catalog_version.add_items(str(base), str(items), run_dir=str(ids_only))
    assert sorted(p.name for p in base.iterdir()) == ["1"]  # Nothing written.


def test_the_recommended_preset_knows_items_by_attributes_where_data_has_them(
    tower_run, tmp_path
):
    """`genni train`, the pipeline's train step and the tuner turn the tower
    on where the dataset has item attributes, off without them, in the paper
    preset, when told, or when the warm start's run (or the run resumed) had
    none."""
    from genni.pipeline.cli import train_args
    from genni.pipeline.cli.main import build_parser
    from genni.pipeline.loop import config as loop_config
    from genni.pipeline.training import tune

    run, data = tower_run
    bare = tmp_path / "bare"  # A dataset without item attributes.
    bare.mkdir()

    def towered(*flags, output="o"):
        args = build_parser().parse_args(["train", "--output", output, *flags])
        return train_args.config_from_args(args).model.item_tower

    assert towered("--data", data)
    assert not towered("--data", str(bare))
    assert not towered("--data", data, "--no-item-tower")
    assert not towered("--data", data, "--preset", "paper")
    assert towered("--data", data, "--preset", "paper", "--item-tower")
    assert towered("--data", data, "--warm-start", run)  # A tower run.
    untowered = tmp_path / "untowered"
    untowered.mkdir()
    config = json.loads((Path(run) / "config.json").read_text())
    (untowered / "config.json").write_text(json.dumps({**config, "item_tower": False}))
    assert not towered("--data", data, "--warm-start", str(untowered))
    # A stored run resumes as the model it is (trained before the rule).
    assert not towered("--data", data, "--resume", output=str(untowered))
    assert towered("--data", data, "--resume", output=run)
    assert loop_config.train_config({}, data, {}).model.item_tower
    assert not loop_config.train_config({}, str(bare), {}).model.item_tower
    off = loop_config.train_config({"train": {"item_tower": False}}, data, {})
    assert not off.model.item_tower
    served = loop_config.train_config({}, data, {}, warm_start=str(untowered))
    assert not served.model.item_tower  # The served run's model, warm-started.
    assert tune.trial_base(data).model.item_tower
