"""The Beam pipeline options of genni's Beam commands, with the runner chosen.

Beam 2.77's DirectRunner (the default with no `--runner`) first tries to
download the Prism runner's binary and run the job there, and falls back to
the FnApiRunner when it cannot: which runner runs a job would depend on the
machine's network. `genni preprocess` and `genni batch-recommend` run on
`DEFAULT_RUNNER`, the FnApiRunner (the one the DirectRunner falls back to, and
the one the tests cover), unless `--runner` is given; its
`--direct_num_workers` and `--direct_running_mode` apply as before.
"""

from __future__ import annotations

DEFAULT_RUNNER = "FnApiRunner"


def pipeline_options(args: list[str] | None):
    """`PipelineOptions(args)`, on DEFAULT_RUNNER when `args` names none."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    options = PipelineOptions(list(args or []))
    standard = options.view_as(StandardOptions)
    if not standard.runner:
        standard.runner = DEFAULT_RUNNER
    return options


def _lost_job_service(error: BaseException) -> str | None:
    """ "DEADLINE_EXCEEDED: ..." when `error` is a gRPC call to a portable
    runner's job service that ended without an answer (its state stream
    dropped under load, or the service gone), else None."""
    code = getattr(error, "code", None)
    if not callable(code) or not type(error).__module__.startswith("grpc"):
        return None
    try:
        name = code().name
        details = error.details() if callable(getattr(error, "details", None)) else ""
    except Exception:  # Not a finished call after all.
        return None
    return f"{name}: {details}" if details else name


def job_failure(error: BaseException, output: str) -> RuntimeError | None:
    """A short error for a Beam job its runner reports failed (a portable
    runner's `Pipeline job-... failed in state FAILED: ...`, with the
    workers' tracebacks, or a job service that stopped answering), or None
    for any other error: the job and the last line of its cause, and that
    nothing was written to `output`."""
    text = str(error)
    lost = _lost_job_service(error)
    if lost is not None:  # The runner stopped answering: not one clear line.
        return RuntimeError(
            f"The Beam job service stopped answering ({lost}): the job did not "
            f"finish. Nothing was written to {output}. A worker may have died or "
            "the machine is overloaded: run the command again; the runner's and "
            "workers' logs have the rest."
        )
    if not isinstance(error, RuntimeError) or "failed in state" not in text:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "ModuleNotFoundError" in text:
        hint = (
            "The workers lack a module: stage genni to them with --setup_file "
            "./setup.py (docs/data.md#other-beam-runners)."
        )
    elif "Channel closed" in text or "Socket closed" in text:
        hint = (
            "A worker died (killed, out of memory): run the command again; the "
            "runner's and workers' logs have the rest."
        )
    else:
        hint = "The runner's and workers' logs have the rest."
    return RuntimeError(
        f"{lines[0]} ... {lines[-1]} Nothing was written to {output}. {hint}"
    )
