"""Session hooks of the whole suite: the router blocks' coverage (tests/block_coverage.py),
only when NPK_BLOCK_COVERAGE names a tracefile to write."""

from __future__ import annotations

import os
from typing import Any

from tests import block_coverage

if block_coverage.target():
    block_coverage.install()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    block_coverage.finish(os.environ.get("PYTEST_XDIST_WORKER"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in block_coverage.note():
        terminalreporter.write_line(line)
