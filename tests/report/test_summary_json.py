"""summary.json text: the fast strict-JSON conversion and the indented writer give exactly what the
element-by-element versions give."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replaylens.report._audit import strict_json
from replaylens.report._json import FloatList, dumps_indented


def _reference_strict(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _reference_strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, FloatList)):   # a FloatList: a sequence like any other
        return [_reference_strict(v) for v in obj]
    return obj


FLOATS = st.floats(allow_nan=True, allow_infinity=True)
LEAVES = st.one_of(FLOATS, st.integers(-5, 5), st.none(), st.text(max_size=3), st.booleans(),
                   FLOATS.map(np.float64))
TREES = st.recursive(LEAVES, lambda kids: st.one_of(st.lists(kids, max_size=80), st.lists(FLOATS, max_size=200),
                                                     st.dictionaries(st.text(max_size=4), kids, max_size=4)),
                     max_leaves=400)


@settings(max_examples=80, deadline=None)
@given(TREES)
def test_strict_json_is_the_element_by_element_conversion(obj: Any) -> None:
    got, ref = strict_json(obj), _reference_strict(obj)
    assert json.dumps(got) == json.dumps(ref)


@settings(max_examples=80, deadline=None)
@given(TREES)
def test_dumps_indented_is_json_dumps(obj: Any) -> None:
    try:
        ref = json.dumps(obj, indent=2, allow_nan=False)
    except ValueError:
        with pytest.raises(ValueError):
            dumps_indented(obj)
        return
    assert dumps_indented(obj) == ref


def test_dumps_indented_lays_out_long_lists_at_every_depth() -> None:
    rng = np.random.default_rng(3)
    vals = rng.random(300).tolist()
    vals[7] = None
    obj = {"rows": [{"per_stream": {"action": vals, "u": tuple(rng.random(70).tolist())}, "n": [1.0] * 64}],
           "top": rng.random(65).tolist(), "empty": [], "strings": ["x"] * 100}
    assert dumps_indented(obj) == json.dumps(obj, indent=2, allow_nan=False)
    top = rng.random(100).tolist()
    assert dumps_indented(top) == json.dumps(top, indent=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(FLOATS, max_size=200), st.integers(0, 3))
def test_float_lists_lay_out_as_json_dumps(values: list[float], depth: int) -> None:
    """A per-stream FloatList (its flat text made once, maybe on another thread) is written exactly as the
    strict list it holds."""
    from replaylens.report._json import float_list

    class Owner:  # an immutable holder, as a StreamValues is
        pass

    owner = Owner()
    fl = float_list(owner, np.asarray(values, dtype=np.float64), text=True)
    strict = _reference_strict(values)
    assert fl == strict and float_list(owner, np.zeros(0)) is fl   # made once per owner
    obj: Any = {"a": fl, "b": [fl, 1.5]}
    for _ in range(depth):
        obj = {"k": [obj]}
    assert dumps_indented(obj) == json.dumps(_reference_strict(obj), indent=2, allow_nan=False)
    assert strict_json(obj) == _reference_strict(obj)


def test_summary_is_a_fresh_plain_copy_of_the_shared_document() -> None:
    """summary() hands out copies (plain lists) of the document the writers share: changing one changes no other
    call's result, and the content is the element-by-element strict form of every row's to_dict()."""
    from replaylens.agents import load_agent
    from replaylens.bandit import make_bandit
    from replaylens.report import audit

    b = make_bandit(n_streams=70, slots_per_block=4, n_future=2)
    res = audit(b.history, b.futures, b.evaluator, load_agent("mean"), cells="value,rename", n_resamples=50)
    s1 = res.summary()
    per = s1["rows"][0]["per_stream"]["action"]
    assert type(per) is list and len(per) == 70
    assert s1["rows"] == [_reference_strict(r.to_dict()) for r in res.rows]
    assert isinstance(res.document()["rows"][0]["per_stream"]["action"], FloatList)
    per.clear()
    s1["rows"][0]["cell"] = "changed"
    s2 = res.summary()
    assert len(s2["rows"][0]["per_stream"]["action"]) == 70 and s2["rows"][0]["cell"] == "value"
    assert dumps_indented(s2) == dumps_indented(res.document())   # the writers' shared form: the same text


def test_float_list_reads_its_array_as_strict_values() -> None:
    """A FloatList is its array's values as strict JSON (None for NaN and infinities) by index, slice and
    iteration, keeps no Python float per value, and is not changed by a later change to a caller's array."""
    arr = np.array([0.5, np.nan, -np.inf, 2.0])
    fl = FloatList(arr)
    arr[0] = 9.0   # the caller's (writable) array was copied
    assert fl == [0.5, None, None, 2.0] and list(fl) == fl.tolist() and len(fl) == 4
    assert fl[1] is None and fl[-1] == 2.0 and fl[1:] == [None, None, 2.0]
    assert fl.text == "[0.5, null, null, 2.0]" and fl != [0.5, None, None]
    shared = np.array([1.0, 2.0])
    shared.flags.writeable = False   # a read-only array (a StreamValues' own) is held as it is
    assert np.shares_memory(FloatList(shared)._values, shared)
