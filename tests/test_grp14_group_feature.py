"""The ranker's optional "the request names this tool's group" column (features(group=True))."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.cards import CapabilityCard
from toolscout.discovery.calibrate import PRIOR, PRIOR_NONE, Calibration, check_prior
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.features import (
    FEATURES,
    GROUP_FEATURES,
    FieldTerms,
    features,
    group_terms,
    idf_of,
)
from toolscout.discovery.lexical import terms
from toolscout.discovery.search import CALIBRATION_META
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.stores.base import Hits

#: the group column's index: after FEATURES (no shape columns asked for)
GROUP_AT = len(FEATURES)

CARDS = [
    CapabilityCard("spotify.artist", "get artist", "Look up an artist.", group="Spotify Data"),
    CapabilityCard("spotify.album", "get album", "Look up an album.", group="Spotify Data"),
    CapabilityCard("deezer.artist", "get artist", "Look up an artist.", group="Deezer"),
    # the group is the first part of the name: nothing the name does not say
    CapabilityCard("Jar.run", "JarAgent.run", "Run the agent.", group="JarAgent"),
    CapabilityCard("plain.tool", "echo text", "Echo the text back."),
]


def _df(cards: list[CapabilityCard]) -> dict[str, int]:
    df: dict[str, int] = {}
    for card in cards:
        for t in set(terms(f"{card.name} {card.summary}")):
            df[t] = df.get(t, 0) + 1
    return df


def _matrix(query: str, ids: list[str]) -> tuple[list[str], np.ndarray, FieldTerms]:
    fields = FieldTerms.of(CARDS, group=True)
    idf = idf_of(_df(CARDS), len(CARDS))
    scores = [1.0 / (1 + i) for i in range(len(ids))]
    got, x = features(terms(query), Hits(ids, scores), Hits(ids, scores), fields, idf, group=True)
    return got, x, fields


def test_group_terms_are_the_groups_unless_the_name_holds_them_all() -> None:
    fields = FieldTerms.of(CARDS, group=True)
    assert fields.group["spotify.artist"] == frozenset(terms("Spotify Data"))
    assert fields.group["deezer.artist"] == frozenset(terms("Deezer"))
    assert "Jar.run" not in fields.group  # every group term is a name term
    assert "plain.tool" not in fields.group  # no group
    assert fields.in_group[terms("spotify")[0]] == {"spotify.artist", "spotify.album"}
    assert group_terms("", frozenset()) == frozenset()
    assert group_terms("Deezer music", frozenset(terms("deezer"))) == frozenset(
        terms("Deezer music")
    )


def test_the_default_fields_carry_no_group_terms() -> None:
    """Only a caller of the (off by default) column asks for group terms: the product's
    phrase index, like a kept one, has none, and costs nothing for them."""
    fields = FieldTerms.of(CARDS)
    assert not fields.group and not fields.in_group
    assert fields.name == FieldTerms.of(CARDS, group=True).name


def test_the_column_is_the_idf_share_of_the_group_named() -> None:
    ids = [c.id for c in CARDS]
    got, x, fields = _matrix("find the artist on spotify", ids)
    assert x.shape == (len(ids), len(FEATURES) + len(GROUP_FEATURES))
    col = {t: float(x[got.index(t), GROUP_AT]) for t in ids}
    idf = idf_of(_df(CARDS), len(CARDS))
    spotify, data = terms("spotify")[0], terms("data")[0]
    share = idf(spotify) / (idf(spotify) + idf(data))
    assert 0 < share < 1
    assert col["spotify.artist"] == pytest.approx(share)
    assert col["spotify.album"] == pytest.approx(share)  # the group, not the name
    assert col["deezer.artist"] == 0.0 and col["plain.tool"] == 0.0 and col["Jar.run"] == 0.0
    _, x2, _ = _matrix("spotify data artist", ids)
    assert x2[0, GROUP_AT] == pytest.approx(1.0)  # the whole group named
    # the other columns are the same numbers with and without the catalog's group terms
    hits = Hits(ids, [1.0 / (1 + i) for i in range(len(ids))])
    plain_ids, plain = features(terms("find the artist on spotify"), hits, hits, fields, idf)
    assert plain_ids == got and plain.shape[1] == len(FEATURES)
    assert np.array_equal(plain, x[:, : len(FEATURES)])


def test_only_pool_tools_get_the_column_and_no_group_named_is_all_zero() -> None:
    _, x, _ = _matrix("look up an artist", ["deezer.artist", "plain.tool"])
    assert not x[:, GROUP_AT].any()
    got, x, _ = _matrix("spotify", ["deezer.artist", "spotify.album"])
    assert got == ["deezer.artist", "spotify.album"]
    assert x[0, GROUP_AT] == 0.0 and 0 < x[1, GROUP_AT] <= 1 and math.isfinite(x[1, GROUP_AT])


def test_a_catalog_without_groups_reads_the_column_as_zero() -> None:
    cards = [CapabilityCard(c.id, c.name, c.summary) for c in CARDS]
    fields = FieldTerms.of(cards, group=True)
    assert not fields.group and not fields.in_group
    idf = idf_of(_df(cards), len(cards))
    ids = [c.id for c in cards]
    hits = Hits(ids, [1.0] * len(ids))
    _, x = features(terms("spotify data"), hits, hits, fields, idf, group=True)
    assert not x[:, GROUP_AT].any()


# -- a stored calibration of another width ---------------------------------------------------
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


def _older(raw: str) -> str:
    """The stored calibration as a version with one feature fewer wrote it."""
    d = json.loads(raw)
    d["weights"], d["prior"] = d["weights"][:-1], d["prior"][:-1]
    return json.dumps(d)


def test_a_stored_calibration_of_another_width_falls_back_and_is_refitted(
    tmp_path: Path,
) -> None:
    specs = [spec(tid, summary, group=group) for tid, summary, group in TOOLS]
    anyone = Principal.of("u", scopes=["*"])
    path = tmp_path / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add(specs)
        raw = cat.store.meta(CALIBRATION_META) or ""
        fitted = Calibration.from_json(raw)
        assert fitted is not None and fitted.fitted and len(fitted.weights) == len(FEATURES)
        cat.store.set_meta(CALIBRATION_META, _older(raw))
    assert Calibration.from_json(_older(raw)) is None
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        # read as none stored: the prior orders, nothing fails
        got = cat.discover("look up an artist on spotify", anyone, k=3)
        assert got.ids and got.ids[0].startswith("spotify.")
        cat.add(specs)  # nothing changed, but the stored one is unreadable: fitted again
        again = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
    assert again is not None and again.fitted and len(again.weights) == len(FEATURES)
    assert again.weights == fitted.weights  # seeded: the same catalog, the same fit


def test_a_prior_of_another_width_is_refused_by_name() -> None:
    cal = Calibration()
    short = len(FEATURES)  # one weight too few, then the bias
    with pytest.raises(ConfigError, match=f"the ranker's prior holds {short} values; expected one"):
        cal.weights_over((*PRIOR[:-1], PRIOR_NONE))
    assert cal.weights_over((*PRIOR, PRIOR_NONE)) == (PRIOR, PRIOR_NONE)
    with pytest.raises(ConfigError, match="one weight per feature"):
        check_prior(PRIOR, "x")
