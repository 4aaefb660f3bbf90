"""A synthetic review log with a planted sequential signal, for demos and tests.

Users walk a sparse item-to-item transition graph: after item i, with
probability `transition_prob` the next item is one of i's few successors,
otherwise a fresh item drawn from a Zipf popularity distribution. A model that
learns the transitions beats popularity, and popularity beats random ranking, so
the demo shows a real learning signal. The log is written in the Amazon 2014
review format (what `genni preprocess --format amazon` reads), with a few noisy
records a real log has: malformed lines, exact duplicates and low-activity users
and items that the k-core must remove.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os

import numpy as np

DAY_SECONDS = 86_400
START_TIME = 1_300_000_000


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
    rng = np.random.default_rng(config.seed)
    popularity = 1.0 / np.arange(1, config.num_items + 1) ** config.zipf_exponent
    popularity /= popularity.sum()
    successors = rng.choice(
        config.num_items, size=(config.num_items, config.successors), p=popularity
    )
    extra = rng.poisson(config.mean_length - config.min_length, size=config.num_users)
    # What `rng.choice(num_items, p=popularity)` does for one draw, with the CDF
    # built once: the same numbers from the same stream, in O(log items).
    cdf = popularity.cumsum()
    cdf /= cdf[-1]

    def popular() -> int:
        return int(cdf.searchsorted(rng.random(), side="right"))

    sequences = []
    for length in config.min_length + extra:
        item = popular()
        seq = [item]
        while len(seq) < length:
            if rng.random() < config.transition_prob:
                item = int(successors[item, rng.integers(config.successors)])
            else:
                item = popular()
            seq.append(item)
        sequences.append(seq)
    return sequences


def generate_log(config: SyntheticConfig) -> list[str]:
    """The log as lines in the Amazon 2014 review format, shuffled."""
    rng = np.random.default_rng(config.seed + 1)
    lines = []

    def review(user: str, item: str, t: int) -> str:
        rating = float(rng.integers(1, 6))
        return json.dumps(
            {"reviewerID": user, "asin": item, "overall": rating, "unixReviewTime": t}
        )

    for u, seq in enumerate(generate_sequences(config)):
        t = START_TIME + int(rng.integers(0, 365)) * DAY_SECONDS
        for item in seq:
            t += int(rng.integers(1, 30)) * DAY_SECONDS
            line = review(user_id(u), item_id(item), t)
            lines.append(line)
            if rng.random() < config.duplicate_fraction:
                lines.append(line)
    for n in range(config.noise_users):
        # Too short for the k-core, and on items nobody else touches.
        for k in range(2):
            lines.append(review(f"N{n:07d}", f"X{n:07d}_{k}", START_TIME + k))
    broken = int(len(lines) * config.malformed_fraction)
    for b in range(broken):
        lines.append(
            ['{"reviewerID": "A1", "asin": ', '{"asin": "I0000001"}', "not json"][b % 3]
        )
    order = rng.permutation(len(lines))
    return [lines[i] for i in order]


def write_log(config: SyntheticConfig, path: str) -> int:
    """Write the log (gzip when `path` ends in .gz); returns the line count."""
    lines = generate_log(config)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    return len(lines)
