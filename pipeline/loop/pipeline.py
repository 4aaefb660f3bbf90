"""The pipeline run: from logs to the served model, every step in order.

    from genni.pipeline.loop import run_pipeline

    result = run_pipeline("pipeline.yaml")       # or the mapping itself
    if not result.published:                     # the guard kept what serves
        ...

`genni pipeline --config pipeline.yaml` is this call, printed; a scheduler
(cron, Airflow, Argo) calls it the same way, once a night for the nightly
loop (`train: {warm_start: served}`). The steps and what makes each one up
to date: `genni.pipeline.loop.steps`; the file's sections:
`genni.pipeline.loop.config`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from genni.pipeline.loop import steps
from genni.pipeline.loop.config import SERVED, ExportConfig, checked, load_config


@dataclasses.dataclass(frozen=True)
class PipelineResult:
    """What one pipeline run produced.

    Attributes:
        data: the preprocessed dataset (`workdir/data/<key>`).
        run: the run chosen and judged (`workdir/runs/<name>`).
        refit: its refit on every event (`export: {refit: true}`), or None.
        test: the judged run's test metrics (%).
        export: the guard's decision (`workdir/models/decisions.jsonl`'s
            line): "decision" is "published" or "refused", "why" says why.
    """

    data: str
    run: str
    refit: str | None
    test: dict
    export: dict

    @property
    def published(self) -> bool:
        """Whether this run's version (or its refit) serves now."""
        return self.export["decision"] == "published"


def run_pipeline(
    config: dict | str | os.PathLike,
    log: Callable[[str], None] = print,
    runs_from: Sequence[str] = (),
) -> PipelineResult:
    """Run the pipeline `config` (a YAML/JSON file, or its mapping with
    `input:` and `workdir:`; checked before any step writes), logging each
    step's progress through `log`; returns what the steps produced.
    `runs_from`: work directories of other pipelines: a run (or refit) one of
    them finished with the same settings and seed on the same dataset, ids
    included, is linked into this one's `runs/`, not trained again (`genni
    replay`'s loops share their first step's run).

    With `train: {warm_start: served}` the nightly loop: the run behind the
    version serving now (none: train from scratch) gives its dataset's ids to
    the new preprocessing (`--previous`) and its weights to the new run
    (`--warm-start`); the guard then judges the new version against it.
    """
    from genni.pipeline.training import model, rundir

    if isinstance(config, dict):
        config = checked(config)
    else:
        config = load_config(os.fspath(config))
    start = None
    if (config.get("train") or {}).get("warm_start") == SERVED:
        start = steps.served_run(config)
    previous = model.read_config(start).data if start else None
    data = steps.step_preprocess(config, log, previous)
    tuned = steps.step_tune(config, data, log)
    if start:
        judged = model.read_config(steps.served_run(config, judged=True) or start)
        if os.path.abspath(judged.data) == os.path.abspath(data):
            # The served run is this dataset's own: the same run, not a new one.
            start = judged.warm_start
    run_dir = steps.step_train(config, data, tuned, log, start, runs_from)
    test = steps.step_evaluate(run_dir, log)
    refit = None
    signal = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE)).get(
        "validation_signal", True
    )
    if ExportConfig.from_dict(config.get("export") or {}).refit and signal:
        refit = steps.step_refit(config, data, run_dir, log, runs_from)
    decision = steps.step_export(config, data, run_dir, log, refit)
    return PipelineResult(data, run_dir, refit, test, decision)
