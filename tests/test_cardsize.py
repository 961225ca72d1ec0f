"""Cards' sizes kept in the store: a re-index of unchanged cards reports the same oversize
warnings without building the token counter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import card_embedder, spec
from toolscout.cards import CARD_TOKEN_WARN, card_tokens
from toolscout.discovery import cardsize
from toolscout.discovery.catalog import Catalog
from toolscout.stores.memory import MemoryStore

LONG = "Does " + " ".join(f"thing{i} with extra words" for i in range(40)) + "."

#: ``toolscout index`` in a process that says at its exit whether it imported tiktoken
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('tiktoken' in sys.modules))\n"
    "from toolscout.cli import main; main(sys.argv[1:])"
)


def _index(tools: Path, db: Path) -> tuple[str, str]:
    argv = [sys.executable, "-c", PROBE, "index", str(tools), "--db", str(db)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[-1], proc.stderr


def _write(path: Path, big: str) -> Path:
    rows = [
        {"id": "big.tool", "name": "big_tool", "description": big, "parameters": {}},
        {"id": "small.tool", "name": "small_tool", "description": "Adds two numbers."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_reindex_reports_an_oversized_card_without_the_token_counter(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    tools = _write(tmp_path / "tools.jsonl", LONG)
    big = card_tokens(spec("big.tool", LONG).card)
    assert big > CARD_TOKEN_WARN
    warning = f"warning: card big.tool is {big} tokens (over {CARD_TOKEN_WARN}); shorten it"
    first_loaded, first = _index(tools, db)
    assert first_loaded == "True" and warning in first
    again_loaded, again = _index(tools, db)
    assert warning in again and "small.tool" not in again
    assert again_loaded == "False"  # every size was kept: no encoding was built
    longer = LONG + " And one more thing to do."
    _write(tools, longer)  # a changed card is counted again, with its new size
    changed_loaded, changed = _index(tools, db)
    n = card_tokens(spec("big.tool", longer).card)
    assert n > big and changed_loaded == "True"
    assert f"card big.tool is {n} tokens" in changed and f"is {big} tokens" not in changed


def test_sizes_are_counted_where_none_are_kept(tmp_path: Path) -> None:
    cards = [spec("a.big", LONG).card, spec("b.small", "Adds two numbers.").card]
    want = {c.id: card_tokens(c) for c in cards}
    assert cardsize.card_sizes(MemoryStore(), cards) == want  # a store without derived state
    with Catalog.open(tmp_path / "c.db", embedder=card_embedder(), log=False) as cat:
        cat.add([spec("a.big", LONG)])
        store = cat.store
        key = cardsize.size_key()
        kept = json.loads(store.derived(key)[1])  # type: ignore[attr-defined]
        assert list(kept.values()) == [want["a.big"]]
        assert cardsize.card_sizes(store, cards) == want
        assert sorted(json.loads(store.derived(key)[1]).values()) == sorted(want.values())  # type: ignore[attr-defined]
        generation = store.generation()
        store.set_derived(key, generation, b"{not json")  # type: ignore[attr-defined]
        assert cardsize.card_sizes(store, cards) == want  # damaged: counted again
        store.set_derived(key, generation, json.dumps({"x": -1}).encode())  # type: ignore[attr-defined]
        assert cardsize.card_sizes(store, cards) == want


def test_the_batch_sizes_are_kept_first_when_over_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cardsize, "KEPT_CAP", 3)
    blob = cardsize._blob({"old1": 1, "old2": 2, "new": 9}, {"new": 5, "b": 6})
    assert json.loads(blob) == {"old2": 2, "new": 5, "b": 6}
    monkeypatch.setattr(cardsize, "KEPT_CAP", 1)
    assert json.loads(cardsize._blob({"old1": 1}, {"new": 5, "b": 6})) == {"new": 5, "b": 6}
