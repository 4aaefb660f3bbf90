"""benchmarks/cold_scale.py's count of look-alikes: how many catalog items
share each held-out item's exact attribute set (docs/cold_start.md)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cold_scale


class _Dataset:
    num_items = 6

    def item_attributes(self):
        # Items 1, 2, 3 and 5 hold {a, b} (in any order);
        # 4 holds {a}; 6 holds nothing.
        return {
            "1": ["a", "b"],
            "2": ["b", "a"],
            "3": ["a", "b"],
            "4": ["a"],
            "5": ["a", "b"],
        }

    def cold_items(self):
        return np.array([2, 4])


def test_each_held_out_item_counts_the_items_with_its_exact_attribute_set():
    alike = cold_scale.look_alikes(_Dataset())
    # Item 2 shares {a, b} with 1, 3, 5 (4 with itself); item 4 is alone.
    assert alike["held-out items"] == 2
    assert alike["median items with the same set"] == pytest.approx(2.5)
    assert alike["share alone"] == pytest.approx(0.5)
    assert alike["share with 10 or more"] == 0.0
