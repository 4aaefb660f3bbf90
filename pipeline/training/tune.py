"""`genni tune`: hyperparameter search with keras-tuner.

keras-tuner builds Keras 3 models in its default path and rejects tf-keras ones
(keras-tuner issue 1039), so `GenNiTuner` overrides `run_trial`: it turns the
trial's hyperparameters into a `TrainConfig`, trains with the same builder and
loop as `genni train` (early stopping included), and returns the best validation
NDCG@10 from the project's full-ranking metric. The oracle (random, Bayesian or
Hyperband) and its state are keras-tuner's own: re-running the same command
continues the search, and keras-tuner's chief/worker mode distributes it
(KERASTUNER_TUNER_ID, KERASTUNER_ORACLE_IP, KERASTUNER_ORACLE_PORT).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import keras_tuner as kt

from genni.components import settings
from genni.components.samplers import registry
from genni.pipeline.training import config as configs
from genni.pipeline.training import rundir, train
from genni.pipeline.training.config import ORACLES, TrainConfig, TuneConfig

OBJECTIVE = "NDCG@10"
PROJECT = "search"
BEST_CONFIG_FILE = "best_config.json"
RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
TRIALS_DIR = "trials"

# The default search space: name -> spec. "choice" takes "values"; "int" and
# "float" take "min" and "max" (and "log" for a log-uniform float); a plain
# value fixes the setting.
DEFAULT_SPACE: dict[str, object] = {
    "sampler": {"type": "choice", "values": ["genni", "uniform", "popularity"]},
    "alpha": {"type": "float", "min": 0.0, "max": 6.0},
    "beta": {"type": "float", "min": 1e-3, "max": 1.0, "log": True},
    "num_negatives": {"type": "choice", "values": [1, 4, 16, 64]},
    "self_adjust_alpha": {"type": "choice", "values": [False, True]},
    "learning_rate": {"type": "float", "min": 1e-4, "max": 1e-2, "log": True},
    "hidden_size": {"type": "choice", "values": [32, 64, 128]},
    "num_layers": {"type": "int", "min": 1, "max": 3},
    "num_heads": {"type": "choice", "values": [1, 2, 4]},
    "dropout": {"type": "float", "min": 0.1, "max": 0.7},
}
# Hyperparameters of the samplers whose negatives the model generates
# (the registry's `model_generated`), tuned only when such a sampler is.
GENNI_ONLY = ("alpha", "beta", "self_adjust_alpha")
GENERATED = list(registry.model_generated())
TRAIN_FIELDS = set(TrainConfig.keys())
# Trials start from what `genni train` trains without flags (its default preset).
DEFAULT_SETTINGS = configs.preset(configs.DEFAULT_PRESET)
DEFAULTS = TrainConfig.of(data="", output="", **DEFAULT_SETTINGS)
SPACE_NAMES = set(DEFAULT_SPACE)


class SpaceError(ValueError):
    """A search-space file that cannot be used."""


def load_space(path: str | None) -> dict[str, object]:
    """The default space, with the entries of a JSON/YAML file replacing its own."""
    space = dict(DEFAULT_SPACE)
    if path is None:
        return space
    try:
        loaded = settings.read_file(path, "--space")
    except ValueError as e:
        raise SpaceError(str(e)) from None
    unknown = sorted(set(loaded) - SPACE_NAMES)
    if unknown:
        raise SpaceError(
            f"--space {path!r}: unknown settings {unknown}; "
            f"known: {sorted(SPACE_NAMES)}."
        )
    space.update({name: _check_spec(name, spec) for name, spec in loaded.items()})
    return space


# The keys each kind of spec takes.
SPEC_KEYS = {
    "choice": ("type", "values"),
    "int": ("type", "min", "max"),
    "float": ("type", "min", "max", "log"),
}


def _check_spec(name: str, spec: object) -> object:
    """`spec` with its values read by the setting's declared type (as
    `genni train --config` reads them): a fixed value, or a dict of
    `SPEC_KEYS`; SpaceError on anything else."""
    kind_of = {f.key: f.type for f in TrainConfig.fields()}[name]

    def typed(value: object, as_type: object = kind_of) -> object:
        try:
            return settings.coerce(name, as_type, value)
        except ValueError as e:
            raise SpaceError(str(e)) from None

    if not isinstance(spec, dict):
        return typed(spec)  # A fixed value.
    kind = spec.get("type")
    if kind not in SPEC_KEYS:
        raise SpaceError(f"`{name}`: type must be choice, int or float; got {kind!r}.")
    unknown = sorted(set(spec) - set(SPEC_KEYS[kind]))
    if unknown:
        raise SpaceError(
            f"`{name}`: unknown keys {', '.join(map(str, unknown))} for a {kind} "
            f"(known: {', '.join(SPEC_KEYS[kind])})."
        )
    if kind == "choice":
        values = spec.get("values")
        if not isinstance(values, list) or not values:
            raise SpaceError(f"`{name}`: a choice needs a non-empty list `values`.")
        return {"type": kind, "values": [typed(v) for v in values]}
    if "min" not in spec or "max" not in spec:
        raise SpaceError(f"`{name}`: {kind} needs numbers `min` and `max`.")
    number = int if kind == "int" else float
    low, high = typed(spec["min"], number), typed(spec["max"], number)
    if low > high:
        raise SpaceError(f"`{name}`: min {low} is above max {high}.")
    out = {"type": kind, "min": low, "max": high}
    if kind == "float":
        out["log"] = typed(spec.get("log", False), bool)
        if out["log"] and low <= 0:
            raise SpaceError(f"`{name}`: a log scale needs min > 0.")
    return out


def _default(name: str, spec: dict) -> object:
    """`genni train`'s default setting (`DEFAULTS`) when the spec allows it.

    Trial 0 of a search then trains the defaults, so the search's best is never
    worse on validation than `genni train` without flags.
    """
    value = {"self_adjust_alpha": False}.get(name, DEFAULTS.to_dict().get(name))
    if spec["type"] == "choice":
        return value if value in spec["values"] else None
    if (
        value is None
        or isinstance(value, bool)
        or not spec["min"] <= value <= spec["max"]
    ):
        return None
    return value


def _value(hp: kt.HyperParameters, name: str, spec: object) -> object:
    if not isinstance(spec, dict):
        return hp.Fixed(name, spec)
    default = _default(name, spec)
    if spec["type"] == "choice":
        return hp.Choice(name, spec["values"], default=default)
    if spec["type"] == "int":
        return hp.Int(name, int(spec["min"]), int(spec["max"]), default=default)
    return hp.Float(
        name,
        float(spec["min"]),
        float(spec["max"]),
        sampling="log" if spec.get("log") else "linear",
        default=default,
    )


def declare_space(space: dict[str, object]) -> kt.HyperParameters:
    """Every hyperparameter of `space`, registered before the first trial.

    The oracle then knows the whole space from the start: with an empty space
    a second distributed worker would get no new trial to run.
    """
    hp = kt.HyperParameters()
    for name, spec in space.items():
        if name not in GENNI_ONLY:
            _value(hp, name, spec)
    with hp.conditional_scope("sampler", GENERATED):
        for name in GENNI_ONLY:
            _value(hp, name, space[name])
    return hp


def config_from_hp(
    hp: kt.HyperParameters, space: dict[str, object], base: TrainConfig
) -> TrainConfig:
    """The one place a trial's hyperparameters become a `TrainConfig`."""
    values = {
        name: _value(hp, name, spec)
        for name, spec in space.items()
        if name not in GENNI_ONLY
    }
    if values["sampler"] in GENERATED:
        with hp.conditional_scope("sampler", GENERATED):
            for name in GENNI_ONLY:
                values[name] = _value(hp, name, space[name])
    heads = values["num_heads"]
    hidden = values["hidden_size"]
    if hidden % heads:
        values["num_heads"] = math.gcd(hidden, heads)  # Keep the pair valid.
    settings = {k: v for k, v in values.items() if k in TRAIN_FIELDS}
    if values.get("self_adjust_alpha"):
        settings["alpha_step"] = configs.DEFAULT_ALPHA_STEP
    settings["attention_dropout"] = settings["dropout"]
    return base.replace(**settings)


class GenNiTuner(kt.Tuner):
    """A keras-tuner Tuner whose trials are `genni train` runs.

    Args:
        oracle: any keras-tuner oracle with objective max "NDCG@10".
        space: the search space (see `DEFAULT_SPACE`).
        base: settings every trial starts from (data, epochs, patience, seed).
    """

    def __init__(self, oracle: kt.Oracle, space: dict, base: TrainConfig, **kwargs):
        super().__init__(oracle=oracle, hypermodel=None, **kwargs)
        self.space = space
        self.base = base

    def run_trial(self, trial: kt.engine.trial.Trial, *args, **kwargs) -> dict:
        hp = trial.hyperparameters
        config = config_from_hp(hp, self.space, self.base)
        if "tuner/epochs" in hp.values:  # Hyperband's budget for this round.
            config = dataclasses.replace(config, epochs=int(hp.values["tuner/epochs"]))
        output = os.path.join(self.project_dir, TRIALS_DIR, trial.trial_id)
        config = dataclasses.replace(config, output=output)
        resume = rundir.started(output)
        start = time.perf_counter()
        result = train.train(config, resume=resume, verbose=0)
        metrics = {
            OBJECTIVE: max(
                r["valid"][OBJECTIVE] for r in result["history"] if "valid" in r
            ),
            "epochs": result["epochs_run"],
            "seconds": time.perf_counter() - start,
        }
        print(
            f"Trial {trial.trial_id} on {self.tuner_id}: valid {OBJECTIVE} "
            f"{metrics[OBJECTIVE]:.2f} after {metrics['epochs']} epochs",
            flush=True,
        )
        with open(os.path.join(output, "trial_metrics.json"), "w") as f:
            record = {"tuner_id": self.tuner_id, "config": config.to_dict()}
            json.dump(metrics | record, f, indent=2)
        return metrics

    def save_model(self, trial_id, model, step=0):  # The run dir holds it.
        pass

    def load_model(self, trial):
        return train.load_run(
            os.path.join(self.project_dir, TRIALS_DIR, trial.trial_id)
        )


class DefaultsFirstRandomSearch(kt.oracles.RandomSearchOracle):
    """Random search whose first trial is the default settings (`genni train`'s).

    The search's best is then never worse on validation than plain `genni
    train`; later trials are random as usual.
    """

    def populate_space(self, trial_id: str) -> dict:
        if not self._tried_so_far:
            values = self.hyperparameters.copy().values
            self._tried_so_far.add(self._compute_values_hash(values))
            return {"status": kt.engine.trial.TrialStatus.RUNNING, "values": values}
        return super().populate_space(trial_id)


def make_oracle(
    name: str, max_trials: int, epochs: int, seed: int, space: dict[str, object]
) -> kt.Oracle:
    objective = kt.Objective(OBJECTIVE, direction="max")
    common = dict(seed=seed, hyperparameters=declare_space(space))
    if name == "random":
        return DefaultsFirstRandomSearch(objective, max_trials=max_trials, **common)
    if name == "bayesian":
        return kt.oracles.BayesianOptimizationOracle(
            objective, max_trials=max_trials, **common
        )
    if name == "hyperband":
        return kt.oracles.HyperbandOracle(objective, max_epochs=epochs, **common)
    raise ValueError(f"`oracle` must be one of {ORACLES}. Got {name!r}.")


def trial_base(data: str, search: TuneConfig | None = None) -> TrainConfig:
    """What every trial starts from: `genni train`'s defaults on `data` (its
    preset's item tower rule included) within the search's budget: a fixed
    patience over its few epochs."""
    search = search or TuneConfig.of()
    return TrainConfig.of(
        **{
            **configs.settings_with_preset({}, data=data),
            "patience": search.patience,
            "patience_growth": 0.0,
        },
        data=data,
        output="",
        epochs=search.epochs_per_trial,
        seed=search.seed,
        pack=search.pack,
        candidates=search.candidates,
    )


def tune(data: str, output: str, **settings) -> dict:
    """Run (or continue) a search; writes the table and the best config.

    `settings`: those of `TuneConfig` (its defaults for the others), checked
    before anything is written. `pack`: trials train on packed batches (`genni
    train --pack`: the same model and loss, faster on short sequences).
    `candidates`: the ranking rule of every trial's validation (`genni train
    --candidates`). `space`: a JSON/YAML file replacing space entries.
    """
    search = TuneConfig.of(**settings)
    space = load_space(search.space)
    base = trial_base(data, search)
    tuner = GenNiTuner(
        make_oracle(
            search.oracle,
            search.max_trials,
            search.epochs_per_trial,
            search.seed,
            space,
        ),
        space,
        base,
        directory=output,
        project_name=PROJECT,
        overwrite=False,  # Re-running continues the same search.
    )
    tuner.search()
    if is_worker():
        return {"objective": OBJECTIVE, "trials": [], "worker": True}
    return write_results(tuner, output)


def is_worker() -> bool:
    """A worker of keras-tuner's distributed mode (the chief holds the oracle)."""
    return "KERASTUNER_ORACLE_IP" in os.environ and "chief" not in os.environ.get(
        "KERASTUNER_TUNER_ID", ""
    )


def write_results(tuner: GenNiTuner, output: str) -> dict:
    trials = [
        t
        for t in tuner.oracle.trials.values()
        if t.status == "COMPLETED" and t.score is not None
    ]
    trials.sort(key=lambda t: t.score, reverse=True)
    rows = []
    for t in trials:
        metrics_path = os.path.join(
            tuner.project_dir, TRIALS_DIR, t.trial_id, "trial_metrics.json"
        )
        details = {}
        if os.path.exists(metrics_path):
            with open(metrics_path) as f:
                details = json.load(f)
        rows.append(
            {
                "trial": t.trial_id,
                OBJECTIVE: t.score,
                "epochs": details.get("epochs"),
                "seconds": details.get("seconds"),
                "hyperparameters": {
                    k: v
                    for k, v in t.hyperparameters.values.items()
                    if not k.startswith("tuner/")
                },
                "config": details.get("config"),
            }
        )
    result = {"objective": OBJECTIVE, "trials": rows}
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, RESULTS_FILE), "w") as f:
        json.dump(result, f, indent=2)
    if rows and rows[0]["config"]:
        best = dict(rows[0]["config"])
        # The trial budget (epochs, patience) and batch layout are the
        # search's, not settings found.
        for key in ("data", "output", "epochs", "pack", *configs.STOPPING_SETTINGS):
            best.pop(key, None)
        with open(os.path.join(output, BEST_CONFIG_FILE), "w") as f:
            json.dump(best, f, indent=2, sort_keys=True)
    names = sorted({k for r in rows for k in r["hyperparameters"]})
    lines = [
        f"| rank | trial | valid {OBJECTIVE} | epochs | seconds | "
        + " | ".join(names)
        + " |",
        "|---" * (len(names) + 5) + "|",
    ]
    for rank, r in enumerate(rows, start=1):
        cells = [_cell(r["hyperparameters"].get(n)) for n in names]
        lines.append(
            f"| {rank} | {r['trial']} | {r[OBJECTIVE]:.2f} | {r['epochs']} | "
            f"{(r['seconds'] or 0):.0f} | " + " | ".join(cells) + " |"
        )
    with open(os.path.join(output, TABLE_FILE), "w") as f:
        f.write("\n".join(lines) + "\n")
    return result


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
