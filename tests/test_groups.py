"""``core._groups.Groups``, the graph's small path groups, against a dict of sets:
the same members after any adds and discards, across the tuple/set threshold."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wikid.core._groups import SMALL, Groups

KEYS = st.sampled_from(["a", "b", "c"])
PATHS = st.integers(0, SMALL + 8).map(lambda i: f"n{i}.md")


@given(st.lists(st.tuples(st.booleans(), KEYS, PATHS), max_size=200))
def test_groups_hold_what_a_dict_of_sets_holds(ops: list[tuple[bool, str, str]]) -> None:
    groups, model = Groups(), dict[str, set[str]]()
    for add, key, path in ops:
        if add:
            groups.add(key, path)
            model.setdefault(key, set()).add(path)
        else:
            groups.discard(key, path)
            model.get(key, set()).discard(path)
            if not model.get(key, True):
                del model[key]
    assert {k: set(groups.get(k)) for k in "abc" if groups.get(k)} == model
    assert len(groups) == len(model)
    rebuilt = Groups()
    for key, paths in model.items():
        for path in sorted(paths, reverse=True):
            rebuilt.add(key, path)
    assert rebuilt == groups  # whatever the order or the form each group took
