"""Fixtures the engine thread's tests share."""
from __future__ import annotations

import pytest

from tests.conftest import start_inprocess, write_repository


@pytest.fixture(scope="module")
def tiny_inprocess(tmp_path_factory):
    """A server in this process (its engine reachable: `.engine`) serving builtin:tiny as `tiny`."""
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 2}})
    s = start_inprocess(root)
    yield s
    s.stop()
