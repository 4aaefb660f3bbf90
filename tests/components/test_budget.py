"""GenNi's candidates within a budget of scores per step."""

import pytest

from genni.components.samplers.budget import budget_candidates, positions_per_step


@pytest.mark.parametrize(
    "positions, expected",
    [
        (256 * 43.4, 8192),  # The 10^6 scale run's batches.
        (256 * 50, 8192),  # Full rows: the most a batch of 256 holds.
        (256 * 16, 16384),  # The 10^5 run's: the cap.
        (1000, 16384),
        (10**7, 8),  # Never below the minimum...
    ],
)
def test_the_largest_power_of_two_within_the_budget(positions, expected):
    m = budget_candidates(1 << 27, positions, 10**6, cap=16384, minimum=8)
    assert m == expected
    assert m * positions <= 1 << 27 or m == 8  # ...which may pass the budget.


def test_a_budget_that_reaches_the_catalog_scores_every_item():
    assert budget_candidates(1 << 27, 256 * 5.9, 12_101, cap=16_384) is None
    assert budget_candidates(1 << 27, 256 * 5.9, 12_101) is None
    assert budget_candidates(1 << 20, 1 << 10, 1 << 10) is None  # M = N.
    assert budget_candidates(1 << 20, 1 << 10, (1 << 10) + 1) == 1 << 10
    with pytest.raises(ValueError, match="budget"):
        budget_candidates(0, 100, 1000)


def test_positions_per_step_are_the_training_targets_of_a_batch():
    # n events a user: n - 3 train targets (valid and test held out), at most
    # max_len.
    assert positions_per_step(10 * 100, 100, 50, 256) == 256 * 7
    assert positions_per_step(100 * 100, 100, 50, 256) == 256 * 50
    assert positions_per_step(3 * 100, 100, 50, 2) == 2  # At least one.
