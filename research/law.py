"""The law of a GenNi draw, in closed form, to compare its variants (numpy only).

GenNi's exact law over a catalog of N items is Q(i) = softmax(s)_i, s = alpha *
h . e. A draw over a uniform subset of M candidates (`beta` < 1, or
`max_candidates` = M below N) has the marginal law

    Q_M(i) = (M / N) E[exp(s_i) / (exp(s_i) + Z')],

Z' the mass of the M - 1 other candidates. `capped_law` takes the expectation
over draws of the subset, for every item at once (no noise from single item
draws), so that `total_variation` measures the law's distortion, not a
histogram's noise.

The two-level draw (`GenNiSampler(clusters=C)`) resamples a negative from R
candidates drawn independently from a proposal P (a cluster by its mass, then
an item in it uniformly), with weights w = exp(s) / P. Its marginal law is

    Q_R(i) = R P(i) E[w_i / (w_i + W')],

W' the weights of R - 1 other candidates from P; `resampled_law` takes the
expectation the same way.

With successors (`GenNiSampler(successors=S)`), a row's candidates are its
extra items E (always scored) and the members of the uniform subset outside
E, weighted up by N / M. `successor_law` gives its marginal law the same way:
Q(i) = E[w_i / (Z_E + W_U)] for i in E, and (M / N) E[w_i / (Z_E + w_i + W')]
outside E, w = exp(s) N / M outside E.
"""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of [rows, N] logits."""
    mass = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return mass / mass.sum(axis=-1, keepdims=True)


def capped_law(
    logits: np.ndarray, cap: int, draws: int = 32, seed: int = 0
) -> np.ndarray:
    """Q_M of each row of `logits` [rows, N]: the law of a draw that scores a
    uniform subset of `cap` items, over `draws` samples of the others' mass.
    At `cap` >= N, the exact law. (`successor_law` without extra items.)"""
    logits = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    return successor_law(logits, np.zeros(logits.shape, dtype=bool), cap, draws, seed)


def resampled_law(
    logits: np.ndarray,
    proposal_logits: np.ndarray,
    samples: int,
    draws: int = 32,
    seed: int = 0,
) -> np.ndarray:
    """Q_R of each row: the law of a negative resampled, by weights
    exp(logits) / P, from `samples` candidates drawn from the proposal P =
    softmax(`proposal_logits`) (both [rows, N]). At `samples` 1, P itself; as
    `samples` grows, softmax(logits)."""
    logits = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    proposal_logits = np.atleast_2d(np.asarray(proposal_logits, dtype=np.float64))
    if samples < 1 or draws < 1:
        raise ValueError(f"samples and draws must be positive. Got {samples}, {draws}.")
    rng = np.random.default_rng(seed)
    proposal = softmax(proposal_logits)
    laws = np.empty_like(logits)
    for r in range(len(logits)):
        log_w = logits[r] - proposal_logits[r]
        w = np.exp(log_w - log_w.max())
        cdf = np.cumsum(proposal[r])
        others = np.minimum(
            np.searchsorted(cdf, rng.random((draws, samples - 1)) * cdf[-1]),
            len(w) - 1,
        )  # (draws, R - 1) candidates from the proposal
        rest = w[others].sum(axis=1)  # (draws,)
        share = np.zeros(len(w))
        for other in rest:
            share += w / (w + other)
        laws[r] = proposal[r] * share
        laws[r] /= laws[r].sum()
    return laws


def successor_law(
    logits: np.ndarray,
    extras: np.ndarray,
    cap: int,
    draws: int = 32,
    seed: int = 0,
) -> np.ndarray:
    """The law of each row of a draw over its extra items (`extras`, a [rows, N]
    bool mask) and a uniform subset of `cap` items weighted by N / cap (the
    subset's members in the row's extras count once, as extras), over `draws`
    samples of the subset. Masked items have logit -inf."""
    logits = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    extras = np.atleast_2d(np.asarray(extras, dtype=bool))
    rows, n = logits.shape
    if cap >= n:
        return softmax(logits)
    if cap < 1 or draws < 1:
        raise ValueError(f"cap and draws must be positive. Got {cap}, {draws}.")
    rng = np.random.default_rng(seed)
    laws = np.empty_like(logits)
    for r in range(rows):
        mass = np.exp(logits[r] - logits[r].max())
        extra = extras[r]
        weight = np.where(extra, 0.0, mass * n / cap)  # Outside E, up-weighted.
        fixed = mass[extra].sum()  # Z_E
        law = np.zeros(n)
        for _ in range(draws):
            subset = rng.choice(n, cap, replace=False)
            total = weight[subset].sum()  # W_U, E's members left out
            inside = np.zeros(n, dtype=bool)
            inside[subset] = True
            # Outside E, W' for item i is the weight of U without i if i is in
            # U, else of U without one random member: a uniform (cap - 1)-subset
            # of the items other than i either way.
            others = np.where(
                inside, total - weight, total - weight[rng.choice(subset)]
            )
            outside = (
                (cap / n)
                * weight
                / np.maximum(
                    fixed + weight + np.maximum(others, 0.0), np.finfo(float).tiny
                )
            )
            law += np.where(
                extra, mass / max(fixed + total, np.finfo(float).tiny), outside
            )
        laws[r] = law / law.sum()
    return laws


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """1/2 sum_i |p_i - q_i| per row."""
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(axis=-1)
