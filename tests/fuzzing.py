"""Hypothesis strategies the fuzz tests of more than one way in share: JSON text as a person
types it (valid, not JSON, numbers that are not finite, nesting past any limit, NUL and lone
surrogates) and numbers as form fields and options carry them."""

from __future__ import annotations

import json

from hypothesis import strategies as st

NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e308", "-0.0", "2e-400", "1" * 400]
STRINGS = ['"\\u0000"', '"\\ud800"', '"\\udfff\\ud800"', '"a"', '""']
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
payload_texts = st.one_of(
    json_values.map(
        lambda v: json.dumps({"message": "hi", "x": v})
    ),  # NaN, Infinity as Python writes them
    st.sampled_from(NUMBERS + STRINGS).map(lambda v: f'{{"message": "hi", "x": {v}}}'),
    st.integers(0, 120_000).map(lambda n: '{"x": ' + "[" * n + "]" * n + "}"),
    st.integers(0, 120_000).map(lambda n: "{" * n),
    st.text(max_size=40),
)
numbers = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(NUMBERS + ["", "x"]))
