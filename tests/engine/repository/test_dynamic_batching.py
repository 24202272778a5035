"""`dynamic_batching` read from config.yaml and from Triton's config.pbtxt into the same dataclass."""
from __future__ import annotations

import pytest
import yaml

from conch.engine.errors import InvalidRequest
from conch.engine.repository.batching import DynamicBatching, QueuePolicy
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.pbtxt import parse_pbtxt, to_conch

PBTXT = '''name: "m"
backend: "python"
max_batch_size: 8
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 max_queue_size: 3 }
  priority_queue_policy { key: 1 value: { max_queue_size: 7 allow_timeout_override: true } }
}
'''
YAML = '''
backend: python
max_batch_size: 8
dynamic_batching:
  preferred_batch_size: [8, 4]
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy: {timeout_action: DELAY, default_timeout_microseconds: 5000, max_queue_size: 3}
  priority_queue_policy: {1: {max_queue_size: 7, allow_timeout_override: true}}
'''
EXPECTED = DynamicBatching(
    preferred_batch_size=(4, 8), max_queue_delay_us=100, priority_levels=2, default_priority_level=2,
    default_queue_policy=QueuePolicy("DELAY", 5000, False, 3),
    priority_queue_policy=((1, QueuePolicy("REJECT", 0, True, 7)),))


def test_pbtxt_and_yaml_agree():
    from_pbtxt = to_conch(parse_pbtxt(PBTXT, "m"), "m", None, "1").dynamic_batching
    from_yaml = ModelConfig.from_mapping("m", yaml.safe_load(YAML)).dynamic_batching
    assert from_pbtxt == from_yaml == EXPECTED
    assert EXPECTED.policy(1).max_queue_size == 7 and EXPECTED.policy(2).max_queue_size == 3
    assert EXPECTED.level(0) == 2 and EXPECTED.level(1) == 1


def test_empty_block_turns_the_batcher_on():
    assert to_conch(parse_pbtxt('name: "m"\nbackend: "python"\ndynamic_batching { }\n', "m"), "m", None,
                    "1").dynamic_batching == DynamicBatching()
    assert ModelConfig.from_mapping("m", {"backend": "python"}).dynamic_batching is None


@pytest.mark.parametrize("block", [{"max_delay": 1}, {"default_queue_policy": {"timeout_action": "DROP"}},
                                   {"priority_levels": 1, "default_priority_level": 2}])
def test_bad_blocks_name_the_config(block):
    with pytest.raises(InvalidRequest) as err:
        ModelConfig.from_mapping("m", {"backend": "python", "dynamic_batching": block})
    assert err.value.param == "config"
