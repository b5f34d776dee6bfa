"""docs/operations.md lists every skip reason desched can put in ``descheduler_evictions_skipped_total``
(and in the Event, the log line and simulate's ``evictionsSkipped``): the evictionPolicy's rules
(:class:`SkipReason`) and every in-tree plugin's ``predictive`` judgement (``NoGain`` labels)."""

from __future__ import annotations

import re
from pathlib import Path

from desched.framework.safety import SkipReason

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "src" / "desched" / "plugins"
_NO_GAIN = re.compile(r'NoGain\(\s*"([a-z0-9_]+)"')


def plugin_reasons() -> dict[str, str]:
    """Every NoGain label an in-tree plugin returns, with the file it is in."""
    found: dict[str, str] = {}
    for path in sorted(PLUGINS.rglob("*.py")):
        for label in _NO_GAIN.findall(path.read_text()):
            found[label] = str(path.relative_to(ROOT))
    return found


def metric_row() -> str:
    lines = (ROOT / "docs" / "operations.md").read_text().splitlines()
    (row,) = [line for line in lines if line.startswith("| `descheduler_evictions_skipped_total` |")]
    return row


def test_the_metric_row_names_every_skip_reason_the_code_can_give() -> None:
    documented = set(re.findall(r"`([a-z0-9_]+)`", metric_row()))
    plugins = plugin_reasons()
    # the scan sees the judgements of the six plugins that have one
    assert len(plugins) >= 6, plugins
    missing = sorted({str(r) for r in SkipReason} - documented) + sorted(set(plugins) - documented)
    assert not missing, f"docs/operations.md does not list skip reason(s) {missing} ({plugins})"
