"""A tool's group (its server, service or class) in what it is found by: the tags lexical
field and the card views that join the name to the summary (issue 23, round nineteen), and
a catalog indexed before the change derived again on its next ``add``."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.discovery import indexing
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.indexing import card_views, group_text, lexical_fields
from toolscout.discovery.lexical import terms

PARAMS = {"type": "object", "properties": {"artist": {"type": "string", "description": "who"}}}


def test_the_group_is_a_tag_and_leads_the_views_that_join_name_and_summary() -> None:
    tool = spec(
        "svc.get_artist",
        "Returns an artist's albums.",
        name="Get artist",
        group="Spotify Data API",
        tags=["music"],
        parameters=PARAMS,
    )
    fields = lexical_fields(tool)
    assert fields["tags"].split() == [*terms("music"), *terms("Spotify Data API")]
    for field in ("name", "summary", "params"):
        assert "spotifi" not in fields[field].split() and "spotify" not in fields[field].split()
    views = card_views(tool)
    # the bare name and the bare summary stay as they were; both joined views lead with it
    assert views[:2] == ("get artist", "Returns an artist's albums.")
    assert views[2] == "spotify data api: get artist: Returns an artist's albums."
    assert views[3].startswith("spotify data api: get artist: Returns an artist's albums.")
    assert views[3].endswith("Parameters: artist: who")


def test_no_group_or_a_group_the_name_already_says_changes_nothing() -> None:
    bare = spec("svc.get_artist", "Returns an artist's albums.", name="Get artist")
    assert group_text(bare) == ""
    assert card_views(bare)[2] == "get artist: Returns an artist's albums."
    assert lexical_fields(bare)["tags"] == ""
    # bfcl's classes: the group is the name's first part, said once already
    named = spec(
        "bfcl.x", "Runs the agent.", name="AbstractJarAgent.runJarAgent", group="AbstractJarAgent"
    )
    assert group_text(named) == ""
    assert card_views(named)[2] == "abstract jar agent run jar agent: Runs the agent."
    assert lexical_fields(named)["tags"] == ""
    # a group of punctuation only says nothing
    assert group_text(spec("svc.y", "Does y.", name="y", group=" :: ")) == ""
    # a group with one word the name lacks is said whole
    assert group_text(spec("gh.x", "Opens an issue.", name="open issue", group="github issue")) == (
        "github issue"
    )


def _group_hits(cat: Catalog) -> list[str]:
    allowed = {t.id for t in cat.specs()}
    return sorted(cat.store.lexical(terms("spotify"), allowed, 10, weights={"tags": 1.0}).ids)


def test_a_catalog_indexed_before_the_group_was_indexed_is_derived_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored tools of the previous index version (no group anywhere) are re-derived by
    the next add of the same specs, since INDEX_VERSION is part of their source digest;
    without the bump they would be taken as unchanged and keep their old fields."""
    specs = [
        spec("sp.artist", "Returns an artist's albums.", name="Get artist", group="Spotify"),
        spec("sp.track", "Returns a track's length.", name="Get track", group="Spotify"),
        spec("wx.now", "Returns the weather now.", name="Weather now", group="Open Meteo"),
    ]
    path = tmp_path / "g.db"
    with monkeypatch.context() as old:
        old.setattr(indexing, "INDEX_VERSION", 2)  # the version before the group was indexed
        old.setattr(indexing, "group_text", lambda s: "")
        with Catalog.open(path, embedder=embedder(), log=False) as cat:
            cat.add(specs)
            assert _group_hits(cat) == []
            # the same version again: nothing to derive
            assert cat.add(specs).stats.unchanged == 3
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        report = cat.add(specs)
        assert report.stats.updated == 3 and report.stats.unchanged == 0
        assert _group_hits(cat) == ["sp.artist", "sp.track"]
        assert cat.add(specs).stats.unchanged == 3
