"""Per-catalog calibration: pseudo-queries, the fit, storage, and honest confidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.discovery.calibrate import (
    FEATURES,
    FIXED_MIX,
    LEAD,
    LONG_TERMS,
    PRIOR,
    PRIOR_NONE,
    RARE_CAP,
    SHAPE_FEATURES,
    VERSION,
    Calibration,
    Example,
    FieldTerms,
    Ranker,
    blended,
    features,
    fit,
    idf_of,
    leads_lexical,
    platt,
    pseudo_queries,
    scores,
    stale,
    top_probability,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.lexical import terms, words
from toolscout.discovery.search import CALIBRATION_META
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

SUBJECTS = [
    ("weather.forecast", "Weather forecast for a city: rain, temperature and wind by day."),
    ("weather.alerts", "Severe weather warnings issued for a region."),
    ("currency.convert", "Convert an amount of money between two currencies at today's rate."),
    ("stocks.quote", "Latest share price and daily change of a listed company."),
    ("maps.directions", "Driving, walking or transit directions between two addresses."),
    ("maps.geocode", "Latitude and longitude of a street address."),
    ("mail.send", "Send an email message to one or more recipients."),
    ("mail.search", "Search the mailbox for messages matching sender or subject."),
    ("calendar.create_event", "Create a calendar event with attendees and a time slot."),
    ("calendar.free_busy", "Find free time slots shared by several people."),
    ("files.upload", "Upload a document to cloud storage and get a share link."),
    ("files.search", "Find stored documents by name or content."),
    ("tickets.open", "Open a support ticket describing a customer's problem."),
    ("tickets.close", "Close a resolved support ticket with a resolution note."),
    ("orders.track", "Where a customer's parcel is and when it will arrive."),
    ("orders.refund", "Refund a customer's order payment in full or in part."),
    ("hr.leave_request", "Request days of annual leave or sick leave."),
    ("hr.payslip", "Download an employee's monthly payslip."),
    ("db.query", "Run a read-only SQL query against the analytics warehouse."),
    ("db.backup", "Start a backup of a production database."),
    ("translate.text", "Translate a passage of text into another language."),
    ("news.headlines", "Top news headlines for a country or topic."),
    ("music.play", "Play a song, album or playlist on a speaker."),
    ("recipes.find", "Find cooking recipes by ingredient or dish name."),
    ("fitness.log_run", "Log a running workout with distance and time."),
    ("taxi.book", "Book a taxi ride from a pick-up point to a destination."),
    ("flights.search", "Search flights between two airports on a date."),
    ("hotels.book", "Reserve a hotel room for some nights."),
    ("crm.contact", "Look up a customer's contact record and history."),
    ("invoices.create", "Create an invoice for a customer with line items."),
    ("chat.post", "Post a message to a team chat channel."),
    ("git.open_pr", "Open a pull request from a branch in a code repository."),
    ("cloud.restart_vm", "Restart a virtual machine instance in the cloud."),
    ("monitor.alerts", "List firing monitoring alerts for a service."),
    ("docs.summarise", "Summarise a long document into key points."),
]


def _specs() -> list:  # type: ignore[type-arg]
    out = []
    for tid, summary in SUBJECTS:
        params = {
            "type": "object",
            "properties": {"target": {"type": "string", "description": f"what {summary[:30]}"}},
        }
        out.append(spec(tid, summary, parameters=params))
    return out


def test_pseudo_queries_are_seeded_and_mask_the_name() -> None:
    specs = _specs()
    first, again = pseudo_queries(specs), pseudo_queries(specs)
    assert first == again  # deterministic
    assert first != pseudo_queries(specs, seed=1)
    kinds = {p.kind for p in first}
    assert {"summary", "params", "none"} <= kinds
    by_id = {s.id: s for s in specs}
    for p in first:
        if p.tool_id is None:
            continue
        name_words = set(words(by_id[p.tool_id].card.name))
        assert not name_words & set(words(p.text)), p  # never the tool's own name
        assert p.text != by_id[p.tool_id].card.summary  # never its indexed text verbatim


def test_fit_learns_which_feature_points_at_the_right_tool() -> None:
    rng = np.random.default_rng(0)
    examples = []
    for _ in range(200):
        x = rng.random((20, len(FEATURES)))
        target = int(rng.integers(20))
        x[target, 2] += 1.0  # only "cosine" tells the right tool apart
        examples.append(Example(x, target))
    zero = tuple(0.0 for _ in FEATURES)
    w, _ = fit(examples, prior=zero, prior_none=0.0, l2=1e-4, steps=300)
    assert w[2] == max(w) and w[2] > 1.0


def test_none_option_learns_when_no_candidate_is_right() -> None:
    rng = np.random.default_rng(1)
    examples = [Example(rng.random((10, len(FEATURES))), -1) for _ in range(100)]
    _, b = fit(examples, l2=1e-3, steps=200)
    assert b > PRIOR_NONE  # "none of these" became more likely


def test_probabilities_and_platt() -> None:
    assert top_probability(np.array([]), 0.0) == 0.0
    p = top_probability(np.array([5.0, 0.0, 0.0]), 0.0)
    assert 0.9 < p < 1.0
    assert top_probability(np.array([0.0, 0.0]), 10.0) < 0.01  # none dominates
    assert platt(0.5, 1.0, 0.0) == pytest.approx(0.5)
    assert platt(0.2, 1.0, 1.0) > 0.2


def test_calibration_round_trips_and_refuses_other_versions() -> None:
    cal = Calibration(n_tools=3, fitted=True, pseudo_recall={"bm25": 0.5})
    assert Calibration.from_json(cal.to_json()) == cal
    assert (
        Calibration.from_json(cal.to_json().replace(f'"version": {VERSION}', '"version": 0'))
        is None
    )
    assert Calibration.from_json("not json") is None
    assert Calibration.from_json('{"version": 1, "weights": [1]}') is None


def test_weights_over_another_prior_keep_the_catalog_adjustment() -> None:
    shifted = tuple(w + 1.0 for w in PRIOR)
    cal = Calibration(weights=shifted, none_bias=PRIOR_NONE + 0.5)
    zero = (0.0,) * len(FEATURES) + (0.0,)
    w, b = cal.weights_over(zero)
    assert w == pytest.approx((1.0,) * len(FEATURES)) and b == pytest.approx(0.5)
    assert cal.weights_over(None) == (shifted, PRIOR_NONE + 0.5)


def test_the_blend_adds_the_fixed_fusion_to_the_learned_score() -> None:
    w = blended(PRIOR, 10.0)
    by_name = dict(zip(FEATURES, w, strict=True))
    plain = dict(zip(FEATURES, PRIOR, strict=True))
    assert by_name["lexical"] == pytest.approx(plain["lexical"] + 3.0)
    assert by_name["cosine_norm"] == pytest.approx(plain["cosine_norm"] + 7.0)
    assert by_name["name"] == pytest.approx(plain["name"])
    # a very large blend ranks a pool as the fixed fusion does
    x = np.array(
        [
            [1.0, 1.0, 0.5, 0.3, -0.1, 1.0, 1.0, 0.3, 0.3],  # the names match
            [0.4, 0.5, 0.6, 1.0, 0.0, 0.0, 0.0, 1.0, 0.4],  # the best cosine
        ]
    )
    fixed = x @ np.array(FIXED_MIX)
    huge = scores(x, blended(PRIOR, 1e4))
    assert int(np.argmax(huge)) == int(np.argmax(fixed)) == 1
    assert int(np.argmax(scores(x, PRIOR))) == 0
    with pytest.raises(ConfigError, match="ranker_blend"):
        SearchSettings(ranker_blend=-1.0)


def test_the_request_shape_columns_read_length_rare_terms_agreement_and_parts() -> None:
    cards = [
        spec("zephyr_forecast", "Zephyr weather forecast for a city").card,
        spec("quasar_quote", "Quasar stock quote for a ticker").card,
        *(spec(f"tool_{i}", f"Weather report number {i} for a city").card for i in range(40)),
    ]
    fields = FieldTerms.of(cards)
    df: dict[str, int] = {}
    for c in cards:
        for t in set(terms(c.name)) | set(terms(c.summary)):
            df[t] = df.get(t, 0) + 1
    idf = idf_of(df, len(cards))
    col = {f: i for i, f in enumerate((*FEATURES, *SHAPE_FEATURES))}
    lex = Hits(["zephyr_forecast", "tool_1"], [4.0, 2.0])
    dense = Hits(["quasar_quote", "tool_1", "tool_2"], [0.6, 0.5, 0.4])
    q = terms("zephyr forecast and quasar quote for the city weather")
    ids, x = features(q, lex, dense, fields, idf, shape=True)
    row = {t: i for i, t in enumerate(ids)}
    assert x.shape == (4, len(FEATURES) + len(SHAPE_FEATURES))
    assert features(q, lex, dense, fields, idf)[1] == pytest.approx(x[:, : len(FEATURES)])
    # rare: zephyr+forecast+quasar+quote are rare; weather, city are in every card
    assert x[row["zephyr_forecast"], col["rare"]] == pytest.approx(2 / RARE_CAP)
    assert x[row["quasar_quote"], col["rare"]] == pytest.approx(2 / RARE_CAP)
    assert x[row["tool_2"], col["rare"]] == 0.0
    long = len(set(q)) / LONG_TERMS
    lexical = x[:, col["lexical"]]
    assert x[:, col["lexical_long"]] == pytest.approx(lexical * long)
    assert x[:, col["cosine_long"]] == pytest.approx(x[:, col["cosine_norm"]] * long)
    # one id of ten shared by the two lists' first ten
    assert x[:, col["lexical_disagree"]] == pytest.approx(lexical * 0.9)
    assert x[:, col["lexical_parts"]] == pytest.approx(0.0)
    _, in_parts = features(q, lex, dense, fields, idf, parts=2, shape=True)
    assert in_parts[:, col["lexical_parts"]] == pytest.approx(lexical)
    assert in_parts[:, : len(FEATURES)] == pytest.approx(x[:, : len(FEATURES)])
    # the blend adds nothing to the shape columns' weights
    w = (*PRIOR, *(1.0,) * len(SHAPE_FEATURES))
    assert blended(w, 8.0)[len(FEATURES) :] == (1.0,) * len(SHAPE_FEATURES)


def test_stale() -> None:
    cal = Calibration(n_tools=100, fitted=True)
    assert stale(None, 100, 0)
    assert not stale(cal, 100, 10)
    assert stale(cal, 100, 11)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    cat = Catalog.open(tmp_path_factory.mktemp("cal") / "c.db", embedder=embedder(), log=False)
    report = cat.add(_specs())
    assert "pseudo-queries over 35 tools" in report.calibration
    return cat


def test_calibration_is_stored_deterministic_and_not_refit_without_change(
    catalog: Catalog, tmp_path: Path
) -> None:
    stored = Calibration.from_json(catalog.store.meta(CALIBRATION_META) or "")
    assert stored is not None and stored.fitted and stored.n_pseudo > 35
    again = catalog.add(_specs())  # nothing changed: the stored calibration is kept
    assert Calibration.from_json(catalog.store.meta(CALIBRATION_META) or "") == stored
    assert again.calibration == stored.describe()
    with Catalog.open(tmp_path / "other.db", embedder=embedder(), log=False) as other:
        other.add(_specs())
        twin = Calibration.from_json(other.store.meta(CALIBRATION_META) or "")
    assert twin is not None and twin.weights == stored.weights  # seeded: same catalog, same fit


@pytest.mark.parametrize(
    "nonsense",
    ["🙂🙃🎉🔥🙂", '"); DROP TABLE tools; --', "x" * 8000, "qwzx vbnm plkj"],
)
def test_nonsense_gets_low_confidence(catalog: Catalog, nonsense: str) -> None:
    got = catalog.discover(nonsense, Principal.of("u", scopes=["*"]), k=3)
    # flagged: below the threshold integrators act on (0.05-0.17 with the shipped model)
    threshold = SearchSettings().confidence_threshold
    assert got.confidence < threshold and got.low_confidence, (nonsense[:20], got.confidence)


def test_a_clear_request_is_confident(catalog: Catalog) -> None:
    got = catalog.discover("will it rain in Oslo tomorrow", Principal.of("u", scopes=["*"]), k=3)
    assert got.ids[0] == "weather.forecast"
    assert got.confidence > 0.5 and not got.low_confidence


def test_nothing_entitled_is_not_confident(tmp_path: Path) -> None:
    from toolscout.policy import PolicyConfig

    with Catalog.open(tmp_path / "p.db", embedder=embedder(), log=False) as cat:
        cat.add([spec("a.one", "First tool.", scopes=["admin:x"])])
        cat.set_policy(PolicyConfig())
        got = cat.discover("first tool", Principal.of("u", scopes=[]), k=3)
        assert got.ids == [] and got.confidence == 0.0 and got.low_confidence


def test_bm25_leads_only_when_the_catalogs_own_pseudo_queries_say_so() -> None:
    below = {"bm25": 0.68, "dense": 0.37, "ranker": 0.60}
    close = {"bm25": 0.89, "dense": 0.75, "ranker": 0.88}
    assert leads_lexical(below, 0.05) and not leads_lexical(close, 0.05)
    assert not leads_lexical(below, 1.0)  # a margin of 1 never leads
    assert leads_lexical(close, -1.0)  # ... and of -1 always does
    assert not leads_lexical({}, 0.0)  # no evidence: the learned ranker orders
    fitted = Calibration(fitted=True, n_pseudo=10, n_tools=20, pseudo_recall=below)
    assert fitted.leads_lexical(0.05) and "leans lexical (BM25 leads" in fitted.describe(0.05)
    assert "the learned ranker orders" in fitted.describe(1.0)
    assert "leans lexical" not in fitted.describe(1.0)
    # an unfitted calibration (a catalog too small) never leads, whatever it holds
    assert not Calibration(pseudo_recall=below).leads_lexical(0.0)


def test_the_lead_puts_bm25_order_first_and_keeps_the_probability(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add(_specs())
        index = cat.phrases()
        lex = Hits(["mail.search", "files.search"], [9.0, 0.5])
        dense = Hits(["files.search", "mail.search"], [0.7, 0.5])
        plain = Ranker(PRIOR, PRIOR_NONE, index.fields, index.idf, blend=4.0)
        led = Ranker(PRIOR, PRIOR_NONE, index.fields, index.idf, blend=4.0, lead=LEAD)
        ranked, p = plain.rank(["search"], lex, dense)
        ranked_led, p_led = led.rank(["search"], lex, dense)
        assert ranked[0][0] == "files.search"  # dense wins without the lead
        assert ranked_led[0][0] == "mail.search"  # BM25's first leads with it
        assert 0.0 < p_led < 1.0 and 0.0 < p < 1.0
        # settings reach the retriever: margin -1 always leads, 1 never
        always = cat.retriever(SearchSettings(lexical_lead_margin=-1.0))
        never = cat.retriever(SearchSettings(lexical_lead_margin=1.0))
        assert always.learned_ranker().lead == LEAD  # type: ignore[union-attr]
        assert never.learned_ranker().lead == 0.0  # type: ignore[union-attr]


def test_the_feature_columns_are_the_per_candidate_definition_exactly() -> None:
    """The columns written a column at a time (and the name-idf sums kept per tool) are
    the definition computed one candidate at a time, bit for bit; a new idf is not served
    the old one's sums."""
    cards = [spec(f"weather_tool_{i}", f"Weather report {i} for a city").card for i in range(8)]
    fields = FieldTerms.of(cards)
    df = {"weather": 8, "tool": 8, "report": 8, "citi": 8, "zephyr": 1}
    lex = Hits(["weather_tool_3", "weather_tool_1", "weather_tool_5"], [5.0, 3.0, 1.5])
    dense = Hits(["weather_tool_1", "weather_tool_6", "weather_tool_3"], [0.7, 0.55, 0.4])
    q = terms("weather report zephyr tool")
    for idf in (idf_of(df, 8), idf_of({**df, "weather": 2}, 8)):
        for _ in range(2):  # the second call reads the kept sums
            ids, x = features(q, lex, dense, fields, idf)
            row = {t: i for i, t in enumerate(ids)}
            for r, (tid, s) in enumerate(zip(lex.ids, lex.scores, strict=True)):
                assert x[row[tid], 0] == s / lex.scores[0]
                assert x[row[tid], 1] == 1.0 / (1 + r)
            for r, tid in enumerate(dense.ids):
                assert x[row[tid], 7] == 1.0 / (1 + r)
            for tid in ids:
                found = sum(idf(t) for t in set(q) if t in fields.name[tid])
                expected = found / sum(idf(t) for t in fields.name[tid]) if found else 0.0
                assert x[row[tid], 5] == expected
