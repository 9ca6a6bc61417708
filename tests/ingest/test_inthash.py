"""The compiled int map behaves like a dict under random inserts and deletes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.inthash import IntMap, delete_at, find, insert_at


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 200)), max_size=400))
def test_matches_a_dict(ops: list[tuple[bool, int]]) -> None:
    table, model = IntMap(4), {}
    for n, (add, key) in enumerate(ops):
        table.reserve(1)
        p = find(table.keys, key)
        if add and p < 0:
            insert_at(table.keys, table.values, table.count, -1 - p, key, n)
            model[key] = n
        elif not add and p >= 0:
            delete_at(table.keys, table.values, table.count, p)
            del model[key]
    keys, values = table.items()
    assert dict(zip(keys.tolist(), values.tolist(), strict=True)) == model
    assert len(table) == len(model)
    for key in range(201):
        assert (find(table.keys, key) >= 0) == (key in model)
    assert np.all(table.keys[table.keys >= 0] <= 200)
