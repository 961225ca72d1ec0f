"""The false-negative report: misses, second searches, feedback, suggestions, accept."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fork_kit import toolscout as fork_toolscout
from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.telemetry.log import DiscoveryLog
from toolscout.telemetry.report import (
    accept_alias,
    accept_confidence,
    alias_id,
    build_report,
    parse_age,
    report_for,
)

ROOT = Principal.of("root", "acme", scopes=["*"])
IDS = ["a.shown", "a.hidden", "a.second", "a.never"]


def synthetic(log: DiscoveryLog) -> None:
    """Two misses of a.hidden, a second search for a.second, feedback, one clean call."""
    d1 = log.record_discovery("u1", "acme", "cancel my plan", ["a.shown"], 0.9, 1.0)
    log.record_call("a.hidden", discovery_id=d1, ok=True)
    d2 = log.record_discovery("u2", "acme", "Cancel my  plan", ["a.shown"], 0.9, 1.0)
    log.record_call("a.hidden", discovery_id=d2, ok=True)
    d3 = log.record_discovery("u1", "acme", "show it", ["a.shown"], 0.9, 1.0)
    log.record_call("a.shown", discovery_id=d3, ok=True)
    # a conversation that searched twice before the call; the call names no discovery
    log.record_discovery("u3", "globex", "ping the crew", [], 0.1, 1.0, conversation="c9")
    log.record_discovery("u3", "globex", "notify team", ["a.second"], 0.8, 1.0, conversation="c9")
    log.record_call("a.second", discovery_id=None, ok=True, tenant="globex", conversation="c9")
    d5 = log.record_discovery("u4", "acme", "stop billing me", ["a.shown"], 0.3, 1.0)
    log.record_feedback(d5, "a.hidden")


def test_misses_second_searches_feedback_and_never_surfaced(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    synthetic(log)
    report = build_report(log, IDS, min_evidence=1)
    by = {t.tool_id: t for t in report.tools}
    assert report.tools[0].tool_id == "a.hidden"  # the most missed first
    hidden = by["a.hidden"]
    assert (hidden.needed, hidden.misses, hidden.feedback) == (3, 3, 1)
    assert hidden.queries[0].query == "cancel my plan" and hidden.queries[0].times == 2
    assert hidden.queries[0].shown_instead == ("a.shown",)
    assert (by["a.shown"].misses, by["a.shown"].needed) == (0, 1)
    second = by["a.second"]
    assert (second.misses, second.second_searches) == (0, 1)
    assert second.queries[0].query == "ping the crew"
    assert report.never_surfaced == ("a.hidden", "a.never")
    assert (report.low_confidence, report.zero_results) == (2, 1)
    assert report.misses == 3 and report.needed == 5
    # suggestions: per tenant, with evidence, most evidence first, stable ids
    top = report.suggestions[0]
    assert (top.tool_id, top.alias, top.times, top.subjects) == ("a.hidden", "cancel my plan", 2, 2)
    assert top.id == alias_id("acme", "a.hidden", "cancel my plan")
    assert {(s.tool_id, s.tenant) for s in report.suggestions} >= {("a.second", "globex")}
    again = build_report(log, IDS, aliases={"a.hidden": ["Cancel my plan"]})
    assert again.suggestions == ()  # already an alias; and one miss is not evidence enough
    only = build_report(log, IDS, tool="a.second")
    assert [t.tool_id for t in only.tools] == ["a.second"]
    assert json.loads(json.dumps(report.to_dict()))["tools"][0]["miss_rate"] == 1.0
    log.close()


@pytest.mark.parametrize("mode", ["hash", "none"])
def test_without_query_text_the_report_still_counts(tmp_path: Path, mode: str) -> None:
    log = DiscoveryLog(tmp_path / "log.db", query_log=mode)
    synthetic(log)
    report = build_report(log, IDS)
    hidden = next(t for t in report.tools if t.tool_id == "a.hidden")
    assert hidden.misses == 3 and report.suggestions == ()
    assert all(q.query is None for q in hidden.queries)
    if mode == "hash":  # the two phrasings of one query still group by their hash
        assert hidden.queries[0].times == 2 and hidden.queries[0].query_hash
    assert report.notes and mode in report.notes[0]
    log.close()
    # read back by a reader with the default setting, the report still says what was kept
    reader = DiscoveryLog(tmp_path / "log.db")
    assert build_report(reader, IDS).query_log == mode
    reader.close()


def test_parse_age() -> None:
    assert parse_age("7d") == 7 * 86400 and parse_age("12h") == 43200 and parse_age("2") == 172800
    assert parse_age("30m") == 1800 and parse_age("1w") == 604800
    for bad in ("soon", "-3d", "inf", ""):
        with pytest.raises(ConfigError, match="is not an age"):
            parse_age(bad)


@pytest.fixture()
def shop(tmp_path: Path) -> Path:
    db = tmp_path / "shop.db"
    with Catalog.open(db, embedder=embedder()) as catalog:
        catalog.add(
            [
                spec("shop.track_parcel", "Show carrier scan events for a shipment."),
                spec("shop.refund", "Refund an order to the original payment method."),
                spec("shop.invoice", "Create an invoice for a customer."),
                spec("shop.weather", "Get the weather forecast for a city."),
            ]
        )
        assert catalog.log is not None
        for who in ("u1", "u2"):
            s = catalog.discover(
                "the order I paid for is lost somewhere", ROOT, k=1, tier="progressive"
            )
            assert "shop.track_parcel" not in s.ids  # the search misses it ...
            catalog.log.record_call("shop.track_parcel", discovery_id=s.discovery_id, ok=True,
                                    subject=who, tenant="acme")  # fmt: skip
    return db


def test_accepting_a_suggestion_writes_the_alias_into_the_card(shop: Path) -> None:
    with Catalog.open(shop, embedder=embedder()) as catalog:
        report = report_for(catalog)
        (sugg,) = report.suggestions
        lost = "the order I paid for is lost somewhere"
        assert (sugg.tool_id, sugg.alias, sugg.times) == ("shop.track_parcel", lost, 2)
        done = accept_alias(catalog, sugg.id)
        assert done.embedded == 1  # only the new alias was embedded
        assert (
            "the order I paid for is lost somewhere"
            in catalog.get("shop.track_parcel").card.aliases
        )
        after = catalog.discover(
            "the order I paid for is lost somewhere", ROOT, k=1, tier="progressive"
        )
        assert after.ids == ["shop.track_parcel"]  # ... and now finds it
        assert catalog.log is not None
        (accepted,) = catalog.log.accepted()
        assert accepted["source"] == "usage-report" and accepted["evidence"]["times"] == 2
        assert report_for(catalog).suggestions == ()  # no longer suggested
        with pytest.raises(ConfigError, match="no alias suggestion"):
            accept_alias(catalog, sugg.id)


def report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    argv = fork_toolscout("report", *args)
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def test_report_from_the_shell(shop: Path) -> None:
    proc = report_cli("--db", str(shop), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["tools"][0]["tool_id"] == "shop.track_parcel" and data["misses"] == 2
    sugg = data["suggestions"][0]["id"]
    text = report_cli("--db", str(shop), "--since", "1h")
    assert "shop.track_parcel: 2/2 missed (100%)" in text.stdout and sugg in text.stdout
    accepted = report_cli("--db", str(shop), "--accept", sugg)
    assert accepted.returncode == 0 and "now has the alias" in accepted.stdout, accepted.stderr
    for args, fragment in (
        (("--accept", "nope"), "no alias suggestion 'nope'"),
        (("--since", "soon"), "is not an age"),
        (("--tool", "no.such"), "unknown tool id 'no.such'"),
    ):
        proc = report_cli("--db", str(shop), *args)
        assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
        assert fragment in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    missing = report_cli("--db", str(shop.parent / "missing.db"))
    assert missing.returncode == 2 and "no catalog at" in missing.stderr


def test_confidence_against_outcomes(tmp_path: Path) -> None:
    """Discoveries reported at 0.8 whose first tool was used one time in four: the check
    shows it per band and proposes a correction down; too few outcomes propose none."""
    log = DiscoveryLog(tmp_path / "log.db")
    for i in range(40):
        d = log.record_discovery("u1", "acme", f"q{i}", ["a.shown", "a.hidden"], 0.8, 1.0)
        log.record_call("a.shown" if i % 4 == 0 else "a.hidden", discovery_id=d, ok=True)
    for i in range(10):  # low confidence, and right every time
        d = log.record_discovery("u1", "acme", f"low{i}", ["a.second"], 0.2, 1.0)
        log.record_call("a.second", discovery_id=d, ok=True)
    log.record_discovery("u1", "acme", "no outcome", ["a.shown"], 0.9, 1.0)  # not counted
    d = log.record_discovery("u1", "acme", "all shown", IDS, 1.0, 1.0)  # the tier rule's 1.0
    log.record_call("a.never", discovery_id=d, ok=True)  # ... is not an estimate: not counted
    log.record_discovery("u1", "acme", "nothing shown", [], 0.0, 1.0)
    check = build_report(log, IDS).confidence
    assert check is not None and check.outcomes == 50
    bands = {(b.low, b.high): b for b in check.bands}
    assert (bands[(0.8, 1.0)].discoveries, bands[(0.8, 1.0)].right_first) == (40, 0.25)
    assert (bands[(0.0, 0.3)].discoveries, bands[(0.0, 0.3)].right_first) == (10, 1.0)
    assert check.shift is not None and check.shift < -0.5
    assert json.loads(json.dumps(build_report(log, IDS).to_dict()))["confidence"]["outcomes"] == 50
    # only the outcomes since the last correction count: none after now
    later = build_report(log, IDS, confidence_since=1e12).confidence
    assert later is not None and (later.outcomes, later.shift) == (0, None)
    log.close()


def test_accepting_the_confidence_correction(shop: Path) -> None:
    """Thirty refund requests after which the caller used the invoice tool: the stored
    correction lowers what later discoveries report, and another process sees it."""
    with Catalog.open(shop, embedder=embedder()) as catalog:
        assert catalog.log is not None
        with pytest.raises(ConfigError, match="30 are needed"):
            accept_confidence(catalog)  # two outcomes in the log so far
        before = catalog.discover("refund my order", ROOT, k=2, tier="progressive")
        assert before.ids[0] == "shop.refund"
        for _ in range(30):
            s = catalog.discover("refund my order", ROOT, k=2, tier="progressive")
            catalog.log.record_call("shop.invoice", discovery_id=s.discovery_id, ok=True)
        catalog.log.flush()
        check = report_for(catalog).confidence
        assert check is not None and check.outcomes == 32 and check.shift is not None
        assert check.shift < 0
        with Catalog.open(shop, embedder=embedder()) as other:  # e.g. a running gateway
            assert other.confidence_shift.shift == 0.0
            done = accept_confidence(catalog)
            assert done.shift == pytest.approx(check.shift) and done.outcomes == 32
            later = other.discover("refund my order", ROOT, k=2, tier="progressive")
            assert later.ids == before.ids  # the order never moves
            assert later.confidence < before.confidence - 0.1
        # the outcomes it was fitted on are not read again
        again = report_for(catalog).confidence
        assert again is not None and again.outcomes == 0
        for bad in (float("nan"), 9.0):
            with pytest.raises(ConfigError, match="confidence shift"):
                catalog.set_confidence_shift(bad)
        assert catalog.confidence_shift.shift == pytest.approx(check.shift)  # kept
        catalog.set_confidence_shift(0.0)
        reset = catalog.discover("refund my order", ROOT, k=2, tier="progressive")
        assert reset.confidence == pytest.approx(before.confidence)


def test_confidence_correction_from_the_shell(shop: Path) -> None:
    few = report_cli("--db", str(shop), "--accept-confidence")
    assert few.returncode == 2 and "30 are needed" in few.stderr, few.stderr
    with Catalog.open(shop, embedder=embedder()) as catalog:
        assert catalog.log is not None
        for _ in range(30):
            s = catalog.discover("refund my order", ROOT, k=2, tier="progressive")
            catalog.log.record_call("shop.invoice", discovery_id=s.discovery_id, ok=True)
    text = report_cli("--db", str(shop))
    assert "confidence against outcomes (32 discoveries" in text.stdout, text.stdout
    assert "correction that fits: -" in text.stdout
    done = report_cli("--db", str(shop), "--accept-confidence")
    assert done.returncode == 0 and "confidence correction +0.00 -> -" in done.stdout, done.stderr
    both = report_cli("--db", str(shop), "--accept-confidence", "--reset-confidence")
    assert both.returncode == 2 and "exclude each other" in both.stderr
    reset = report_cli("--db", str(shop), "--reset-confidence")
    assert reset.returncode == 0 and "removed" in reset.stdout
    with Catalog.open(shop, embedder=embedder()) as catalog:
        assert catalog.confidence_shift.shift == 0.0


# --------------------------------------------------------------------------- relatedness

GIT_AND_TIME = [
    ("git.status", "Show the working tree status: staged, unstaged and untracked files."),
    ("git.diff", "Show the changes between the working tree and the index or a commit."),
    ("git.log", "Show the commit history of the current branch."),
    ("git.commit", "Record staged changes to the repository with a message."),
    ("git.branch", "List, create or delete branches."),
    ("git.checkout", "Switch branches or restore working tree files."),
    ("time.current", "Get the current time in a given IANA timezone or city."),
    ("time.convert", "Convert a time between two timezones."),
] + [
    (f"misc.{name}", f"{summary}")
    for name, summary in [
        ("weather", "Get the weather forecast for a city."),
        ("translate", "Translate text between languages."),
        ("calendar", "Create a calendar event with attendees."),
        ("email", "Send an email to a recipient."),
        ("invoice", "Create an invoice for a customer."),
        ("refund", "Refund an order to the original payment method."),
        ("parcel", "Show carrier scan events for a shipment."),
        ("stock", "Get the latest price of a stock ticker."),
        ("news", "Search recent news articles by keyword."),
        ("maps", "Get driving directions between two places."),
        ("currency", "Convert an amount between two currencies."),
        ("dictionary", "Look up the definition of an English word."),
        ("recipe", "Find recipes by ingredient."),
        ("flight", "Check the status of a flight by its number."),
        ("hotel", "Search hotels in a city for given dates."),
        ("reminder", "Set a reminder at a given time."),
        ("timer", "Start a countdown timer."),
        ("alarm", "Set an alarm clock for the morning."),
        ("holiday", "List the public holidays of a country."),
        ("sunrise", "Get sunrise and sunset times for a place."),
        ("population", "Get the population of a city or country."),
        ("wiki", "Summarise a Wikipedia article."),
        ("pdf", "Extract the text of a PDF document."),
        ("image", "Resize an image to given dimensions."),
        ("qr", "Generate a QR code for a URL."),
        ("password", "Generate a strong random password."),
        ("dns", "Look up the DNS records of a domain."),
        ("ping", "Check whether a host answers to ping."),
        ("crm", "Find a customer contact by name or email."),
        ("ticket", "Open a support ticket for a customer."),
        ("payroll", "Run payroll for the employees of a company."),
        ("expense", "Submit an expense report with receipts."),
        ("music", "Play a song by its title."),
        ("podcast", "Search podcast episodes by topic."),
        ("movie", "Find showtimes for a movie in a cinema near you."),
        ("sports", "Get the latest score of a football match."),
        ("lottery", "Check the winning lottery numbers."),
    ]
]


def test_one_callers_unrelated_query_is_not_suggested_as_an_alias(tmp_path: Path) -> None:
    """`git.status += 'what time is it in Tokyo'` came from one caller who asked the time
    and then ran git status: neither several discoveries nor related to the tool."""
    db = tmp_path / "mcp.db"
    with Catalog.open(db, embedder=embedder()) as catalog:
        catalog.add([spec(tid, summary) for tid, summary in GIT_AND_TIME])
        log = catalog.log
        assert log is not None

        def missed(query: str, who: str, tool: str) -> None:
            s = catalog.discover(query, ROOT, k=1, tier="progressive")
            assert tool not in s.ids, (query, s.ids)
            log.record_call(tool, discovery_id=s.discovery_id, ok=True, subject=who,
                            tenant="acme")  # fmt: skip

        missed("what time is it in Tokyo", "u1", "git.status")
        one = report_for(catalog)
        assert one.suggestions == ()  # one discovery of one caller: not evidence enough
        assert report_for(catalog, min_evidence=1).suggestions == ()  # and not related
        missed("what time is it in Tokyo", "u1", "git.status")
        missed("what time is it in Tokyo", "u2", "git.status")
        assert report_for(catalog).suggestions == ()  # repeated, still not about git
        related = "is my repo clean"
        missed(related, "u1", "git.status")
        missed(related, "u2", "git.status")
        (sugg,) = report_for(catalog).suggestions
        assert (sugg.tool_id, sugg.alias, sugg.times) == ("git.status", related, 2)
        assert sugg.rank is not None and 1 <= sugg.rank <= 20
        assert sugg.to_dict()["evidence"]["rank"] == sugg.rank
        proc = report_cli("--db", str(db), "--since", "1h")
        assert f"evidence: 2 missed discoveries from 1 caller, ranks it #{sugg.rank}" in (
            proc.stdout
        ), proc.stdout + proc.stderr
        assert "Tokyo" not in proc.stdout.split("alias suggestions")[-1]
