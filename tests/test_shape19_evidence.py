"""The evidence that left the product measures as the product measured it (h/shape19).

Round twenty-five moved the blend per catalog's evidence (``Calibration.blend_recall``,
``calibrate(measure_blends=True)``) and the cross-fitted lead evidence
(``calibrate(cross_fit=True)``) out of ``discovery/`` into benchmarks/catalog_evidence.py.
The literal values below were written out from a run of the base code (f2da421, before the
move: ``calibrate.calibrate`` with ``measure_blends=True`` and ``cross_fit=True``, and
without them for the fifth; the default model, one thread) on the catalogs here; the moved
code must give the same numbers, and a calibration the base stored must load and describe
itself as it did."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from support import DISTINCT_TOOLS, embedder, fit_calibration, spec
from toolscout.discovery.calibrate import SEED, Calibration
from toolscout.discovery.catalog import Catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from catalog_evidence import measure

#: a catalog of close tools (the same verbs over the same nouns), where the pseudo-queries'
#: recall is below 1 and the blends and folds differ
CLOSE_TOOLS = [
    ("crm.contact_create", "Create a customer contact record with name, email and phone."),
    ("crm.contact_update", "Update a customer contact record's email, phone or name."),
    ("crm.contact_delete", "Delete a customer contact record and its history."),
    ("crm.contact_search", "Search customer contact records by name, email or phone."),
    ("crm.deal_create", "Create a sales deal for a customer with an amount and stage."),
    ("crm.deal_update", "Update a sales deal's amount, stage or owner."),
    ("crm.deal_close", "Close a sales deal as won or lost with a note."),
    ("billing.invoice_create", "Create an invoice for a customer with line items and a due date."),
    ("billing.invoice_send", "Send an invoice to a customer by email."),
    ("billing.invoice_void", "Void an unpaid invoice so it is no longer due."),
    ("billing.payment_record", "Record a customer's payment against an invoice."),
    ("billing.refund", "Refund a customer's payment in full or in part."),
    ("support.ticket_create", "Create a support ticket for a customer's problem."),
    ("support.ticket_update", "Update a support ticket's status, priority or owner."),
    ("support.ticket_close", "Close a support ticket with a resolution note."),
    ("support.ticket_search", "Search support tickets by customer, status or text."),
    ("mail.send", "Send an email message to a customer or colleague."),
    ("mail.search", "Search email messages by sender, subject or text."),
    ("calendar.event_create", "Create a calendar event with a customer and a time."),
    ("calendar.event_update", "Update a calendar event's time, place or attendees."),
]

#: the base's numbers (see the module's docstring): the calibration's ``blend_recall`` with
#: the choice on, its ``pseudo_recall`` cross-fitted, and its ``pseudo_recall`` as shipped
BASE = {
    ("close", SEED): {
        "blend_recall": {"4": 0.87, "32": 0.885},
        "cross": {"bm25": 0.95, "dense": 0.95, "ranker": 0.95},
        "fifth": {"bm25": 1.0, "dense": 1.0, "ranker": 1.0},
    },
    ("close", 20261131): {
        "blend_recall": {"4": 0.891, "32": 0.906},
        "cross": {"bm25": 0.95, "dense": 0.95, "ranker": 0.9},
        "fifth": {"bm25": 1.0, "dense": 1.0, "ranker": 0.75},
    },
    ("distinct", SEED): {
        "blend_recall": {"4": 1.0, "32": 1.0},
        "cross": {"bm25": 1.0, "dense": 1.0, "ranker": 1.0},
        "fifth": {"bm25": 1.0, "dense": 1.0, "ranker": 1.0},
    },
}

#: the close catalog's calibration as the base stored it with the choice on
#: (``calibrate(measure_blends=True).to_json()``), and its ``describe()`` there
STORED = (
    '{"blend_recall": {"32": 0.885, "4": 0.87}, "fingerprint": "4fb9d9eff3d527b6", '
    '"fitted": true, "n_pseudo": 24, "n_tools": 20, "none_bias": 5.2097679302554365, '
    '"orders": {}, "prior": [2.9926, 0.0528, 2.6806, 1.7125, 3.8062, 1.1823, 1.3601, 0.6734, '
    '-1.2883], "prior_none": 4.2753, "pseudo_recall": {"bm25": 1.0, "dense": 1.0, '
    '"ranker": 1.0}, "seconds": 1.058, "version": 4, "weights": [3.015838359261337, '
    "0.01661647955203168, 2.543062215748888, 1.64280989490534, 3.785307900678409, "
    "0.6993485142359661, 1.5587841292000442, 0.5466897821208048, -1.3230187124937371]}"
)
DESCRIBED = (
    "calibration: 24 pseudo-queries over 20 tools in 1.1s; leans dense (the learned ranker "
    "orders); pseudo recall@5 bm25 1.00, dense 1.00, ranker 1.00"
)


def _open(path: Path, tools: Sequence[tuple[str, str]]) -> Iterator[Catalog]:
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec(tid, summary) for tid, summary in tools])
        yield cat


@pytest.fixture(scope="module")
def close(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    yield from _open(tmp_path_factory.mktemp("close") / "c.db", CLOSE_TOOLS)


@pytest.fixture(scope="module")
def distinct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    yield from _open(tmp_path_factory.mktemp("distinct") / "c.db", DISTINCT_TOOLS)


@pytest.mark.parametrize(("name", "seed"), sorted(BASE))
def test_the_moved_evidence_equals_the_base_products(
    name: str, seed: int, close: Catalog, distinct: Catalog
) -> None:
    cat = close if name == "close" else distinct
    want = BASE[(name, seed)]
    got = measure(cat, seed)
    assert got["blend_recall"] == want["blend_recall"]
    assert got["pseudo_recall"] == want["cross"]
    assert fit_calibration(cat, seed).pseudo_recall == want["fifth"]  # the product's, as before


def test_the_base_products_stored_calibration_loads_and_reads_as_it_did(close: Catalog) -> None:
    loaded = Calibration.from_json(STORED)
    assert loaded is not None and loaded.fitted
    assert loaded.describe() == DESCRIBED  # the index report's line, unchanged
    fitted = fit_calibration(close)
    assert fitted.fingerprint == loaded.fingerprint and fitted.n_pseudo == loaded.n_pseudo
    # the weights: the base's to the last bits a fit in another process can move (the fit's
    # sums are BLAS products; tests/test_xfit18_crossfit.py checks them bit for bit in one)
    assert fitted.weights == pytest.approx(loaded.weights, rel=1e-12, abs=1e-12)
    assert fitted.none_bias == pytest.approx(loaded.none_bias, rel=1e-12)
    assert fitted.pseudo_recall == loaded.pseudo_recall
