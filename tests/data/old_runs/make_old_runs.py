"""Make the run directories of tests/pipeline/test_old_runs.py with OLD code.

They were written by commit fff6d09, the last before the settings were split
into `ModelConfig` / `SamplerConfig` (issue 43), and must stay loadable and
resumable by every later version. To make them again at that commit:

    git worktree add /tmp/old fff6d09
    pip install --no-deps --target /tmp/old-site /tmp/old
    PYTHONPATH=/tmp/old-site python tests/data/old_runs/make_old_runs.py \
        /tmp/old tests/data/old_runs

Each run is killed in epoch 2 of 2 (its epoch-1 checkpoint kept); the old
code's own continuation of a copy gives `expected.json`'s metrics, and its
run key is recorded beside them.
"""

import contextlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

os.environ["TF_USE_LEGACY_KERAS"] = "1"

from genni.pipeline.reproduce import keys
from genni.pipeline.training import train
from genni.pipeline.training.config import TrainConfig, preset

old_checkout, root = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
spec = importlib.util.spec_from_file_location(
    "old_conftest", old_checkout / "tests" / "conftest.py"
)
conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conftest)

shutil.rmtree(root, ignore_errors=True)
root.mkdir(parents=True)
os.chdir(root)
conftest.make_dataset(Path("."), 60, 30, 3, 12)  # As the test remakes it.
MODEL = dict(hidden_size=8, num_layers=1, num_heads=1, batch_size=64, epochs=2)
RUNS = {
    "recommended": dict(preset("recommended"), **MODEL),
    "capped": dict(
        preset("paper"),
        max_candidates=8,
        successors=2,
        exclude_seen=True,
        alpha_step=0.1,
        **MODEL,
    ),
}
expected = {}
original = train._log_epoch
for name, values in RUNS.items():
    config = TrainConfig(data="data", output=name, **values)

    def killed(writer, record):
        if record["epoch"] == 2:
            raise KeyboardInterrupt
        original(writer, record)

    train._log_epoch = killed
    with contextlib.suppress(KeyboardInterrupt):
        train.train(config, verbose=0)
    train._log_epoch = original
    shutil.copytree(name, name + "_copy")
    copy = TrainConfig(data="data", output=name + "_copy", **values)
    result = train.train(copy, resume=True, verbose=0)
    shutil.rmtree(name + "_copy")
    shutil.rmtree(os.path.join(name, "tensorboard"), ignore_errors=True)
    os.remove(os.path.join(name, "train.lock"))
    key = keys.run_key(config, keys.data_fingerprint("data"))
    expected[name] = {"key": key, "valid": result["valid"], "test": result["test"]}
shutil.rmtree("data")
os.remove("log.json.gz")
Path("expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
