"""The loop: the pipeline from logs to the served model, and its replay.

Two calls, each what a command runs, for a scheduler of one's own (cron,
Airflow, Argo) to make:

    from genni.pipeline.loop import run_pipeline, run_replay

    result = run_pipeline("pipeline.yaml")     # `genni pipeline --config ...`
    rows = run_replay("log.inter", 30, 3, {"preprocess": {...}}, "replay/")
                                               # `genni replay ...`

- `config`: the pipeline file's sections, checked (TFX's `configs.py`);
- `steps`: each step and what makes it up to date (the stamps);
- `pipeline`: `run_pipeline`, the steps in order (TFX's `pipeline.py`);
- `cases`, `scoring`, `replay`, `report`: the replay: the log cut at each
  step, the next period's cases, the served version and the popularity
  ranking scored on them, and `replay.md`/`.json`/`.png`.

The `genni` command (`genni.pipeline.cli.loop`) only parses, prints and
chooses exit codes.
"""

from genni.pipeline.loop.config import load_config
from genni.pipeline.loop.pipeline import PipelineResult, run_pipeline
from genni.pipeline.loop.replay import run_replay

__all__ = ["PipelineResult", "load_config", "run_pipeline", "run_replay"]
