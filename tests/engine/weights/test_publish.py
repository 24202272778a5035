"""A built weights folder appears whole or not at all (engine/weights/cache_dir.py's publish)."""
from __future__ import annotations

import pytest

from conch.engine.weights.cache_dir import DONE, publish


class _Saves:
    def __init__(self, name: str, fail: bool = False) -> None:
        self.name, self.fail = name, fail

    def save_pretrained(self, folder) -> None:
        (folder / self.name).write_text(self.name)
        if self.fail:
            raise OSError("disk full")


def test_a_published_folder_is_whole_and_marked_done_replacing_the_old_one(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "stale.bin").write_text("old")
    publish(_Saves("weights.bin"), _Saves("tokenizer.json"), target)
    assert sorted(p.name for p in target.iterdir()) == sorted([DONE, "tokenizer.json", "weights.bin"])
    assert [p.name for p in tmp_path.iterdir()] == ["model"]          # no temporary folder left beside it


def test_a_failed_save_leaves_no_folder_and_no_temporary_one(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(OSError, match="disk full"):
        publish(_Saves("weights.bin"), _Saves("tokenizer.json", fail=True), target)
    assert list(tmp_path.iterdir()) == []
