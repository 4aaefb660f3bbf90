"""A synthetic review log with a planted sequential signal, for demos and tests.

Users walk a sparse item-to-item transition graph: after item i, with
probability `transition_prob` the next item is one of i's few successors,
otherwise a fresh item drawn from a Zipf popularity distribution. A model that
learns the transitions beats popularity, and popularity beats random ranking, so
the demo shows a real learning signal. The log is written in the Amazon 2014
review format (what `genni preprocess --format amazon` reads), with a few noisy
records a real log has: malformed lines, exact duplicates and low-activity users
and items that the k-core must remove.

Its users come back to items: the walk returns to an item through the graph's
few successors and the popular items, so at the default sizes about a third of
the valid and test targets repeat an item of the user's history (`genni stats`
shows the share). That is a log of repeat
consumption (groceries, music, re-watched shows) rather than of reviews, so
train and evaluate on it with `--candidates all`, as `make demo` does: under
the paper's `--candidates new` every such target counts as a miss.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from collections.abc import Callable, Iterator

import numpy as np

DAY_SECONDS = 86_400
START_TIME = 1_300_000_000
# Lines shuffled together (`iter_log`): about 100 MB of them, the whole log of
# the project's demo and held-out data sets.
DEFAULT_SHUFFLE_BUFFER = 1_000_000
PROGRESS_LINES = 1_000_000


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Shape of the generated log.

    Args:
        num_users: users with a real history (more are added as k-core noise).
        num_items: catalog size.
        mean_length: mean events per user (at least `min_length`).
        min_length: shortest history of a real user.
        successors: successors of each item in the transition graph.
        transition_prob: chance that the next item follows the graph.
        zipf_exponent: popularity skew of the fresh items.
        malformed_fraction: share of lines that are broken on purpose.
        duplicate_fraction: share of events written twice.
        noise_users: users with too few events (removed by a 5-core).
        seed: random seed; the same seed writes the same file.
    """

    num_users: int = 2000
    num_items: int = 500
    mean_length: float = 12.0
    min_length: int = 5
    successors: int = 3
    transition_prob: float = 0.7
    zipf_exponent: float = 1.1
    malformed_fraction: float = 0.002
    duplicate_fraction: float = 0.01
    noise_users: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_users < 1 or self.num_items < 2:
            raise ValueError(
                "`num_users` must be >= 1 and `num_items` >= 2. "
                f"Got {self.num_users} and {self.num_items}."
            )
        if not 0.0 <= self.transition_prob <= 1.0:
            raise ValueError(
                f"`transition_prob` must be in [0, 1]. Got {self.transition_prob}."
            )
        if self.zipf_exponent < 0:
            raise ValueError(
                f"`zipf_exponent` must be non-negative. Got {self.zipf_exponent}."
            )
        if self.mean_length < self.min_length:
            raise ValueError(
                f"`mean_length` ({self.mean_length}) must be >= `min_length` "
                f"({self.min_length})."
            )


def user_id(index: int) -> str:
    return f"U{index:07d}"


def item_id(index: int) -> str:
    return f"I{index:07d}"


def generate_sequences(config: SyntheticConfig) -> list[list[int]]:
    """Item-index sequences of the real users (0-based item indices)."""
    return list(iter_sequences(config))


def sequence_law(
    config: SyntheticConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the users' sequences are drawn from: the items' popularity (Zipf,
    [items]), each item's successors ([items, successors], drawn from `rng`)
    and each user's length beyond `min_length` ([users], drawn next)."""
    popularity = 1.0 / np.arange(1, config.num_items + 1) ** config.zipf_exponent
    popularity /= popularity.sum()
    successors = rng.choice(
        config.num_items, size=(config.num_items, config.successors), p=popularity
    )
    extra = rng.poisson(config.mean_length - config.min_length, size=config.num_users)
    return popularity, successors, extra


def iter_sequences(config: SyntheticConfig) -> Iterator[list[int]]:
    """`generate_sequences`, one user at a time: memory O(items + users), not
    O(events)."""
    rng = np.random.default_rng(config.seed)
    popularity, successors, extra = sequence_law(config, rng)
    # What `rng.choice(num_items, p=popularity)` does for one draw, with the CDF
    # built once: the same numbers from the same stream, in O(log items).
    cdf = popularity.cumsum()
    cdf /= cdf[-1]

    def popular() -> int:
        return int(cdf.searchsorted(rng.random(), side="right"))

    for length in config.min_length + extra:
        item = popular()
        seq = [item]
        while len(seq) < length:
            if rng.random() < config.transition_prob:
                item = int(successors[item, rng.integers(config.successors)])
            else:
                item = popular()
            seq.append(item)
        yield seq


def generate_log(config: SyntheticConfig) -> list[str]:
    """The log as lines in the Amazon 2014 review format, shuffled."""
    return list(iter_log(config))


def iter_log(
    config: SyntheticConfig, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER
) -> Iterator[str]:
    """The log's lines, streamed: memory O(`shuffle_buffer` lines + items +
    users), whatever the number of events.

    Lines are shuffled within blocks of about `shuffle_buffer` lines (whole
    users' events each, with their share of the malformed lines); a log of at
    most one block is shuffled whole, the same lines as `generate_log` gave
    before it streamed. The reviews of a seed are the same whatever the block
    size: only their order and the malformed lines' count move.
    """
    if shuffle_buffer < 1:
        raise ValueError(f"`shuffle_buffer` must be positive. Got {shuffle_buffer}.")
    rng = np.random.default_rng(config.seed + 1)
    block_rng = np.random.default_rng(config.seed + 2)  # Orders all but the last.

    def review(user: str, item: str, t: int) -> str:
        rating = float(rng.integers(1, 6))
        return json.dumps(
            {"reviewerID": user, "asin": item, "overall": rating, "unixReviewTime": t}
        )

    def shuffled(lines: list[str], order: np.random.Generator) -> list[str]:
        broken = int(len(lines) * config.malformed_fraction)
        for b in range(broken):
            lines.append(
                ['{"reviewerID": "A1", "asin": ', '{"asin": "I0000001"}', "not json"][
                    b % 3
                ]
            )
        return [lines[i] for i in order.permutation(len(lines))]

    lines: list[str] = []
    for u, seq in enumerate(iter_sequences(config)):
        t = START_TIME + int(rng.integers(0, 365)) * DAY_SECONDS
        for item in seq:
            t += int(rng.integers(1, 30)) * DAY_SECONDS
            line = review(user_id(u), item_id(item), t)
            lines.append(line)
            if rng.random() < config.duplicate_fraction:
                lines.append(line)
        if len(lines) >= shuffle_buffer and u + 1 < config.num_users:
            yield from shuffled(lines, block_rng)
            lines = []
    for n in range(config.noise_users):
        # Too short for the k-core, and on items nobody else touches.
        for k in range(2):
            lines.append(review(f"N{n:07d}", f"X{n:07d}_{k}", START_TIME + k))
    yield from shuffled(lines, rng)


def write_log(
    config: SyntheticConfig,
    path: str,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write the log (gzip when `path` ends in .gz), streamed (`iter_log`);
    returns the line count. `progress`, if given, is called with the lines
    written so far every `PROGRESS_LINES` lines."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    n = 0
    with opener(path, "wt", encoding="utf-8") as f:
        for line in iter_log(config, shuffle_buffer):
            f.write(line + "\n")
            n += 1
            if progress is not None and n % PROGRESS_LINES == 0:
                progress(n)
    return n
