"""gguf_config.py's config of a GGUF is the config transformers' legacy loader builds from the same file
(load_gguf_checkpoint, over gguf's GGUFReader), key for key: on the packaged SmolLM2 file and on small files
written here with llama.cpp's metadata keys of each architecture it builds (the values are arbitrary)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conch.engine.weights import gguf_config
from conch.engine.weights.gguf_header import read_header
from conch.engine.weights.smollm2 import gguf_path
from tests.engine.weights.gguf_files import write_gguf

CASES = {
    "llama": dict(arch="llama"),
    "llama-untied": dict(arch="llama", tied=False),
    "mistral": dict(arch="llama", name="mistral"),
    "qwen2": dict(arch="qwen2"),
    "qwen3": dict(arch="qwen3"),
    "gemma3": dict(arch="gemma3", extra={"add_sliding_window": 512}),
    "phi3": dict(arch="phi3", extra={"add_sliding_window": 2048}),
}


def _legacy(path: Path) -> dict:
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    return load_gguf_checkpoint(str(path), return_tensors=False)["config"]


def _ours(path: Path) -> dict:
    header = read_header(path)
    return gguf_config.hf_config(header.metadata, tuple(t.name for t in header.tensors))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_config_is_the_legacy_loaders(tmp_path, case):
    path = write_gguf(tmp_path / f"{case}.gguf", **CASES[case])
    assert _ours(path) == _legacy(path)


def test_the_packaged_files_config_is_the_legacy_loaders():
    ours = _ours(gguf_path())
    assert ours == _legacy(gguf_path())
    assert ours["model_type"] == "llama" and ours["vocab_size"] == 49152 and ours["tie_word_embeddings"]


def test_registered_transformers_builds_the_same_config_object(tmp_path, monkeypatch):
    from transformers import AutoConfig
    from transformers.integrations.gguf import GGUF_CONFIG_ARCHS

    path = write_gguf(tmp_path / "qwen3.gguf", "qwen3")
    gguf_config.register()
    assert GGUF_CONFIG_ARCHS["qwen3"] is gguf_config.hf_config
    ours = AutoConfig.from_pretrained(str(tmp_path), gguf_file=path.name)
    monkeypatch.delitem(GGUF_CONFIG_ARCHS, "qwen3")                  # transformers' legacy loader again
    legacy = AutoConfig.from_pretrained(str(tmp_path), gguf_file=path.name)
    assert ours.to_dict() == legacy.to_dict()
    assert ours.model_type == "qwen3" and ours.num_key_value_heads == 2


@pytest.mark.parametrize("layers, scalar", [(2, 8), (62, 16)])
def test_gemma3s_query_scale_is_llama_cpps(tmp_path, layers, scalar):
    """llama.cpp scales a Gemma 3's queries by 1 / sqrt(head_dim) (8 here), its 62-layer 27B's by
    1 / sqrt(hidden / heads) (64 / 4); transformers' GGUF config leaves query_pre_attn_scalar at 256."""
    from conch.engine.weights.gguf_file import load_gguf_config, read_gguf

    path = write_gguf(tmp_path / "g.gguf", "gemma3", layers=layers, head_dim=8,
                      extra={"add_sliding_window": 512, "add_final_logit_softcapping": 30.0})
    config = load_gguf_config(read_gguf(path))
    assert config.query_pre_attn_scalar == scalar and config.final_logit_softcapping == 30.0


LIGHT_CASES = {"llama": CASES["llama"], "llama-untied": CASES["llama-untied"]}


def _same_attributes(light, full) -> None:
    keys = [k for k in gguf_config.LIGHT["llama"] if k != "use_cache"]         # (the base class keeps no use_cache)
    assert {k: getattr(light, k) for k in keys} == {k: getattr(full, k) for k in keys}
    assert light.model_type == full.model_type


@pytest.mark.parametrize("case", sorted(LIGHT_CASES))
def test_a_light_llama_config_is_llamaconfigs_own(tmp_path, case):
    """gguf_config.light: a llama file's config without importing LlamaConfig (its import chain costs ~1 s of a
    start) has every attribute LlamaConfig gives it, and `full` of it is that LlamaConfig."""
    from transformers import LlamaConfig

    from conch.engine.weights.gguf_file import load_gguf_config, read_gguf

    info = read_gguf(write_gguf(tmp_path / f"{case}.gguf", **LIGHT_CASES[case]))
    light, reference = load_gguf_config(info, light=True), load_gguf_config(info)
    assert not isinstance(light, LlamaConfig) and isinstance(reference, LlamaConfig)
    _same_attributes(light, reference)
    full, names = gguf_config.full(light), ("_name_or_path", "_model_name_or_path")    # (names: the file's title)
    assert type(full) is LlamaConfig
    assert {k: v for k, v in full.to_dict().items() if k not in names} == \
        {k: v for k, v in reference.to_dict().items() if k not in names}


def test_a_light_config_keeps_a_files_rope_scaling(tmp_path):
    """rope_freqs (Llama 3.1+) reach a light config as they reach LlamaConfig (gguf_rope.py)."""
    import numpy as np

    from conch.engine.weights.gguf_file import load_gguf_config, read_gguf

    factors = np.r_[np.ones(3), np.full(5, 8.0)].astype(np.float32)
    info = read_gguf(write_gguf(tmp_path / "l3.gguf", "llama", tensors={"rope_freqs.weight": factors}))
    light, reference = load_gguf_config(info, light=True), load_gguf_config(info)
    assert light.rope_parameters == reference.rope_parameters and light.rope_parameters["rope_type"] == "llama3"
    _same_attributes(light, reference)


def test_a_llama_file_loads_without_importing_llamaconfig():
    """The packaged SmolLM2 GGUF served on the flattened runner: tokenizer and model built, LlamaConfig's module
    (and the torch.distributed.tensor it imports) never imported."""
    import subprocess
    import sys

    code = ("import sys; from conch.engine.backends.conch import loader; from conch.engine.repository import "
            "ModelConfig; from conch.engine.weights.smollm2 import gguf_path; "
            "m = loader.load(ModelConfig(name='m', weights=str(gguf_path()))); "
            "print(type(m.model.config).__name__, 'transformers.models.llama.configuration_llama' in sys.modules, "
            "'torch.distributed.tensor' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["PreTrainedConfig", "False", "False"], out.stderr[-2000:]


@pytest.mark.parametrize("value, named", [(0.5, False), (2, False), ("0.5", True), (True, True),
                                          (float("inf"), True), ([0.5], True)])
def test_an_architectures_own_key_must_be_a_finite_number(value, named):
    metadata = {"general.architecture": "granite", "granite.logit_scale": value, "llama.logit_scale": "x"}
    assert gguf_config.unreadable_keys(metadata) == (["granite.logit_scale"] if named else [])
