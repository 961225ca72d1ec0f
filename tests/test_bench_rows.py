"""No test copies a request from the evaluation sets (``../shared/bench/*/queries.jsonl``).

Those queries are held-out data: a test that searches for one of them and expects its
gold tool tunes the code to the benchmark (the repo's rules forbid it). Tests write their
own requests. A query of four words or more may not appear anywhere under ``tests/`` (as
a run of words: case, punctuation and line breaks ignored); one of two or three words
("Get version", "Order me pizza") may not be a whole string literal of a test module.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from collections import defaultdict
from pathlib import Path

from support import BENCH

TESTS = Path(__file__).resolve().parent
#: a query this many words long or longer is looked for anywhere in the text
MIN_WORDS = 4


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\w+", text.lower()))


def _queries() -> dict[tuple[str, ...], str]:
    """Every evaluation query, by its words: its id."""
    files = sorted(BENCH.glob("*/queries.jsonl"))
    assert files, f"the evaluation sets are expected beside the repo at {BENCH}"
    found: dict[tuple[str, ...], str] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                found.setdefault(_words(row["query"]), str(row["id"]))
    return found


def _texts() -> dict[Path, str]:
    texts = {}
    for path in sorted(TESTS.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                texts[path] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # binary
    return texts


def _literals(source: str) -> set[tuple[str, ...]]:
    """The words of every string literal of a module, read with ``tokenize`` (CPython
    3.11.7's ``ast.parse`` raised "AST constructor recursion depth mismatch" on one test
    module inside a pytest-xdist worker; the tokenizer builds no tree)."""
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING:
            body = token.string.lstrip("rRbBuUfF")
            quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
            found.add(_words(body[len(quote) : len(body) - len(quote)]))
    return found


def _label(path: Path) -> str:
    return str(path.relative_to(TESTS)) if path.is_relative_to(TESTS) else path.name


def copied_queries(texts: dict[Path, str], queries: dict[tuple[str, ...], str]) -> list[str]:
    """``file: query id`` for every evaluation query found in ``texts``."""
    # every run of MIN_WORDS words in the texts, to the files holding it
    starts: dict[tuple[str, ...], set[Path]] = defaultdict(set)
    words = {path: _words(text) for path, text in texts.items()}
    for path, seq in words.items():
        for i in range(len(seq) - MIN_WORDS + 1):
            starts[seq[i : i + MIN_WORDS]].add(path)
    literals = {p: _literals(t) for p, t in texts.items() if p.suffix == ".py"}
    found = []
    for query, where in queries.items():
        if len(query) < 2:  # one word ("version?") is not a request anyone copies
            continue
        if len(query) < MIN_WORDS:
            found += [f"{_label(p)}: {where}" for p, lits in literals.items() if query in lits]
            continue
        for path in starts.get(query[:MIN_WORDS], ()):
            seq = words[path]
            n = len(query)
            if any(seq[i : i + n] == query for i in range(len(seq) - n + 1)):
                found.append(f"{_label(path)}: {where}")
    return sorted(found)


def test_no_test_copies_an_evaluation_query() -> None:
    copied = copied_queries(_texts(), _queries())
    assert not copied, "evaluation queries copied into tests (write a request instead):\n" + (
        "\n".join(copied)
    )


def test_the_check_finds_a_copied_query(tmp_path: Path) -> None:
    """The check itself: a long query anywhere (reflowed, other case), a short one as a
    literal; a short one inside longer text is not a copy."""
    queries = _queries()
    long_q, long_id = next((q, w) for q, w in queries.items() if len(q) >= 8)
    short_q, short_id = next((q, w) for q, w in queries.items() if 1 < len(q) < MIN_WORDS)
    reflowed = " ".join(long_q[:3]).upper() + "\n# " + ", ".join(long_q[3:])
    module = tmp_path / "test_x.py"
    texts = {
        module: f"A = {' '.join(short_q)!r}\nB = 'and then {' '.join(short_q)} too'\n",
        tmp_path / "notes.md": f"see: {reflowed}.\n",
    }
    copied = copied_queries(texts, queries)
    assert f"test_x.py: {short_id}" in copied
    assert any(c.endswith(long_id) and "notes.md" in c for c in copied), copied
    assert copied_queries({module: "A = 'and then some'\n"}, queries) == []
