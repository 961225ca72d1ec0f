"""A group's size as :meth:`FieldTerms.group_size` counts it: the divisor of round
twenty-one's "group_per_tool" column (screened by benchmarks/group_feature.py, measured
held out and in-set, not shipped: docs/history/calibration.md)."""

from __future__ import annotations

from toolscout.cards import CapabilityCard
from toolscout.discovery.features import FieldTerms
from toolscout.discovery.lexical import terms

CARDS = [
    CapabilityCard("spotify.artist", "get artist", "Look up an artist.", group="Spotify Data"),
    CapabilityCard("spotify.album", "get album", "Look up an album.", group="Spotify Data"),
    CapabilityCard("spotify.track", "get track", "Look up a track.", group="spotify  DATA"),
    CapabilityCard("deezer.artist", "get artist", "Look up an artist.", group="Deezer"),
    # the group is the first part of the name: nothing the name does not say
    CapabilityCard("Jar.run", "JarAgent.run", "Run the agent.", group="JarAgent"),
    CapabilityCard("plain.tool", "echo text", "Echo the text back."),
]


def test_a_groups_size_counts_the_tools_with_the_same_group_terms() -> None:
    fields = FieldTerms.of(CARDS, group=True)
    assert fields.group["spotify.track"] == frozenset(terms("Spotify Data"))
    sizes = {c.id: fields.group_size(c.id) for c in CARDS}
    assert sizes == {
        "spotify.artist": 3,  # the same terms, however the group is written
        "spotify.album": 3,
        "spotify.track": 3,
        "deezer.artist": 1,
        "Jar.run": 1,  # no group terms: the name holds them all
        "plain.tool": 1,  # no group
    }


def test_fields_without_group_terms_count_every_tool_alone() -> None:
    fields = FieldTerms.of(CARDS)  # the product's fields: no group terms
    assert not fields.group
    assert {fields.group_size(c.id) for c in CARDS} == {1}
    assert fields.group_size("not.a.tool") == 1
