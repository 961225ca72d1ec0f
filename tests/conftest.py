"""Test hooks: the security suite's case counts in the summary; audit logs closed after use."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _close_audit_logs() -> Iterator[None]:
    """Close the audit logs a test opened through ``_gateway_kit.audit_log``."""
    yield
    kit = sys.modules.get("_gateway_kit")
    logs = getattr(kit, "OPEN_LOGS", None)
    while logs:
        logs.pop().close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    kit = sys.modules.get("_gateway_kit")
    counts = getattr(kit, "CASE_COUNTS", None)
    if not counts:
        return
    terminalreporter.section("security suite: generated cases")
    for name, n in sorted(counts.items()):
        terminalreporter.write_line(f"{name}: {n}")
    terminalreporter.write_line(f"total: {sum(counts.values())}")
