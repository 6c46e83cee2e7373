"""A zoo model's seeded weights, kept because calibrating a detector's takes tens of seconds, damaged every
way: what comes back is what an empty cache gives (the other kinds: tests/unit/test_cache_damage.py)."""

import numpy as np
import pytest
from damage import DAMAGES, cache, damage_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mxnet", reason="the zoo needs mxnet 1.9.1 (Python 3.11): run make setup")


def _seeded() -> list:
    from byoc_workbench.models import zoo

    loaded = zoo.load_model("resnet18_v1", "untrained", input_shape=(1, 3, 32, 32))
    return [p.data().asnumpy() for p in list(loaded.block.collect_params().values())[:4]]


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_seeded_weights_are_seeded_again(damage, data):
    with cache() as root:
        first = _seeded()
        entries = sorted(p for p in (root / "seeded").rglob("*") if p.is_file())
        assert entries, "the seeded weights were not kept"
        damage_entry(data.draw(st.sampled_from(entries), label="entry"), damage, data.draw(st.floats(0.0, 0.99)))
        again = _seeded()
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)
