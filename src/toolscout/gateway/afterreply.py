"""An audit outcome written once the caller's answer is on its way, not before.

A call's audit has two rows: the *attempt*, committed before the tool runs (a call
whose attempt cannot be written is refused), and the *outcome*. Nothing the caller is
told depends on the outcome row, yet on the forwarding path its ``INSERT`` sat between
the upstream's answer and the caller's. A front end that answers calls itself (the MCP
fast path, :mod:`toolscout.mcp.fastcall`) sets :data:`AFTER_REPLY` to an
:class:`AfterReply` for the call; :meth:`toolscout.gateway.core.Gateway.execute` then
hands it the outcome write instead of doing it, and the front end runs it right after
the answer's bytes went to the caller's pipe (before waiting for the pipe to drain), or
when the call ends without an answer (cancelled). An outcome handed over after that
(a call that goes on past an input-required answer) is written at once.

What changes for the audit: the outcome row is committed a few hundred microseconds
later, after the answer was written; a crash of the process in between leaves the
attempt row alone — the state a failed outcome write already leaves ("a call that ran,
outcome unrecorded"). The attempt row is untouched by this.

The service hands it the call's discovery-log record too (``Toolscout.aexecute``): the
record is held in memory and its writer thread woken after the answer went, not while
the answer is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["AFTER_REPLY", "AfterReply"]

log = logging.getLogger(__name__)


class AfterReply:
    """The outcome writes of one call, held until its answer was written."""

    def __init__(self) -> None:
        self._held: list[Callable[[], object]] = []
        self._open = True

    def defer(self, write: Callable[[], object]) -> None:
        """Run ``write`` after the answer (at once when the answer already went)."""
        if self._open:
            self._held.append(write)
        else:
            write()

    def run(self) -> None:
        """The answer went (or never will): run what was held, and from now on at once."""
        self._open = False
        held, self._held = self._held, []
        for write in held:
            try:
                write()
            except Exception:  # one failed write must not lose the others
                log.exception("a write held for after the answer failed")


#: the current call's :class:`AfterReply`, when its front end writes outcomes after answering
AFTER_REPLY: ContextVar[AfterReply | None] = ContextVar("toolscout_after_reply", default=None)
