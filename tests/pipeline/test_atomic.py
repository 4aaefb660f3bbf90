"""The atomic-output helper: a staged path appears whole under its final name or
not at all, and a failed writer leaves nothing of what it staged."""

import os

import pytest

from genni.pipeline import atomic


def test_a_staged_directory_appears_under_its_final_name(tmp_path):
    final, staging = str(tmp_path / "1"), str(tmp_path / ".staging-1")
    with atomic.staged(final, staging) as path:
        os.makedirs(path)
        (tmp_path / ".staging-1" / "a").write_text("a")
        assert not os.path.exists(final)
    assert sorted(os.listdir(tmp_path)) == ["1"]
    assert (tmp_path / "1" / "a").read_text() == "a"


def test_a_failed_writer_removes_its_staging_and_keeps_the_old_output(tmp_path):
    (tmp_path / "out.json").write_text("old")
    final, staging = str(tmp_path / "out.json"), str(tmp_path / "out.json.tmp")
    with pytest.raises(RuntimeError), atomic.staged(final, staging):
        (tmp_path / "out.json.tmp").write_text("half")
        raise RuntimeError("killed")
    assert sorted(os.listdir(tmp_path)) == ["out.json"]
    assert (tmp_path / "out.json").read_text() == "old"


def test_a_file_is_replaced_a_full_directory_only_when_asked(tmp_path):
    (tmp_path / "f").write_text("old")
    (tmp_path / "f.tmp").write_text("new")
    atomic.move_into_place(str(tmp_path / "f.tmp"), str(tmp_path / "f"))
    assert (tmp_path / "f").read_text() == "new"
    for name in ("out", "staging"):
        os.makedirs(tmp_path / name)
        (tmp_path / name / name).write_text(name)
    with pytest.raises(OSError):
        atomic.move_into_place(str(tmp_path / "staging"), str(tmp_path / "out"))
    atomic.move_into_place(str(tmp_path / "staging"), str(tmp_path / "out"), True)
    assert os.listdir(tmp_path / "out") == ["staging"]
    assert sorted(os.listdir(tmp_path)) == ["f", "out"]


def test_the_final_name_s_parent_is_created(tmp_path):
    (tmp_path / "staging").mkdir()
    final = str(tmp_path / "a" / "b" / "out")
    atomic.move_into_place(str(tmp_path / "staging"), final, replace=True)
    assert os.path.isdir(final)
