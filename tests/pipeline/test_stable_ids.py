"""`genni preprocess --previous DATA`: every user and item keeps its id, new
ones come after, so a model of DATA fits the grown log's ids."""

import pytest

from genni.components import schema
from genni.pipeline.cli import main as cli
from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from tests.conftest import review
from tests.pipeline.test_preprocess_e2e import read_split

DAY = 86400


def log(users, items, start=0):
    return [
        review(f"u{u}", f"i{(u + j) % items}", (start + j) * DAY + u)
        for u in range(users)
        for j in range(6)
    ]


@pytest.mark.parametrize("beam", [False, True])
def test_ids_are_kept_and_new_ones_appended(tmp_path, beam):
    first = tmp_path / "first.json"
    first.write_text("\n".join(log(8, 6)) + "\n")
    # The grown log: new users "a..." who came first in sort order and new
    # items, which would renumber everything without --previous.
    grown = tmp_path / "grown.json"
    extra = [
        review(f"a{u}", f"new{j % 3}", 10 * DAY + j) for u in range(4) for j in range(6)
    ]
    grown.write_text("\n".join(log(8, 6) + extra) + "\n")
    old, new = tmp_path / "old", tmp_path / "new"

    def preprocess(path, out, *flags):
        if beam:
            args = ["preprocess", "--input", str(path), "--output", str(out)]
            assert cli.main([*args, "--min-count", "2", *flags]) == 0
        else:
            previous = flags[1] if flags else None
            inmemory.run(
                PreprocessConfig(str(path), str(out), min_count=2, previous=previous)
            )

    preprocess(first, old)
    preprocess(grown, new, "--previous", str(old))
    old_items = (old / schema.ITEMS_FILE).read_text().split()
    new_items = (new / schema.ITEMS_FILE).read_text().split()
    old_users = (old / schema.USERS_FILE).read_text().split()
    new_users = (new / schema.USERS_FILE).read_text().split()
    assert new_items[: len(old_items)] == old_items
    assert sorted(new_items[len(old_items) :]) == ["new0", "new1", "new2"]
    assert new_users[: len(old_users)] == old_users
    assert sorted(new_users[len(old_users) :]) == ["a0", "a1", "a2", "a3"]
    # The examples speak the kept ids: an old user's test case is the same.
    assert read_split(str(new), schema.TEST, 50)[: len(old_users)] == read_split(
        str(old), schema.TEST, 50
    )
    # Without --previous the new users would have taken the first ids.
    fresh = tmp_path / "fresh"
    preprocess(grown, fresh)
    assert (fresh / schema.USERS_FILE).read_text().split()[0] == "a0"
