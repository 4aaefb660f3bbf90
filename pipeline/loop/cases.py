"""A replay's cases: the log read once, cut at each step's time, and the next
period's events as its users would have met the served version (raw ids, as a
client sends them)."""

from __future__ import annotations

import collections
import os

DAY = 86400.0


def read_log(path: str) -> tuple[list[str], list[list[float]], dict]:
    """The log's lines, each line's event times, and each user's events
    [(time, item)] oldest first."""
    from genni.pipeline.preprocess import formats, inmemory, outputs

    fmt = inmemory.log_format(path, formats.AUTO, None)
    parse = formats.parser_for(fmt, inmemory.log_header(path, fmt))
    lines, times = [], []
    events: dict[str, list] = collections.defaultdict(list)
    for _, line in outputs.iter_lines(path):
        try:
            parsed = list(parse(line)) if line.strip() else []
        except formats.MalformedRecord:
            parsed = []
        lines.append(line)
        times.append([e.timestamp for e in parsed])
        for e in parsed:
            events[e.user].append((e.timestamp, e.item))
    for user in events:
        events[user] = sorted(set(events[user]))
    return lines, times, dict(events)


def cut_times(last: float, every_days: float, steps: int) -> list[float]:
    """`steps` cut times `every_days` apart, the last one period before the
    log's end, so that every step has a next period to be scored on."""
    return [last - (steps + 1 - s) * every_days * DAY for s in range(1, steps + 1)]


def write_cut(
    lines: list[str], times: list[list[float]], cut: float, path: str
) -> None:
    """The lines whose events all came at or before `cut` (header lines kept)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for line, ts in zip(lines, times, strict=True):
            if all(t <= cut for t in ts):
                f.write(line + "\n")


def next_period_cases(events: dict, start: float, end: float):
    """(histories, targets) of the events in (start, end] whose user has an
    earlier event: raw ids, histories all the user's earlier items."""
    histories, targets = [], []
    for timed in events.values():
        for n, (t, item) in enumerate(timed):
            if start < t <= end and n > 0:
                histories.append([i for _, i in timed[:n]])
                targets.append(item)
    return histories, targets
