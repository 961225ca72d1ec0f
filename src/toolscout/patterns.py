"""ECMA-262 ``pattern`` s matched in linear time.

A tool's schema comes from whoever publishes the tool — for an upstream MCP server,
from that server. A backtracking engine (Python ``re``) lets such a schema stall the
process: ``^(a+)+$`` against 40 ``a`` s and a ``!`` takes longer than the age of the
universe. Patterns are therefore matched with RE2 (``google-re2``), whose time is
linear in the input, whatever the pattern.

The translation keeps ECMA-262's reading:

* ``$`` is the end of the input (RE2's own ``$`` without multi-line mode) — never
  "before a trailing newline" as in Python ``re``;
* ``\\d`` is ``[0-9]``; ``\\s`` is ECMA's white space (Unicode spaces, ``\\v``, BOM);
* ``.`` matches anything but a line terminator (``\\n``, ``\\r``, U+2028, U+2029);
* named groups ``(?<name>...)`` are RE2's ``(?P<name>...)``.

What RE2 cannot match in linear time — lookahead, lookbehind, back-references — is
refused like a pattern that does not compile (:func:`pattern_error` says which),
so a tool is refused at import instead of being validated by a weaker reading.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any, Protocol

__all__ = ["CompiledPattern", "compile_pattern", "ecma_regex", "pattern_error"]

#: ECMA-262 WhiteSpace and LineTerminator code points (what ``\s`` matches there)
_ECMA_SPACE = (
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
)
_ECMA_DOT = "[^\\n\\r\\x{2028}\\x{2029}]"
_HEX4 = re.compile("[0-9A-Fa-f]{4}")
#: largest compiled program RE2 may build for one pattern (bytes)
_MAX_MEM = 8 << 20


class CompiledPattern(Protocol):
    """What the validator needs of a compiled pattern (RE2's ``_Regexp``)."""

    def search(self, text: str) -> Any: ...


def ecma_regex(pattern: str) -> str:
    """Translate an ECMA-262 ``pattern`` to RE2 syntax (see the module docstring)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nxt == "D" and not in_class:
                out.append("[^0-9]")
            elif nxt == "s":
                out.append(_ECMA_SPACE if in_class else f"[{_ECMA_SPACE}]")
            elif nxt == "S" and not in_class:
                out.append(f"[^{_ECMA_SPACE}]")
            elif nxt == "u" and _HEX4.fullmatch(pattern[i + 2 : i + 6]):
                out.append(f"\\x{{{pattern[i + 2 : i + 6]}}}")
                i += 6
                continue
            elif nxt == "/":
                out.append("/")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if pattern.startswith("^", i + 1):
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):  # a literal ] first in the class
                out.append("\\]")
                i += 1
        elif ch == ".":
            out.append(_ECMA_DOT)
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@functools.cache
def _options() -> Any:
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported by us, not on stderr
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> tuple[CompiledPattern | None, str]:
    import re2

    try:
        return re2.compile(ecma_regex(pattern), _options()), ""
    except re2.error as exc:
        reason = exc.args[0] if exc.args else str(exc)
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    if _backtracking_only(pattern):
        return None, (
            "it needs a backtracking engine (lookahead, lookbehind or a back-reference), "
            "and patterns are matched in linear time"
        )
    return None, f"it does not compile ({text})"


def _backtracking_only(pattern: str) -> bool:
    """Whether Python's backtracking ``re`` reads ``pattern`` (RE2 having refused it)."""
    if not re.search(r"\(\?<?[=!]|\\[1-9]|\\k<", pattern):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            python = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
            re.compile(re.sub(r"\\k<([^>]*)>", r"(?P=\1)", python))
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def compile_pattern(pattern: str) -> CompiledPattern | None:
    """The linear-time matcher for an ECMA-262 ``pattern``, or ``None`` when refused."""
    return _compiled(pattern)[0]


def pattern_error(pattern: str) -> str:
    """Why ``pattern`` is refused (``""`` when it compiles)."""
    return _compiled(pattern)[1]
