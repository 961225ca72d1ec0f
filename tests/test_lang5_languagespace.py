"""Round twelve: the language a request is written in taken out of its vector
(discovery/languagespace.py) when discovery reads it as another language, and the merge of
a carried-over request's two readings adding the other reading's score."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from test_crosslingual import TOOLS, e5  # noqa: F401  (e5: a fixture)
from toolscout.discovery import languagespace
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.crosslingual import merged
from toolscout.discovery.languagespace import PARALLEL, language_space, without_language
from toolscout.discovery.queryvectors import embed_keys
from toolscout.discovery.search import Candidate, Retrieval, parse_query
from toolscout.embed.base import Vectors, Wrapped
from toolscout.embed.e5 import MultilingualE5Embedder

#: a request and its translations, not among :data:`languagespace.PARALLEL`
SAME = {
    "en": "What is the exchange rate of the Japanese yen?",
    "fr": "Quel est le taux de change du yen japonais ?",
    "de": "Wie ist der Wechselkurs des japanischen Yen?",
    "zh": "日元的汇率是多少？",
}


def test_the_parallel_requests_are_the_same_requests_in_each_language() -> None:
    """Every language holds as many requests as English, none empty, none repeated."""
    n = len(PARALLEL["en"])
    assert n >= 20 and next(iter(PARALLEL)) == "en"
    for lang, texts in PARALLEL.items():
        assert len(texts) == n and all(t.strip() for t in texts), lang
        assert len(set(texts)) == n, lang


def test_the_language_space_is_one_direction_per_language_orthonormal(
    e5: MultilingualE5Embedder,  # noqa: F811
) -> None:
    space = language_space(e5)
    assert space.shape == (len(PARALLEL) - 1, e5.dim)
    np.testing.assert_allclose(space @ space.T, np.eye(len(space)), atol=1e-5)
    assert language_space(e5) is space  # built once per model


def test_taking_the_language_out_brings_a_translation_nearer_its_english(
    e5: MultilingualE5Embedder,  # noqa: F811
) -> None:
    """A translation's vector, with its component in the language space taken out, is
    nearer the English request's (itself with the same taken out) than before."""
    vectors = e5.embed(list(SAME.values()))
    out = without_language(e5, vectors)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    for i in range(1, len(SAME)):
        assert float(out[0] @ out[i]) > float(vectors[0] @ vectors[i]) + 0.01
    assert without_language(e5, vectors, 0.0) is vectors  # nothing taken out: as before


def test_a_request_read_as_another_language_is_searched_without_its_language(
    tmp_path: Path,
    e5: MultilingualE5Embedder,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cosines the dense search gives a request the catalog's words barely cover are
    those of its vector without its language's component; a covered (English) request's
    are its own vector's. Before, both were the vector's own."""
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(TOOLS)
        df, n_docs = cat.store.document_frequency()
        retriever = cat.retriever()
        allowed = frozenset(t.card.id for t in TOOLS)

        def searched(vector: np.ndarray) -> dict[str, float]:
            hits = cat.store.dense(vector, allowed, 10, kinds=retriever.kinds, model_id=e5.model_id)
            return dict(zip(hits.ids, hits.scores, strict=True))

        def cosines(text: str) -> dict[str, float]:
            got = retriever.run(parse_query(text, df, n_docs, cat.settings), allowed)
            return {c.id: c.dense for c in got.candidates if c.dense}

        for text, other in (("Envoyez un courriel à Marie", True),
                            ("send an email to Marie", False)):  # fmt: skip
            vector = e5.embed(embed_keys([text]))  # what the encoder reads of it
            expected = searched(without_language(e5, vector)[0] if other else vector[0])
            got = cosines(text)
            assert got, text
            for tid, cos in got.items():
                assert cos == pytest.approx(expected[tid], abs=1e-6), (text, tid)
        monkeypatch.setattr(languagespace, "REMOVE", 0.0)  # as before
        expected = searched(e5.embed(["Envoyez un courriel à Marie"])[0])
        for tid, cos in cosines("Envoyez un courriel à Marie").items():
            assert cos == pytest.approx(expected[tid], abs=1e-6), tid


def test_a_tool_both_readings_find_ranks_above_one_only_one_finds() -> None:
    """The merge of a carried-over request adds the other reading's score to the better
    (:data:`crosslingual.MERGE_AGREE` = 1): ``b``, second in both readings, comes before
    ``a`` and ``c``, each first in one. Before (the better alone) ``b`` came third."""
    ours = Retrieval([Candidate("a", fused=1.0), Candidate("b", fused=0.6)], 0.4, True, 0.7)
    theirs = Retrieval([Candidate("c", fused=1.0), Candidate("b", fused=0.7)], 0.6, False, 0.7)
    got = merged(ours, lambda: theirs)
    assert [(c.id, round(c.fused, 6)) for c in got.candidates] == [
        ("b", 1.3),
        ("a", 1.0),
        ("c", 1.0),
    ]
    assert got.confidence == 0.6 and not got.low_confidence


_PARALLEL_TEXTS = frozenset(t for texts in PARALLEL.values() for t in texts)


class _Counted(Wrapped):
    """e5, counting the requests of :data:`PARALLEL` it is asked to encode."""

    multilingual = True

    def __init__(self, inner: MultilingualE5Embedder) -> None:
        super().__init__(inner)
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts += sum(t in _PARALLEL_TEXTS for t in texts)
        return self.inner.embed(texts)


def test_writing_the_catalog_keeps_the_language_space_for_the_next_process(
    tmp_path: Path,
    e5: MultilingualE5Embedder,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Measured once when the catalog is written (every request of :data:`PARALLEL` encoded
    on the background thread that builds the word list), the language space is kept in the
    store: a new process opening the catalog reads it and encodes none of them; without a
    store nothing is read."""
    counted = _Counted(e5)
    monkeypatch.setattr(languagespace, "_SPACES", {})  # a new process
    with Catalog.open(tmp_path / "c.db", embedder=counted, log=False) as cat:
        cat.add(TOOLS)
    assert counted.texts == len(_PARALLEL_TEXTS)
    first = languagespace._SPACES[e5.model_id]
    monkeypatch.setattr(languagespace, "_SPACES", {})  # another new process
    counted.texts = 0
    with Catalog.open(tmp_path / "c.db", embedder=counted, log=False) as cat:
        again = language_space(counted, cat.store)
    assert counted.texts == 0
    np.testing.assert_array_equal(again, first)
    assert languagespace._kept(None, e5.model_id, e5.dim) is None  # no store: measured again
