"""The JSON writer: ``json.dump(doc, indent=2)`` byte for byte, written a piece at a time."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from desched.report import output
from desched.report.output import _write_json_doc

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=12), st.dictionaries(st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=60,
)


def written(doc: dict[str, Any]) -> str:
    out = io.StringIO()
    _write_json_doc(doc, out)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), values, max_size=6))
def test_the_document_is_what_json_dump_writes(doc: dict[str, Any]) -> None:
    assert written(doc) == json.dumps(doc, indent=2) + "\n"


def test_long_lists_are_written_in_chunks_and_short_ones_item_by_item(monkeypatch: Any) -> None:
    monkeypatch.setattr(output, "_CHUNK", 3)  # chunks of 3 items: a list of 10 makes 4
    encoded: list[Any] = []
    formatted = output._formatted

    def spy(value: Any) -> str:
        encoded.append(value)
        return formatted(value)

    monkeypatch.setattr(output, "_formatted", spy)
    rows = [{"n": k, "nan": float("nan") if k == 4 else 0.5} for k in range(10)]
    doc = {"cycles": [{"cycle": 1, "evictions": rows}], "empty": [], "none": {}}
    assert written(doc) == json.dumps(doc, indent=2) + "\n"
    # no call encodes more than 3 rows: the cycle and its list are written a piece at a time
    assert rows[0:3] in encoded and rows[9:10] in encoded
    assert all(not isinstance(v, list) or len(v) <= 3 for v in encoded)
