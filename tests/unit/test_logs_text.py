"""Text log lines (klog's key=value): a value is quoted, JSON-style, exactly when it is empty or holds
a space, a quote, '=', a backslash or a line/tab character; otherwise it is written as is."""

from __future__ import annotations

import io
import json
import logging

from hypothesis import given
from hypothesis import strategies as st

from desched import logs


def _line(value: object) -> str:
    stream = io.StringIO()
    logs.configure(2, "text", stream=stream)
    try:
        logging.getLogger("desched.test").log(logs.V0, "would evict", extra={"reason": value})
    finally:
        logs.configure(0, "text")
    return stream.getvalue().rstrip("\n")


@given(st.text(alphabet=st.sampled_from('ab=" \\\t\n\r-é/:'), max_size=12) | st.text(max_size=12))
def test_a_text_value_is_quoted_when_it_must_be(text: str) -> None:
    quoted = not text or any(c in ' "=\\\t\n\r' for c in text)
    want = json.dumps(text, ensure_ascii=False) if quoted else text
    assert _line(text).endswith(f" reason={want}")


def test_numbers_and_booleans_are_written_bare() -> None:
    assert _line(True).endswith(" reason=true")
    assert _line(3).endswith(" reason=3")
    assert _line(0.1234567).endswith(" reason=0.123457")
