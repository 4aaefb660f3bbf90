"""Atomic outputs on the local file system: write beside, then rename into place.

A file or a directory is written under a sibling name and renamed to its final
name only once it is complete (one rename on one file system), so a reader
never finds it half-written, and a writer that fails removes what it staged
and leaves the final name as it was. One implementation for datasets
(`outputs.commit`, which adds Beam's remote file systems), run files
(`genni.pipeline.training.rundir.write_json`) and model versions
(`genni.pipeline.serving.export`). Standard library only: the trainer and the
server import it without importing Beam.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator


def remove(path: str) -> None:
    """Remove a file or a directory tree, if there; errors are ignored."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def move_into_place(staging: str, final: str, replace: bool = False) -> None:
    """Rename the finished `staging` to `final`, creating `final`'s parent.

    A file at `final` is replaced atomically. A directory at `final` is
    removed first when `replace` (the one moment a reader finds nothing
    there); otherwise the rename fails (OSError) unless it is empty.
    """
    if replace:
        shutil.rmtree(final, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(final)), exist_ok=True)
    os.replace(staging, final)


@contextlib.contextmanager
def staged(final: str, staging: str, replace: bool = False) -> Iterator[str]:
    """Yield `staging` to write into; when the block ends, move it to `final`.

    If the block or the move raises, `staging` is removed and the error goes
    on; `final` is untouched.
    """
    try:
        yield staging
        move_into_place(staging, final, replace)
    except BaseException:
        remove(staging)
        raise
