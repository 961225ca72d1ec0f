"""The command line: a thin layer over :class:`toolscout.Toolscout`.

:func:`main` is the ``toolscout`` command. For ``toolscout mcp serve`` over stdio it starts
reading the client's first message before the command line and the library are imported:
a desktop client's ``initialize`` is then answered from the answer kept at the last start
while they load (:mod:`toolscout.mcp.early`). Any other command is not affected, and
importing this package does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line on ``argv`` (default: this process's own arguments)."""
    if argv is None:  # this process's command: the early reader may take its stdin
        from toolscout.mcp.early import begin

        begin(sys.argv)
    from toolscout.cli.app import main as run

    run(argv)
