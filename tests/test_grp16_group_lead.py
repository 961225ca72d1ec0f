"""The ranker's "group_lead" column: a long request names the tool's group, and that group
leads the pool by the fixed fusion; the kept phrase index keeps the group terms it reads,
and state kept by a version without them is not served."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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
    FIXED_FUSION,
    GROUP_FEATURES,
    GROUP_LEAD_AT,
    GROUP_MIN_TERMS,
    FieldTerms,
    features,
    idf_of,
)
from toolscout.discovery.kept import KeptMap, keep_maps, read_maps
from toolscout.discovery.keptparts import PHRASE_KINDS
from toolscout.discovery.lexical import terms
from toolscout.discovery.parts import MIN_TERMS
from toolscout.discovery.ranker import FIXED_MIX
from toolscout.discovery.search import CALIBRATION_META
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.stores.base import Hits
from toolscout.stores.sqlite import SQLiteStore

CARDS = [
    CapabilityCard("spotify.artist", "get artist", "Look up an artist.", group="Spotify Data"),
    CapabilityCard("spotify.album", "get album", "Look up an album.", group="Spotify Data"),
    CapabilityCard("deezer.artist", "get artist", "Look up an artist.", group="Deezer"),
    # the group is the first part of the name: nothing the name does not say
    CapabilityCard("Jar.run", "JarAgent.run", "Run the agent.", group="JarAgent"),
    CapabilityCard("plain.tool", "echo text", "Echo the text back."),
]
IDS = [c.id for c in CARDS]
#: content words a request pads itself with to be long (none is a term of any card)
CONTEXT = "planning birthday party friends weekend budget cheerful playlist evening guests"


def _idf(cards: Sequence[CapabilityCard]) -> Callable[[str], float]:
    df: dict[str, int] = {}
    for card in cards:
        for t in set(terms(f"{card.name} {card.summary}")):
            df[t] = df.get(t, 0) + 1
    return idf_of(df, len(cards))


def _matrix(
    query: str, lead: str = "spotify.artist", cards: Sequence[CapabilityCard] = CARDS
) -> tuple[list[str], np.ndarray]:
    """Every card in the pool, ``lead`` first in both lists (the pool's best by the fixed
    fusion), the rest at falling scores; the plain group column appended last."""
    fields = FieldTerms.of(cards)
    ids = [lead, *(c.id for c in cards if c.id != lead)]
    hits = Hits(ids, [1.0 / (1 + i) for i in range(len(ids))])
    return features(terms(query), hits, hits, fields, _idf(cards), group=True)


def _col(got: list[str], x: np.ndarray) -> dict[str, float]:
    return {t: float(x[got.index(t), GROUP_LEAD_AT]) for t in got}


def test_the_column_is_read_by_the_default_ranker_and_is_the_last_feature() -> None:
    assert FEATURES[GROUP_LEAD_AT] == "group_lead" == FEATURES[-1]
    assert len(PRIOR) == len(FEATURES)
    assert "group" not in FEATURES and GROUP_FEATURES == ("group",)
    assert GROUP_MIN_TERMS == MIN_TERMS  # the length the default reads a request in parts
    # the lead is read by the ranker's own fixed fusion
    assert dict(zip(FEATURES, FIXED_MIX, strict=True)) == {
        f: FIXED_FUSION.get(f, 0.0) for f in FEATURES
    }


def test_a_long_request_naming_the_leading_group_reads_the_plain_share() -> None:
    query = f"find the artist on spotify for the {CONTEXT}"
    assert len(set(terms(query))) >= GROUP_MIN_TERMS
    got, x = _matrix(query)
    col, plain = _col(got, x), x[:, -1]
    assert 0 < plain[got.index("spotify.artist")] < 1
    # every tool of the leading group, not only its best, at the plain share
    for t in ("spotify.artist", "spotify.album"):
        assert col[t] == pytest.approx(plain[got.index(t)])
    assert col["deezer.artist"] == col["Jar.run"] == col["plain.tool"] == 0.0


def test_a_short_request_reads_zero_even_when_it_names_the_group() -> None:
    query = "find the artist on spotify"
    assert len(set(terms(query))) < GROUP_MIN_TERMS
    _, x = _matrix(query)
    assert x[:, -1].any()  # the plain share is there
    assert not x[:, GROUP_LEAD_AT].any()


def test_a_named_group_that_does_not_lead_the_pool_reads_zero() -> None:
    query = f"find the artist on spotify or deezer for the {CONTEXT}"
    got, x = _matrix(query, lead="deezer.artist")
    col, plain = _col(got, x), x[:, -1]
    assert plain[got.index("spotify.artist")] > 0 and plain[got.index("deezer.artist")] > 0
    assert col["deezer.artist"] == pytest.approx(plain[got.index("deezer.artist")])
    assert col["spotify.artist"] == col["spotify.album"] == 0.0  # named, behind Deezer
    # a tool of no group leads: no named group leads
    _, x = _matrix(query, lead="plain.tool")
    assert not x[:, GROUP_LEAD_AT].any()


def test_no_group_named_or_no_groups_reads_zero() -> None:
    _, x = _matrix(f"look up an album for the {CONTEXT}")
    assert not x[:, GROUP_LEAD_AT].any()
    bare = [CapabilityCard(c.id, c.name, c.summary) for c in CARDS]
    _, x = _matrix(f"spotify data deezer for the {CONTEXT}", cards=bare)
    assert not x[:, GROUP_LEAD_AT].any()


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
    tmp_path: Path,
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
        again.wait_kept()
    store = SQLiteStore(db)
    kept = read_maps(store, key, generation, PHRASE_KINDS, lambda p: {})
    assert kept is not None and kept[0]["group"]["mail.send"] == frozenset(terms("Mailgun"))
    store.close()
    with Catalog.open(db, embedder=embedder(), log=False) as third:  # read per key now
        fields = third.phrases().fields
        assert isinstance(fields.group, KeptMap)
        assert fields.in_group[terms("Mailgun")[0]] == {"mail.send", "mail.search"}
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
