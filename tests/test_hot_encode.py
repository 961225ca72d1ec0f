"""The request path's shortcuts give what the longer way gives (round nine, h/hot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.inject import FORMATS
from toolscout.discovery.tokencount import count_json
from toolscout.policy import Principal

TEXTS = [
    "kill the stuck job",
    "Translate 'bonjour' to English, then book a table for two at 8pm.",
    "x " * 200 + "restart the payments pod",  # past the 128-token truncation
    "émigré café naïve résumé",
]


@pytest.mark.parametrize("text", TEXTS)
def test_one_text_is_tokenised_as_it_is_in_a_batch(text: str) -> None:
    enc = embedder()
    enc.load()
    alone = enc._tokenize([text])
    batched = enc._tokenize([text, "another text of another length"])
    assert len(alone) == 1
    assert alone[0].ids == batched[0].ids
    assert alone[0].attention_mask == batched[0].attention_mask


def test_the_injected_count_is_the_shown_schemas_count_in_every_format(tmp_path: Path) -> None:
    specs = [
        spec(f"svc.tool_{i}", f"Looks up record kind {i} by its number.", name=f"tool_{i}")
        for i in range(12)
    ]
    specs.append(
        spec(
            "svc.search_orders",
            "Search orders by customer, date range or status.",
            name="search_orders",
            parameters={
                "type": "object",
                "properties": {
                    "customer": {"type": "string", "description": "the customer's id"},
                    "limit": {"type": "integer", "default": 20, "maximum": 1e3},
                    "ratio": {"type": "number", "default": 0.1},
                    "note": {"type": "string", "description": "naïve « quoted » text"},
                },
                "required": ["customer"],
            },
        )
    )
    who = Principal.of("u", scopes=["*"])
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(specs)
        for fmt in FORMATS:
            got = cat.discover("search orders of a customer", who, k=5, fmt=fmt, tier="progressive")
            assert got.schemas and "svc.search_orders" in got.ids
            assert got.tokens.injected == count_json(list(got.schemas)), fmt
