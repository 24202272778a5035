"""`conch serve PATH` / `--model NAME=PATH`: the configs a command line's paths make."""
from __future__ import annotations

import json

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.repository.paths import path_configs
from conch.engine.weights.smollm2 import gguf_path


def test_a_gguf_is_named_after_its_file_and_takes_its_context_length(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    configs = path_configs([gguf_path()], [f"other={folder}"])
    assert list(configs) == ["SmolLM2-135M-Instruct.Q4_1", "other"]
    assert configs["SmolLM2-135M-Instruct.Q4_1"].context_length == 8192      # llama.context_length
    assert configs["other"].context_length == 4096 and configs["other"].weights == str(folder.resolve())


@pytest.mark.parametrize("named, says", [(["x=/nonexistent/m.gguf"], "no GGUF file"),
                                         (["x=/tmp"], "neither a .gguf file nor a folder"),
                                         (["x"], "expected NAME=PATH"),
                                         ([f"SmolLM2-135M-Instruct.Q4_1={gguf_path()}"], "given twice")])
def test_a_bad_path_or_name_is_refused_by_name(named, says):
    with pytest.raises(InvalidRequest, match=says):
        path_configs([gguf_path()], named)


def test_mmproj_goes_to_the_one_gguf_model_or_the_one_named(tmp_path):
    folder, mmproj = tmp_path / "hf", tmp_path / "mmproj.gguf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    mmproj.write_bytes(b"GGUF")
    alone = path_configs([gguf_path()], [], (str(mmproj),))
    assert alone["SmolLM2-135M-Instruct.Q4_1"].mmproj == str(mmproj.resolve())
    named = path_configs([gguf_path()], [f"hf={folder}"], (f"SmolLM2-135M-Instruct.Q4_1={mmproj}",))
    assert named["SmolLM2-135M-Instruct.Q4_1"].mmproj == str(mmproj.resolve()) and named["hf"].mmproj is None
    for specs, says in [((str(mmproj),), "name the model"), ((f"hf={mmproj}",), "not a .gguf model"),
                        (("SmolLM2-135M-Instruct.Q4_1=/nonexistent.gguf",), "no file")]:
        with pytest.raises(InvalidRequest, match=says):
            path_configs([gguf_path()], [f"hf={folder}"], specs)
