"""The suite's fixture: one loaded backend per test module and backend, driven through a real Engine (its
prepare -> generate -> detokenize pipeline), or directly through the backend for abort."""
from __future__ import annotations

import pytest

from conch.engine.engine import Engine
from conch.engine.repository import ModelRepository
from tests.engine.backends.conformance.backends import BACKENDS, MODEL, backend_params


@pytest.fixture(scope="module", params=backend_params())
async def engine(request, tmp_path_factory):
    """An Engine serving the backend's SmolLM2 as MODEL; stopped at the end of the module."""
    engine = Engine(ModelRepository(tmp_path_factory.mktemp("conformance")))
    await engine.load(MODEL, BACKENDS[request.param][1]())
    yield engine
    await engine.stop()
