"""The command line: a thin layer over :class:`toolscout.Toolscout`.

:func:`main` is the ``toolscout`` command. For ``toolscout mcp serve`` over stdio it starts
reading the client's first message before the command line and the library are imported:
a desktop client's ``initialize`` is then answered at once, while they load
(:mod:`toolscout.mcp.early`). ``toolscout mcp ...`` imports the gateway's
commands alone (``cli/mcp.py``), not every command of ``cli/app.py``. Any other command is
not affected, and importing this package does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line on ``argv`` (default: this process's own arguments)."""
    from toolscout.mcp.timeline import mark

    if argv is None:  # this process's command: the early reader may take its stdin
        from toolscout.mcp.early import begin

        mark("command line entered")
        begin(sys.argv)
    args = list(argv) if argv is not None else sys.argv[1:]
    if args[:1] == ["mcp"]:
        # the gateway's commands alone: what a desktop client waits for does not import
        # every other command (lint and report bring numpy and the linters)
        from toolscout.cli.mcp import run_mcp

        mark("command line imported")
        run_mcp(args[1:])
        return
    from toolscout.cli.app import main as run

    mark("command line imported")
    run(argv)
