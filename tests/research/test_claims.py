"""The paper's claims as data: each claim's text, the runs it needs and its
judge travel together (`research.claims`)."""

import pytest

from research import report
from tests.research.test_report import GRID, finish, value_of


@pytest.mark.parametrize("index", range(len(report.CLAIMS)))
def test_each_claim_is_judged_from_the_runs_it_needs_alone(tmp_path, index):
    """A claim's text, the runs it needs and its judge travel together: with
    only its own runs finished, its judge decides it, and without one of them
    it waits for that run."""
    claim = report.CLAIMS[index]
    runs = report.plan("DATA", str(tmp_path / "runs"), GRID)
    needs = claim.needs(GRID, None)
    labels = {use[:2] for entry in runs.values() for use in entry["uses"]}
    assert needs and needs <= labels
    assert needs <= report.claim_runs(GRID)

    def using(wanted):
        return {
            d: e for d, e in runs.items() if any(u[:2] in wanted for u in e["uses"])
        }

    finish(using(needs), value_of)
    table = report.collect(runs, report.run_grid(runs, verbose=0, train_missing=False))
    reproduced, numbers = claim.judge(table)
    assert isinstance(reproduced, bool) and numbers
    verdicts = {c: ok for c, ok, _ in report.claims(table)}
    assert verdicts[claim.text] is reproduced
    for i, left_out in enumerate(sorted(needs)):  # Each run it needs is needed.
        others = report.plan("DATA", str(tmp_path / f"without_{i}"), GRID)
        kept = {
            d: e
            for d, e in others.items()
            if any(u[:2] in needs - {left_out} for u in e["uses"])
            and not any(u[:2] == left_out for u in e["uses"])
        }
        finish(kept, value_of)
        partial = report.collect(
            others, report.run_grid(others, verbose=0, train_missing=False)
        )
        with pytest.raises(report.NotRun):
            claim.judge(partial)
