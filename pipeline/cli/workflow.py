"""`genni pipeline --config pipeline.yaml`: the steps from logs to the served
model, in order, each skipped when its output for the same inputs and settings
already exists.

    input: logs/*.json.gz          # review logs, any format `genni preprocess` reads
    workdir: work                  # data/, tune/, runs/ and models/ go here
    preprocess: {min_count: 5}     # `genni preprocess` settings (optional;
                                   #   split: time, test_days: 7 for the loop)
    tune: {max_trials: 8}          # optional: search first, train the best found
    train: {sampler: genni}        # `genni train` settings (optional; preset: paper;
                                   #   warm_start: served for the nightly loop)
    export: {k: 10, max_regression: 0.0, split: valid}

The steps are the plain commands' functions, not a scheduler: a step is
skipped when
- preprocess: `workdir/data/<key>` was written from the same input files
  (paths, sizes, modification times) with the same settings;
- tune: the search with the same settings on the same dataset has its best
  configuration (keras-tuner continues an unfinished one);
- train: a finished run with the same run key (settings + dataset statistics,
  as `genni.pipeline.training.keys` keys runs) is in `workdir/runs`; an
  unfinished one resumes;
- evaluate: always cheap: the run's test metrics (`metrics.json`);
- export: the served version already holds this run, or this run was refused
  against the version serving now (the guarded export,
  `genni export --against`).

With `train: {warm_start: served}`, each run is the nightly loop's step: the
run behind the version serving now lends its dataset's ids to the new
preprocessing (`genni preprocess --previous`) and its weights to the new run
(`genni train --warm-start`); with nothing served, or a served run whose
weights do not fit the configured model (another encoder, width, depth), it
trains from scratch and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import os

from genni.components import schema
from genni.components.settings import (
    NON_NEGATIVE,
    Settings,
    at_least,
    read_file,
    setting,
)

STAMP_DIR = ".pipeline"
SERVED = "served"  # `train: {warm_start: served}`
SECTIONS = ("input", "workdir", "preprocess", "tune", "train", "export")


def load_config(path: str, needs: tuple[str, ...] = ("input", "workdir")) -> dict:
    """The pipeline file (YAML or JSON), checked: unknown sections are errors;
    `needs`: the sections it must have."""
    config = read_file(path, "--config")
    unknown = sorted(set(config) - set(SECTIONS))
    if unknown:
        raise ValueError(
            f"Unknown sections in {path!r}: {', '.join(unknown)} "
            f"(known: {', '.join(SECTIONS)})."
        )
    for name in needs:
        if not isinstance(config.get(name), str):
            raise ValueError(f"{path!r} needs `{name}:` (a path).")
    for name in ("preprocess", "tune", "train", "export"):
        value = config.get(name)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"`{name}:` in {path!r} must be a mapping of settings.")
    check(config)
    return config


@dataclasses.dataclass(frozen=True)
class ExportConfig(Settings):
    """The `export:` section: the guarded export of each new run."""

    KIND = "`export:` settings"

    k: int = setting(10, "Items per answer.", check=at_least(1))
    max_regression: float = setting(
        0.0, "NDCG@10 points a candidate may lose.", check=NON_NEGATIVE
    )
    split: str = setting(
        schema.VALID, "Where the guard compares.", choices=(schema.VALID, schema.TEST)
    )
    candidates: str | None = setting(
        None, "The ranking rule (default: the run's).", choices=(None, "new", "all")
    )
    baseline: str = setting(
        "popular",
        "What a candidate must beat besides the served version: 'popular', the "
        "popularity ranking of its training events (it serves while no model "
        "has beaten it), or 'none'.",
        choices=("popular", "none"),
    )
    refit: bool = setting(
        False,
        "Publish a refit: the judged run's settings and best epoch count, "
        "trained again on every event of the input (the windows included; "
        "needs `preprocess: {split: time}`), judged by the run it refits.",
    )


def check(config: dict) -> None:
    """Every section's settings, read and checked before any step writes:
    a wrong name, type or value is refused here, not steps later."""
    from genni.pipeline.preprocess.config import PreprocessConfig
    from genni.pipeline.training.config import TuneConfig

    export_settings = ExportConfig.from_dict(config.get("export") or {})
    if export_settings.refit and (config.get("preprocess") or {}).get("split") != (
        "time"
    ):
        raise ValueError(
            "`export: refit` needs `preprocess: {split: time}`: a refit learns the "
            "events of the split's windows."
        )
    if config.get("tune") is not None:
        TuneConfig.from_dict(config["tune"])
    preprocess = dict(config.get("preprocess") or {})
    for name in ("input", "output", "overwrite", "previous"):
        if name in preprocess:
            raise ValueError(f"`preprocess: {name}` is set by the pipeline.")
    known = {f.name for f in dataclasses.fields(PreprocessConfig)}
    _check_names("preprocess", preprocess, tuple(sorted(known)))
    PreprocessConfig(input="", output="", **preprocess)
    train_config(config, "", {})


def _check_names(section: str, values: dict | None, known: tuple) -> None:
    unknown = sorted(set(values or {}) - set(known))
    if unknown:
        raise ValueError(
            f"Unknown `{section}:` settings: {', '.join(unknown)} "
            f"(known: {', '.join(known)})."
        )


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def input_fingerprint(pattern: str) -> list:
    """What identifies the input files: their paths, sizes and mtimes."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise FileNotFoundError(f"No input files match {pattern!r}.")
    return [(f, os.path.getsize(f), int(os.path.getmtime(f))) for f in files]


def _stamp(workdir: str, step: str) -> str:
    return os.path.join(workdir, STAMP_DIR, f"{step}.json")


def _stamped(workdir: str, step: str, key: str) -> bool:
    try:
        with open(_stamp(workdir, step)) as f:
            return json.load(f).get("key") == key
    except (OSError, ValueError):
        return False


def _write_stamp(workdir: str, step: str, key: str, **extra) -> None:
    from genni.pipeline.training import rundir

    os.makedirs(os.path.dirname(_stamp(workdir, step)), exist_ok=True)
    rundir.write_json(_stamp(workdir, step), {"key": key, **extra})


def step_preprocess(config: dict, log, previous: str | None = None) -> str:
    """`workdir/data/<key>` for the input files and settings, written unless
    it exists; `previous`: an earlier dataset whose ids it keeps (the data of
    the run a warm start begins from)."""
    from genni.pipeline.cli.data import format_stats
    from genni.pipeline.preprocess import beam, windows
    from genni.pipeline.preprocess.config import PreprocessConfig

    settings = dict(config.get("preprocess") or {})
    key = _digest([settings, input_fingerprint(config["input"])])
    data = os.path.join(config["workdir"], "data", key)
    if os.path.exists(os.path.join(data, schema.STATS_FILE)):
        log(f"preprocess: up to date ({data})")
        return data
    log(f"preprocess: {config['input']} -> {data}")
    if previous:
        log(f"preprocess: keeping the ids of {previous}")
    preprocess_config = PreprocessConfig(
        input=config["input"],
        output=data,
        overwrite=True,
        previous=previous,
        **settings,
    )
    stats = windows.preprocess(
        preprocess_config, lambda c: beam.preprocess(c, []), log=log
    )
    log(format_stats(stats))
    return data


def step_tune(config: dict, data: str, log) -> dict:
    """The best configuration of the search ({} without a `tune:` section)."""
    settings = config.get("tune")
    if settings is None:
        return {}
    from genni.pipeline.training import tune
    from genni.pipeline.training.keys import data_fingerprint

    key = _digest([settings, data_fingerprint(data)])
    output = os.path.join(config["workdir"], "tune", key)
    best_path = os.path.join(output, tune.BEST_CONFIG_FILE)
    if os.path.exists(best_path) and _stamped(config["workdir"], "tune", key):
        log(f"tune: up to date ({output})")
    else:
        log(f"tune: searching in {output}")
        tune.tune(data, output, **settings)
        _write_stamp(config["workdir"], "tune", key)
    if not os.path.exists(best_path):
        raise RuntimeError(f"The search in {output} found no configuration.")
    with open(best_path) as f:
        return json.load(f)


def train_config(config: dict, data: str, tuned: dict, warm_start: str | None = None):
    """The run the train step trains (output unset): the `train:` section
    (its `preset:` as in `genni train`, by default the recommended one), then
    the tuned settings; `warm_start`: the run `warm_start: served` resolved to
    (None: from scratch)."""
    from genni.pipeline.training import config as configs
    from genni.pipeline.training.config import TrainConfig

    section = dict(config.get("train") or {})
    if section.pop("warm_start", None) not in (None, SERVED):
        raise ValueError(
            f"`train: warm_start` takes `{SERVED}` (the run behind the version "
            "serving now), or is left out."
        )
    if warm_start:
        section["warm_start"] = warm_start
    settings = configs.settings_with_preset({**section, **tuned})
    for name in ("data", "output"):
        if name in settings:
            raise ValueError(f"`train: {name}` is set by the pipeline.")
    return TrainConfig.from_dict({"data": data, "output": "", **settings})


def step_train(
    config: dict, data: str, tuned: dict, log, warm_start: str | None = None
) -> str:
    """The train step's run; from `warm_start`'s weights when they fit its
    model, else from scratch, saying why (the loop's `train:` section or
    `genni train`'s default changed what the weights are)."""
    from genni.models.config import weight_differences
    from genni.pipeline.training import model

    run = train_config(config, data, tuned, warm_start)
    differ = []
    if warm_start:
        differ = weight_differences(model.read_config(warm_start).model, run.model)
    if differ:
        log(
            f"train: not warm-starting from {warm_start}: its model differs "
            f"({', '.join(differ)}), so this run trains from scratch"
        )
        run = run.replace(warm_start=None)
    return _train_run(config, run, log)


def step_refit(config: dict, data: str, run_dir: str, log) -> str:
    """The refit of `run_dir` (`export: {refit: true}`): the same input with
    every event learned (`--test-days 0`, ids kept after `data`'s), `run_dir`'s
    settings and warm start, its best epoch count, no validation."""
    from genni.pipeline.training import model, rundir
    from genni.pipeline.training.config import TrainConfig

    section = dict(config.get("preprocess") or {})
    section.update(test_days=0, valid_days=None, min_cases=0)
    refit_data = step_preprocess({**config, "preprocess": section}, log, data)
    judged = model.read_config(run_dir)
    best = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE))["best_epoch"]
    probe = TrainConfig.from_dict(
        {
            **judged.to_dict(),
            "data": refit_data,
            "output": "",
            "epochs": best,
            "validation": False,
        }
    )
    log(f"refit: {best} epochs of {run_dir}'s settings on every event")
    return _train_run(config, probe, log)


def _train_run(config: dict, probe, log) -> str:
    """The run of `probe` (output unset) in `workdir/runs`: found finished,
    resumed, or trained."""
    from genni.pipeline.training import keys, rundir, train
    from genni.pipeline.training.config import TrainConfig

    data, warm_start = probe.data, probe.warm_start
    runs_dir = os.path.join(config["workdir"], "runs")
    key = keys.run_key(probe, keys.data_fingerprint(data))
    found = keys.existing_runs(runs_dir).get(key)
    if found is not None:
        run_dir, _ = found
        if os.path.exists(os.path.join(run_dir, rundir.METRICS_FILE)):
            log(f"train: up to date ({run_dir})")
            return run_dir
    else:
        run_dir = os.path.join(
            runs_dir, keys.run_name(probe.to_dict(), probe.seed, key)
        )
    resume = rundir.started(run_dir)
    start = f", warm-started from {warm_start}" if warm_start else ""
    log(f"train: {'resuming' if resume else 'training'} {run_dir}{start}")
    run = TrainConfig.from_dict({**probe.to_dict(), "output": run_dir})
    train.train(run, resume=resume, verbose=0)
    return run_dir


def step_evaluate(run_dir: str, log) -> dict:
    from genni.pipeline.cli.training import format_table
    from genni.pipeline.training import rundir

    metrics = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE))
    log(f"evaluate: test metrics of the best epoch ({metrics['best_epoch']}) (%):")
    test = metrics[schema.TEST]
    order = [f"{m}@{k}" for k in (5, 10, 20) for m in ("HR", "NDCG")] + ["MRR"]
    log(format_table({n: test[n] for n in order if n in test}))
    return test


def step_export(
    config: dict, data: str, run_dir: str, log, refit: str | None = None
) -> dict:
    from genni.pipeline.serving import guard

    settings = ExportConfig.from_dict(config.get("export") or {})
    base = os.path.join(config["workdir"], "models")
    served = guard.served_version(base)
    if served is not None:
        for decision in reversed(_decisions(base)):
            judged = decision.get("judged_run") or decision.get("run") or ""
            same_run = os.path.abspath(judged) == os.path.abspath(run_dir)
            if not same_run or not _same_export(decision, settings):
                continue  # Another run, or other export settings: judge again.
            if decision.get("version") == served:
                log(f"export: up to date (version {served} judged by {run_dir})")
                return decision
            if decision["decision"] == "refused" and (
                decision.get("served_version") == served
            ):
                log(f"export: refused before against version {served}; skipped")
                return decision
    decision = guard.guarded_export(
        run_dir,
        base,
        against=base,
        max_regression=settings.max_regression,
        split=settings.split,
        k=settings.k,
        data_dir=data,
        candidates=settings.candidates,
        baseline=settings.baseline,
        refit=refit,
        log=log,
    )
    log(f"export: {decision['decision']} ({decision['why']})")
    return decision


def _same_export(decision: dict, settings: ExportConfig) -> bool:
    """Whether `decision` was taken with these export settings (a decision
    written before they were recorded: with the defaults of its time)."""
    defaults = ExportConfig.defaults()
    return all(
        decision.get(name, defaults[name]) == value
        for name, value in settings.to_dict().items()
    )


def _decisions(base: str) -> list[dict]:
    from genni.pipeline.serving import guard

    path = os.path.join(base, guard.DECISIONS_FILE)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def served_run(config: dict, judged: bool = False) -> str | None:
    """The run behind the version serving now from `workdir/models` (None:
    none serves, the popularity ranking does, or its run is gone);
    `judged`: the run it was judged by (itself, or the run a refit refits)."""
    from genni.pipeline.serving import guard
    from genni.pipeline.training import rundir

    base = os.path.join(config["workdir"], "models")
    served = guard.served_version(base)
    for decision in reversed(_decisions(base)):
        if decision.get("version") == served and decision["decision"] == "published":
            run_dir = decision.get("run")
            if judged:
                run_dir = decision.get("judged_run") or run_dir
            return run_dir if run_dir and rundir.started(run_dir) else None
    return None


def run(config: dict, log=print) -> dict:
    """All steps in order; returns what each produced.

    With `train: {warm_start: served}` the nightly loop: the run behind the
    version serving now (none: train from scratch) gives its dataset's ids to
    the new preprocessing (`--previous`) and its weights to the new run
    (`--warm-start`); the guard then judges the new version against it.
    """
    from genni.pipeline.training import model, rundir

    start = None
    if (config.get("train") or {}).get("warm_start") == SERVED:
        start = served_run(config)
    previous = model.read_config(start).data if start else None
    data = step_preprocess(config, log, previous)
    tuned = step_tune(config, data, log)
    if start:
        judged = model.read_config(served_run(config, judged=True) or start)
        if os.path.abspath(judged.data) == os.path.abspath(data):
            # The served run is this dataset's own: the same run, not a new one.
            start = judged.warm_start
    run_dir = step_train(config, data, tuned, log, start)
    test = step_evaluate(run_dir, log)
    refit = None
    signal = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE)).get(
        "validation_signal", True
    )
    if ExportConfig.from_dict(config.get("export") or {}).refit and signal:
        refit = step_refit(config, data, run_dir, log)
    decision = step_export(config, data, run_dir, log, refit)
    return {
        "data": data,
        "run": run_dir,
        "refit": refit,
        "test": test,
        "export": decision,
    }


def _pipeline(args: argparse.Namespace, extra: list[str]) -> int:
    result = run(load_config(args.config))
    return 0 if result["export"]["decision"] == "published" else 3


def add_pipeline(commands) -> None:
    p = commands.add_parser(
        "pipeline",
        help="Preprocess, (tune,) train, evaluate and the guarded export, in order.",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", required=True, help="The pipeline file (YAML/JSON).")
    p.set_defaults(handler=_pipeline)
