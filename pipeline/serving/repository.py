"""The model store: versions under MODEL_BASE, loaded, checked and hot-swapped.

`ModelRepository` serves the newest version under MODEL_BASE/<n>/ (ASCII-digit
n) that `load_servable` accepts: loaded, checked to be a GenNi export
(`check_genni_export`) and warmed up (`warm_up`). A poller thread looks for
newer versions every POLL_SECONDS and swaps one in atomically; a version that
fails is refused, logged once (again only if its files change), and the served
one stays.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from genni.pipeline.serving import export, predict, warmup
from genni.pipeline.serving.predict import RequestError

# One logger for the whole server (`genni serve --verbose` prints its name).
_LOG = logging.getLogger("genni.pipeline.serving.server")

POLL_SECONDS = 2.0
REQUIRED_SIGNATURES = {
    "serving_default": {export.HISTORY},
    export.SIGNATURE_TOP_K: {export.HISTORY, export.K},
}


def is_version(name: str) -> bool:
    """ASCII digits only: `"²".isdigit()` is True but int() refuses it."""
    return name.isascii() and name.isdigit()


def versions(base_path: str) -> dict[int, str]:
    """Version -> directory name, for ASCII-digit directories with a model.

    Any filesystem TensorFlow reads (local, gs://, s3:// with its plugin)."""
    if not tf.io.gfile.isdir(base_path):
        return {}
    found = {}
    names = (name.rstrip("/") for name in tf.io.gfile.listdir(base_path))
    for v in sorted(names, reverse=True):
        if is_version(v) and tf.io.gfile.exists(
            os.path.join(base_path, v, "saved_model.pb")
        ):
            found[int(v)] = v  # "7" wins over "007".
    return found


@dataclass(frozen=True)
class Servable:
    """One loaded, checked and warmed-up version."""

    version: int
    model: tf.Module
    num_items: int
    signature_defs: get_model_metadata_pb2.SignatureDefMap


def check_genni_export(model: tf.Module) -> int:
    """Raise ValueError unless `model` is a GenNi export; returns its item count.

    Needs the signatures of REQUIRED_SIGNATURES with exactly those inputs and a
    string `item_strings` vector ("" then the items).
    """
    for name, inputs in REQUIRED_SIGNATURES.items():
        if name not in model.signatures:
            raise ValueError(
                f"not a GenNi export: no signature {name!r} "
                f"(has {sorted(model.signatures)})"
            )
        got = set(model.signatures[name].structured_input_signature[1])
        if got != inputs:
            raise ValueError(
                f"not a GenNi export: signature {name!r} takes {sorted(got)}, "
                f"not {sorted(inputs)}"
            )
    items = getattr(model, "item_strings", None)
    if (
        not isinstance(items, (tf.Variable, tf.Tensor))
        or items.dtype != tf.string
        or items.shape.rank != 1
        or items.shape[0] < 2
    ):
        raise ValueError("not a GenNi export: no `item_strings` vector of items")
    return int(items.shape[0]) - 1


def _signature_defs(path: str) -> get_model_metadata_pb2.SignatureDefMap:
    """The SignatureDefs of the `serve` meta graph, as TF Serving reports them."""
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved = saved_model_pb2.SavedModel.FromString(f.read())
    graphs = [g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags]
    defs = get_model_metadata_pb2.SignatureDefMap()
    for key, value in (graphs or saved.meta_graphs)[0].signature_def.items():
        defs.signature_def[key].CopyFrom(value)
    return defs


def warm_up(model: tf.Module, path: str, num_items: int) -> None:
    """Run every signature once before the version takes traffic.

    Each signature that takes `history` (and `k`) runs on a short history of
    the model's own items at each of warmup.BATCH_SIZES, then the export's
    warm-up records (if any) are replayed. Raises if any call fails.
    """
    items = [b.decode("utf-8") for b in model.item_strings[1:4].numpy()]
    for name, fn in model.signatures.items():
        inputs = set(fn.structured_input_signature[1])
        if export.HISTORY not in inputs or inputs - {export.HISTORY, export.K}:
            continue
        for batch_size in warmup.BATCH_SIZES:
            history = warmup.histories(items, batch_size)
            k = np.int32(min(3, num_items)) if export.K in inputs else None
            predict.run_signature(model, name, history, k)
    for request in warmup.read(path):
        fn = predict.get_signature(model, request.model_spec.signature_name)
        fn(**{n: tf.constant(tf.make_ndarray(p)) for n, p in request.inputs.items()})


def load_servable(path: str, version: int, ann: bool = False) -> Servable:
    """Load, check and warm up the SavedModel at `path`; raises if it is unfit.

    `ann`: answer `serving_default` and `top_k` from the version's ANN index
    (`genni.pipeline.serving.ann`); a version without one is unfit.
    """
    model = tf.saved_model.load(path)
    num_items = check_genni_export(model)
    if ann:
        from genni.pipeline.serving.ann import AnnModel

        model = AnnModel(model, path)
    defs = _signature_defs(path)
    warm_up(model, path, num_items)
    return Servable(version, model, num_items, defs)


def _fingerprint(path: str) -> tuple:
    """Names, sizes and mtimes of the files under `path`: changes if they do."""
    found = []
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            found.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


class ModelRepository:
    """Versions of one model under a base path; serves the newest that loads.

    `refused` maps each version that was refused to why (the error). A refused
    version is retried only when its files change.
    """

    def __init__(self, base_path: str, name: str, ann: bool = False):
        self.base_path = base_path
        self.name = name
        self.ann = ann
        self.refused: dict[int, str] = {}
        self._refused_files: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._served: Servable | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        if not self.poll():
            why = "".join(f"\n  version {v}: {e}" for v, e in self.refused.items())
            raise FileNotFoundError(
                f"No loadable model version under {base_path!r}: export one with "
                f"`genni export` (MODEL_BASE/<version>/saved_model.pb).{why}"
            )

    def available(self) -> dict[int, str]:
        return versions(self.base_path)

    @property
    def served(self) -> Servable | None:
        return self._served

    def poll(self) -> bool:
        """Serve the newest version that loads, if newer than the one served.

        Tries the versions newer than the served one, newest first; a version
        that fails to load, check or warm up is refused (logged once) and the
        next older one is tried. Never raises for a bad version. True if any
        version is served.
        """
        current = self._served.version if self._served else 0
        try:
            versions = self.available()
        except OSError as e:
            _LOG.error("Cannot list %s: %s", self.base_path, e)
            return self._served is not None
        for version in sorted(versions, reverse=True):
            if version <= current:
                break
            path = os.path.join(self.base_path, versions[version])
            files = _fingerprint(path)
            if self._refused_files.get(version) == files:
                continue  # Refused already, and unchanged since.
            try:
                servable = load_servable(path, version, self.ann)
            except Exception as e:  # Whatever is wrong with it, skip it.
                self.refused[version] = f"{type(e).__name__}: {str(e)[:500]}"
                self._refused_files[version] = files
                _LOG.error(
                    "Refused %s version %s (%s); %s",
                    self.name,
                    version,
                    self.refused[version],
                    f"still serving version {current}" if current else "skipped",
                )
                continue
            with self._lock:  # Swap: new requests see the new version.
                self._served = servable
            self.refused.pop(version, None)
            self._refused_files.pop(version, None)
            _LOG.info("Serving %s version %s", self.name, version)
            break
        return self._served is not None

    def start_polling(self, seconds: float = POLL_SECONDS) -> None:
        """Poll every `seconds` in a daemon thread, which no error stops."""

        def loop() -> None:
            while not self._stop.wait(seconds):
                try:
                    self.poll()
                except Exception:  # The poller must outlive any one poll.
                    _LOG.exception("Version poll failed; polling goes on")

        self._poller = threading.Thread(target=loop, daemon=True, name="poll")
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:  # Let a load in progress finish.
            self._poller.join(timeout=60)

    def get(self, name: str, version: int | None) -> Servable:
        """The served version (404 RequestError for another name or version)."""
        if name != self.name:
            raise RequestError(f"Servable not found for request: {name!r}", 404)
        with self._lock:
            served = self._served
        if version is not None and version != served.version:
            raise RequestError(
                f"Servable not found for request: {name!r} version {version}", 404
            )
        return served
