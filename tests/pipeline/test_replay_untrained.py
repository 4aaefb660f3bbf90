"""benchmarks/replay_untrained.py's oracle offset: an item without a trained
row moves up by the offset, the target's rank follows, and the offsets tried
come from the cases' gaps."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import replay_untrained


def test_an_offset_lifts_an_untrained_target_into_the_top_10():
    # Twelve trained items scored 12 .. 1, then an untrained one at 0.5.
    scores = np.array([*range(12, 0, -1), 0.5], dtype=np.float32)
    untrained = np.array([False] * 12 + [True])
    new_case = (scores, untrained, 12)  # The untrained item is the target.
    warm_case = (scores, untrained, 9)  # The trained item scored 3.
    results = replay_untrained.offset_scores(
        [new_case, warm_case], np.array([True, False])
    )
    offsets = [offset for offset, _ in results]
    # The gap: the 10th trained item (3) minus the best untrained one (0.5).
    assert offsets == pytest.approx([0.0] + [2.5] * 6)
    (_, (ndcg_0, hr_0)), (_, (ndcg_1, hr_1)) = results[0], results[1]
    assert hr_0 == 0.0 and hr_1 == 100.0  # Rank 12, then 9 (only 9 above 3.0).
    # The warm target (rank 9) ties the moved item at 3.0 and keeps its rank.
    assert ndcg_0 == pytest.approx(50 / np.log2(11), abs=1e-4)
    assert ndcg_1 == pytest.approx(50 / np.log2(11) + 50 / np.log2(11), abs=1e-4)
