"""JSON log lines (encoded by msgspec for speed) hold the values json.dumps would write, NaN and
text that is not UTF-8 included."""

from __future__ import annotations

import io
import json
import logging
import math

import pytest

from desched import logs


@pytest.mark.parametrize(
    "fields",
    [
        {"pod": "shop/web-1", "node": "n1", "seconds": 0.031, "evicted": 3, "dryRun": True, "x": None},
        {"nested": [1, (2, 3)], "keys": {1: "a"}, "text": "é ☃ \u2028 \x01", "big": 1e16},
        {"nan": float("nan"), "inf": float("inf")},
        {"surrogate": "\udcff"},
    ],
)
def test_a_json_line_has_the_values_json_dumps_writes(fields: dict[str, object]) -> None:
    stream = io.StringIO()
    logs.configure(2, "json", stream=stream)
    try:
        logging.getLogger("desched.test").log(logs.V0, "would evict", extra=fields)
    finally:
        logs.configure(0, "text")
    line = stream.getvalue()
    assert line.count("\n") == 1
    doc = json.loads(line)
    assert doc["msg"] == "would evict" and doc["v"] == 0 and doc["level"] == "info"
    expected = json.loads(json.dumps({k: logs._json_value(v) for k, v in fields.items()}))
    for key, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(doc[key])
        else:
            assert doc[key] == value, key
