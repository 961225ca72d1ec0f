"""The command line: a thin layer over :class:`toolscout.Toolscout`.

``toolscout mcp serve`` over stdio starts reading the client's first message here, before
the command line and the library are imported: a desktop client's ``initialize`` is then
answered from the answer kept at the last start while they load (:mod:`toolscout.mcp.early`).
Any other command is not affected.
"""

import sys

from toolscout.mcp.early import begin

begin(sys.argv)
