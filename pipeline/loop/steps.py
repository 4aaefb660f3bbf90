"""The pipeline's steps, each skipped when its output for the same inputs and
settings already exists (the stamps); `genni.pipeline.loop.pipeline` runs
them in order.

The steps are the plain commands' functions, not a scheduler: a step is
skipped when
- preprocess: `workdir/data/<key>` was written from the same input files
  and items file (`preprocess: {item_attributes: ...}`; paths, sizes,
  modification times) with the same settings;
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

import glob
import hashlib
import json
import os
from collections.abc import Sequence

from genni.components import schema
from genni.pipeline.loop.config import ExportConfig, train_config

STAMP_DIR = ".pipeline"


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
    from genni.pipeline.preprocess import beam, windows
    from genni.pipeline.preprocess.config import PreprocessConfig
    from genni.pipeline.preprocess.summary import format_stats

    settings = dict(config.get("preprocess") or {})
    inputs = [input_fingerprint(config["input"])]
    if settings.get("item_attributes"):  # A changed items file: a new dataset.
        inputs.append(input_fingerprint(settings["item_attributes"]))
    key = _digest([settings, *inputs])
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


def step_train(
    config: dict,
    data: str,
    tuned: dict,
    log,
    warm_start: str | None = None,
    runs_from: Sequence[str] = (),
) -> str:
    """The train step's run; from `warm_start`'s weights when they fit its
    model, else from scratch, saying why (the loop's `train:` section or
    `genni train`'s default changed what the weights are). `runs_from`:
    other work directories whose finished runs are reused (`_train_run`)."""
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
    return _train_run(config, run, log, runs_from)


def step_refit(
    config: dict, data: str, run_dir: str, log, runs_from: Sequence[str] = ()
) -> str:
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
    return _train_run(config, probe, log, runs_from)


def _train_run(config: dict, probe, log, runs_from: Sequence[str] = ()) -> str:
    """The run of `probe` (output unset) in `workdir/runs`: found finished,
    resumed, or trained; or the same run finished in the runs of a work
    directory of `runs_from` on the same dataset (ids included), linked into
    `workdir/runs`, not trained again."""
    from genni.pipeline.training import keys, rundir, train
    from genni.pipeline.training.config import TrainConfig

    data, warm_start = probe.data, probe.warm_start
    runs_dir = os.path.join(config["workdir"], "runs")
    key = keys.run_key(probe, keys.data_fingerprint(data))
    found = keys.existing_runs(runs_dir).get(key)
    if found is None:
        found = _reuse(key, data, runs_dir, runs_from, log)
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


def _reuse(key: str, data: str, runs_dir: str, runs_from: Sequence[str], log):
    """(link, config) of a finished run with `key` in another work
    directory's runs whose dataset has `data`'s ids, linked into `runs_dir`
    under its own name; None when there is none. A run key is its settings
    and its dataset's statistics: two loops' datasets of the same log can
    number their items apart (one keeps an earlier dataset's ids), so the ids
    are compared too."""
    from genni.pipeline.preprocess import outputs
    from genni.pipeline.training import keys, rundir

    for workdir in runs_from:
        other = os.path.join(workdir, "runs")
        if os.path.abspath(other) == os.path.abspath(runs_dir):
            continue
        found = keys.existing_runs(other).get(key)
        if found is None:
            continue
        run_dir, run = found
        if not os.path.exists(os.path.join(run_dir, rundir.METRICS_FILE)):
            continue  # Unfinished there: this pipeline trains its own.
        if outputs.read_vocabulary(run.data) != outputs.read_vocabulary(data):
            continue
        os.makedirs(runs_dir, exist_ok=True)
        link = os.path.join(runs_dir, os.path.basename(os.path.normpath(run_dir)))
        os.symlink(os.path.relpath(os.path.realpath(run_dir), runs_dir), link)
        log(f"train: the same run on the same data is finished: {run_dir} (linked)")
        return link, run
    return None


def step_evaluate(run_dir: str, log) -> dict:
    from genni.pipeline.training import rundir
    from genni.pipeline.training.summary import format_table

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
