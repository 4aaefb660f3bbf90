"""Quiet by default: a command prints its own progress and results only.

TensorFlow's C++ runtime writes start-up lines straight to the process's stderr
while it is imported (oneDNN, CUDA stubs, "All log messages before
absl::InitializeLog()"), before any logging switch applies; Beam logs "apitools
not found" through the root logger. `start_quietly` imports TensorFlow with
stderr (file descriptor 2) sent to a temporary file, then replays whatever in
it is not known start-up noise, so a real error still shows. With `-v` nothing
is hidden.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading

# Lines the TensorFlow runtime prints on every start on a machine like ours.
NOISE = re.compile(
    r"All log messages before absl::InitializeLog|"
    r"oneDNN custom operations are on|"
    r"cudart_stub\.cc|cuda_(platform|dnn|fft|blas)\.cc|cuInit|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|"
    r"computation placer already registered|"
    r"TensorFlow binary is optimized to use available CPU instructions|"
    r"To enable the following instructions|"
    r"rebuild TensorFlow with the appropriate compiler flags|"
    # Logged as an error at the first int64 op on a CPU without AVX-512 (and
    # on some with it): a note that Eigen's kernel runs instead of oneDNN's.
    r"oneDNN supports DT_INT64 only on platforms with AVX-512"
)
# The C++ runtime's INFO and WARNING lines (absl's "I0000 12:00:00.000000 ...
# file.cc:12] ..."), shown with -v only, whatever TF_CPP_MIN_LOG_LEVEL says.
NATIVE_NOTE = re.compile(r"^[IW]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w./-]+:\d+\] ")


@contextlib.contextmanager
def native_stderr_filtered():
    """Send fd 2 to a temporary file inside the block; replay non-noise lines."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # No real stderr (embedded): nothing to do.
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines():
                if not is_noise(line):
                    print(line, file=sys.stderr)


# What Beam's worker processes (DirectRunner multi_processing, or a portable
# runner's LOOPBACK workers) print on their inherited stderr at start-up and
# stop, before their log level applies: INFO lines and known warnings.
WORKER_NOISE = re.compile(
    r"^(INFO|DEBUG):|"
    r"apitools not found|"
    r"No semi_persistent_directory found|"
    r"Discarding unparseable args|"
    r"Resource module is not available|"
    r"^WARNING: All log messages before absl"
)


def is_noise(line: str) -> bool:
    """Whether a line of the runtime's or a Beam worker's stderr is known
    noise: start-up lines, C++ INFO and WARNING lines, benign C++ errors."""
    return not line.strip() or bool(
        NOISE.search(line) or WORKER_NOISE.search(line) or NATIVE_NOTE.match(line)
    )


@contextlib.contextmanager
def worker_stderr_filtered():
    """Inside the block, what is written to fd 2 below Python (TensorFlow's
    C++ runtime, Beam's worker processes) goes through a pipe whose lines are
    passed on as they come, except known noise (`is_noise`): real errors
    still show at once. Python's own `sys.stderr` (progress bars, messages)
    keeps writing to the terminal directly, unbuffered by the filter."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    read_end, write_end = os.pipe()
    try:  # Python's stderr straight to the terminal, when it writes to fd 2.
        direct = sys.stderr.fileno() == 2
    except (OSError, ValueError, AttributeError):  # Captured (tests).
        direct = False
    python_stderr = sys.stderr
    if direct:
        sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8")

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe, os.fdopen(saved, "wb", 0) as out:
            for raw in pipe:
                if not is_noise(raw.decode("utf-8", "replace")):
                    out.write(raw)

    thread = threading.Thread(target=forward, daemon=True, name="stderr-filter")
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        if direct:
            sys.stderr.close()
            sys.stderr = python_stderr
        sys.stderr.flush()
        os.dup2(saved, 2)  # The pipe's last writer closes; the thread ends.
        thread.join(timeout=10)


_BEAMS = f"{os.sep}apache_beam{os.sep}"  # In the path of Beam's every module.


def _not_beams(record: logging.LogRecord) -> bool:
    """Drops what Beam's code logs, whatever its logger (a portable job's
    messages are re-logged on the root logger, with the workers' tracebacks):
    a failed job reaches the command as an exception with one clear message
    (`beam_options.job_failure`). With -v it all shows."""
    return _BEAMS not in record.pathname


def _in_beams_code(trace) -> bool:
    """Whether a traceback passes through Beam's code."""
    while trace is not None:
        if _BEAMS in trace.tb_frame.f_code.co_filename:
            return True
        trace = trace.tb_next
    return False


def _quiet_beam_threads(hook):
    """A `threading.excepthook` that drops what a thread of Beam's raises and
    hands any other thread's exception to `hook` (the one in place).

    A portable job whose job service stops answering ends two of Beam's
    threads at once: the one watching the job's state raises in the command
    (`beam_options.job_failure` makes that one clear line), and the one
    reading the job's messages dies with the same gRPC error, which Python
    prints as a traceback beside that line."""

    def excepthook(args) -> None:
        if not _in_beams_code(args.exc_traceback):
            hook(args)

    excepthook.quiets_beam = True  # Installed once, however often configured.
    return excepthook


def configure(verbose: bool) -> None:
    """Logging for a `genni` process: ours at INFO with -v, else WARNING;
    libraries' (TensorFlow, absl, Beam) only errors unless -v, and no
    traceback from a thread of Beam's (`_quiet_beam_threads`)."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if verbose:
        return
    # TF_CPP_MIN_LOG_LEVEL=3 also hides the C++ runtime's own ERROR lines after
    # start-up (a failed cuInit on a machine without GPU, oneDNN's int64
    # fallback); failures that matter reach Python as exceptions.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.getLogger().setLevel(logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_beams)
    logging.getLogger("genni").setLevel(logging.WARNING)
    if not getattr(threading.excepthook, "quiets_beam", False):
        threading.excepthook = _quiet_beam_threads(threading.excepthook)
    for name in ("apache_beam", "tensorflow", "absl", "keras_tuner", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)


def start_quietly() -> None:
    """Import TensorFlow (and Beam) with their start-up lines filtered out."""
    with native_stderr_filtered():
        import apache_beam  # noqa: F401  (its import-time warnings, here)
        import tensorflow as tf

        tf.get_logger().setLevel(logging.ERROR)
        # The first device query is where a CPU-only machine reports cuInit.
        tf.config.list_physical_devices()
