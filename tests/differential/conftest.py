"""Prints the differential tier's figures at the end of the pytest run (what .ci/run shows)."""

from __future__ import annotations

import pytest

#: lines the tests of this folder want shown in the terminal summary
FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("desched against upstream v0.36.0 (tests/differential)")
        for line in FIGURES:
            terminalreporter.write_line(line)
