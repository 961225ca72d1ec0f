"""Pseudo-queries: text about a catalog's tools, written from the catalog alone.

No evaluation query is ever seen here. At index time :func:`pseudo_queries` writes, for
a seeded sample of tools (:data:`SAMPLE_TOOLS`), text *about* each tool that is not its
indexed text verbatim: its summary with the name's words masked and half its words
dropped, its parameter descriptions, its aliases; and mixtures of unrelated tools' words
that no tool answers (the "none" kind). Calibration (discovery/calibrate.py) fits the
ranker on them; discovery/orders.py joins them into multi-tool requests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence, Set
from dataclasses import dataclass

from toolscout.cards import ToolSpec, param_texts
from toolscout.discovery.lexical import words

#: tools sampled for pseudo-queries (bounded: index time stays flat at 100k tools)
SAMPLE_TOOLS = 200
SEED = 20261130


# -- pseudo-queries ------------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Pseudo:
    text: str
    tool_id: str | None  # None: no tool is right (a mixture of several tools' words)
    kind: str


def pseudo_queries(specs: Sequence[ToolSpec], seed: int = SEED) -> list[Pseudo]:
    """Text about each sampled tool that is not its indexed text verbatim (seeded)."""
    rng = random.Random(seed)
    sample = list(specs)
    if len(sample) > SAMPLE_TOOLS:
        sample = rng.sample(sample, SAMPLE_TOOLS)
    out: list[Pseudo] = []
    for spec in sample:
        masked = set(words(spec.card.name)) | set(words(spec.id))
        summary = [w for w in spec.card.summary.split() if _bare(w) not in masked]
        if len(summary) >= 4:
            keep = sorted(rng.sample(range(len(summary)), max(3, len(summary) // 2)))
            out.append(Pseudo(" ".join(summary[i] for i in keep), spec.id, "summary"))
        params = [p for p in param_texts(spec) if _bare(p) not in masked]
        described = [p for p in params if len(p.split()) > 1]
        if described:
            text = " ".join(rng.sample(described, min(2, len(described))))
            out.append(Pseudo(_masked(text, masked), spec.id, "params"))
        for alias in spec.card.aliases[:2]:
            out.append(Pseudo(alias, spec.id, "alias"))
    # mixtures of words from unrelated tools: no tool is right, so the none option learns
    n_none = max(len(out) // 8, 4)
    for _ in range(n_none):
        picks = rng.sample(list(specs), min(3, len(specs)))
        bag = [w for s in picks for w in s.card.summary.split()]
        rng.shuffle(bag)
        out.append(Pseudo(" ".join(bag[:8]) or "nothing", None, "none"))
    return out


def _bare(word: str) -> str:
    return " ".join(words(word))


def _masked(text: str, masked: Set[str]) -> str:
    return " ".join(w for w in text.split() if _bare(w) not in masked)
