"""The ranker's "group_per_tool" column: the request names the tool's group, the share
divided by how many of the catalog's tools have that group; the kept phrase index keeps
the group terms it reads, and state kept by a version without them is not served."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery import keptparts
from toolscout.discovery.calibrate import PRIOR, PRIOR_NONE, Calibration, check_prior
from toolscout.discovery.catalog import Catalog, _kept_key
from toolscout.discovery.features import (
    FEATURES,
    GROUP_FEATURES,
    GROUP_PER_TOOL_AT,
    FieldTerms,
    features,
    idf_of,
)
from toolscout.discovery.kept import KeptMap, keep_maps, read_maps
from toolscout.discovery.keptparts import PHRASE_KINDS
from toolscout.discovery.lexical import terms
from toolscout.discovery.search import CALIBRATION_META
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.stores.base import Hits
from toolscout.stores.sqlite import SQLiteStore

CARDS = [
    CapabilityCard("spotify.artist", "get artist", "Look up an artist.", group="Spotify Data"),
    CapabilityCard("spotify.album", "get album", "Look up an album.", group="Spotify Data"),
    CapabilityCard("spotify.track", "get track", "Look up a track.", group="Spotify Data"),
    CapabilityCard("deezer.artist", "get artist", "Look up an artist.", group="Deezer"),
    # the group is the first part of the name: nothing the name does not say
    CapabilityCard("Jar.run", "JarAgent.run", "Run the agent.", group="JarAgent"),
    CapabilityCard("plain.tool", "echo text", "Echo the text back."),
]
IDS = [c.id for c in CARDS]


def _idf(cards: list[CapabilityCard]) -> Callable[[str], float]:
    df: dict[str, int] = {}
    for card in cards:
        for t in set(terms(f"{card.name} {card.summary}")):
            df[t] = df.get(t, 0) + 1
    return idf_of(df, len(cards))


def _matrix(query: str, cards: list[CapabilityCard] = CARDS) -> tuple[list[str], np.ndarray]:
    """The pool of every card, with the plain group column appended last (group=True)."""
    fields = FieldTerms.of(cards)
    ids = [c.id for c in cards]
    hits = Hits(ids, [1.0 / (1 + i) for i in range(len(ids))])
    return features(terms(query), hits, hits, fields, _idf(cards), group=True)


def test_the_column_is_read_by_the_default_ranker_and_is_the_last_feature() -> None:
    assert FEATURES[GROUP_PER_TOOL_AT] == "group_per_tool" == FEATURES[-1]
    assert len(PRIOR) == len(FEATURES)
    assert "group" not in FEATURES and GROUP_FEATURES == ("group",)


def test_a_groups_size_counts_the_tools_with_the_same_group_terms() -> None:
    fields = FieldTerms.of(CARDS)  # the product's fields carry the group terms
    assert fields.group["spotify.artist"] == frozenset(terms("Spotify Data"))
    sizes = {t: fields.group_size(t) for t in IDS}
    assert sizes == {
        "spotify.artist": 3,
        "spotify.album": 3,
        "spotify.track": 3,
        "deezer.artist": 1,
        "Jar.run": 1,  # no group terms: the name holds them all
        "plain.tool": 1,  # no group
    }
    assert FieldTerms.of(CARDS, group=False).group == {}
    assert FieldTerms.of(CARDS, group=False).group_size("spotify.artist") == 1


def test_the_column_is_the_group_share_divided_by_the_groups_size() -> None:
    got, x = _matrix("find the artist on spotify")
    assert got == IDS and x.shape == (len(IDS), len(FEATURES) + len(GROUP_FEATURES))
    plain = x[:, -1]  # the plain share: round twenty's option
    per_tool = x[:, GROUP_PER_TOOL_AT]
    assert 0 < plain[0] < 1
    for i in range(3):  # the three Spotify tools: a third of the share each
        assert per_tool[i] == pytest.approx(plain[i] / 3)
    assert per_tool[3:].tolist() == [0.0, 0.0, 0.0]  # Deezer not named; no group terms
    _, x = _matrix("an artist on deezer")
    assert x[3, GROUP_PER_TOOL_AT] == pytest.approx(1.0)  # a group of one, wholly named
    assert not x[:3, GROUP_PER_TOOL_AT].any()


def test_no_group_named_or_no_groups_reads_zero() -> None:
    _, x = _matrix("look up an album")
    assert not x[:, GROUP_PER_TOOL_AT].any()
    bare = [CapabilityCard(c.id, c.name, c.summary) for c in CARDS]
    _, x = _matrix("spotify data deezer", bare)
    assert not x[:, GROUP_PER_TOOL_AT].any()


# -- kept state and stored calibrations of the version before the column ----------------------
TOOLS = [
    ("spotify.artist", "Look up an artist's profile and genres.", "Spotify Data"),
    ("spotify.album", "List the tracks of an album.", "Spotify Data"),
    ("spotify.playlist", "Create a playlist from a list of tracks.", "Spotify Data"),
    ("weather.forecast", "Weather forecast for a city: rain and wind by day.", "OpenWeather"),
    ("weather.alerts", "Severe weather warnings issued for a region.", "OpenWeather"),
    ("mail.send", "Send an email message to one or more recipients.", "Mailgun"),
    ("mail.search", "Search the mailbox for messages by sender or subject.", "Mailgun"),
    ("maps.directions", "Driving or walking directions between two addresses.", "Mapbox"),
    ("maps.geocode", "Latitude and longitude of a street address.", "Mapbox"),
    ("files.upload", "Upload a document to cloud storage and get a share link.", "Dropbox"),
    ("files.search", "Find stored documents by name or content.", "Dropbox"),
    ("tickets.open", "Open a support ticket describing a customer's problem.", "Zendesk"),
    ("tickets.close", "Close a resolved support ticket with a note.", "Zendesk"),
    ("orders.track", "Where a customer's parcel is and when it will arrive.", "Shopify"),
]
ANYONE = Principal.of("u", scopes=["*"])


def _specs() -> list[ToolSpec]:
    return [spec(tid, summary, group=group) for tid, summary, group in TOOLS]


def test_an_older_kept_phrase_index_without_group_terms_is_derived_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version before the column kept its phrase index without the "group" and
    "in_group" parts (under its own key): a new process does not serve it, it derives
    the index again with the group terms and keeps that."""
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=embedder(), log=False) as first:
        first.add(_specs())
        asked = first.discover("weather on openweather", ANYONE, k=3).ids
        first.wait_kept()
    store = SQLiteStore(db)
    key, generation = _kept_key("phrase-index"), store.generation()
    found = read_maps(store, key, generation, PHRASE_KINDS, lambda p: {})
    assert found is not None and set(found[0]) == set(PHRASE_KINDS)
    old = {p: (k, dict(found[0][p]) if k != "flag" else set(found[0][p]))
           for p, k in PHRASE_KINDS.items() if p not in ("group", "in_group")}  # fmt: skip
    assert keep_maps(store, "phrase-index:older-version0", generation, old)
    # this version's own rows gone (a header that is not one of ours): only the older ones
    store.set_derived_rows(key, generation, b"gone", "gone", {})
    assert read_maps(store, key, generation, PHRASE_KINDS, lambda p: {}) is None
    store.close()
    with Catalog.open(db, embedder=embedder(), log=False) as again:
        assert again.discover("weather on openweather", ANYONE, k=3).ids == asked
        fields = again.phrases().fields
        assert not isinstance(fields.group, KeptMap)  # derived here, not the older rows
        assert fields.group["weather.alerts"] == frozenset(terms("OpenWeather"))
        assert fields.group_size("spotify.album") == 3
        again.wait_kept()
    store = SQLiteStore(db)
    kept = read_maps(store, key, generation, PHRASE_KINDS, lambda p: {})
    assert kept is not None and kept[0]["group"]["mail.send"] == frozenset(terms("Mailgun"))
    store.close()
    with Catalog.open(db, embedder=embedder(), log=False) as third:  # read per key now
        fields = third.phrases().fields
        assert isinstance(fields.group, KeptMap)
        assert fields.group_size("spotify.album") == 3
        assert third.discover("weather on openweather", ANYONE, k=3).ids == asked
    assert keptparts.PHRASE_KINDS["group"] == keptparts.PHRASE_KINDS["in_group"] == "set"


def _narrower(raw: str) -> str:
    """The stored calibration as the version before the column wrote it (one weight less)."""
    d = json.loads(raw)
    d["weights"], d["prior"] = d["weights"][:-1], d["prior"][:-1]
    return json.dumps(d)


def test_a_stored_calibration_without_the_column_is_refitted(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        raw = cat.store.meta(CALIBRATION_META) or ""
        fitted = Calibration.from_json(raw)
        assert fitted is not None and fitted.fitted and len(fitted.weights) == len(FEATURES)
        cat.store.set_meta(CALIBRATION_META, _narrower(raw))
    assert Calibration.from_json(_narrower(raw)) is None
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        assert cat.discover("list the tracks of an album", ANYONE, k=3).ids  # the prior orders
        cat.add(_specs())  # unchanged, but the stored calibration is unreadable: fitted again
        again = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
    assert again is not None and again.fitted and len(again.weights) == len(FEATURES)
    assert again.weights == fitted.weights


def test_a_prior_of_the_older_width_is_refused_by_name() -> None:
    older = (*PRIOR[:-1], PRIOR_NONE)  # the version before the column's prior
    with pytest.raises(ConfigError, match="expected one"):
        Calibration().weights_over(older)
    with pytest.raises(ConfigError, match="one weight per feature"):
        check_prior(older, "ranker_prior")
