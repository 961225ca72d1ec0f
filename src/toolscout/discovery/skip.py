"""Skipping the query encoder when the lexical answer is decisive (``encoder_skip``).

Off by default: on every query of the dev sets (round twenty-three) the exact rule costs
toolbench 0.0032 recall@5 and 0.0052 complete@5, over the 0.002 / 0.005 a change in
ranking may cost, and the fit on all six sets at that limit picks no rule at all. A skipped
ranking's confidence has a model of its own (``confidence.CONFIDENCE_SKIPPED``: a request
naming its tool by id reports > 0.9 instead of the 0.35 the hybrid model gave it), so
switching the skip on (``SearchSettings(encoder_skip=True)``) costs recall, not the
confidence's meaning; it is not calibrated within 0.1 on every set either
(docs/benchmarks.md, Skipping the query encoder).

The query encoder is most of a warm discovery's time (docs/benchmarks.md, Discovery
latency). Some requests do not need it: they name a tool outright, or BM25 finds one
tool far ahead of every other. For those, retrieval runs lexical only (the learned
ranker with no dense scores) and the encoder is never called.

The rule, in the order it is checked, over the lexical hits of the request's terms
within the caller's entitled tools:

- ``exact``: the request names an entitled tool verbatim (id, name or alias, as the
  exact-hit guarantee reads it), when :data:`SKIP_ON_EXACT` is on;
- ``margin``: BM25's margin ``(s1 - s2) / s1`` between its first and second tool is at
  least :data:`SKIP_MARGIN` (a single lexical hit counts as margin 1).

Both constants are chosen on the dev sets, leave-one-set-out, by
``benchmarks/encoder_skip.py``: the rule that skips the most queries while no *other*
set loses more than 0.002 recall@5 with it. On 500 queries a set every fit chose the exact
rule and no margin, the values below; on every query of every set (round twenty-three)
the fits without toolbench still choose it and toolbench, held out, loses 0.0032, so the
fit on all six chooses neither (the exact rule is kept as the rule of the opt-in skip).
Every held-out figure is in docs/benchmarks.md (Skipping the query encoder). A skipped
request gets no vote from usage-learned queries (they are matched by vector); a request
that names its tool outright does not need one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

#: the BM25 margin at or above which the encoder is skipped (None: never on the margin).
#: Fitted: no margin was safe on bfcl (even a single BM25 hit, margin 1, lost recall there)
SKIP_MARGIN: float | None = None
#: skip the encoder when the request names an entitled tool verbatim (fitted on 500 queries
#: a set: on; on every query the all-six fit turns it off, toolbench losing 0.0032: the
#: opt-in skip keeps it, the default does not skip)
SKIP_ON_EXACT = True


@dataclass(frozen=True, slots=True)
class SkipRule:
    """When the encoder is skipped: on an exact mention, at or above a BM25 margin."""

    on_exact: bool = SKIP_ON_EXACT
    margin: float | None = SKIP_MARGIN


#: the shipped rule
RULE = SkipRule()


def applies(settings: SearchSettings) -> bool:
    """Whether the rule is looked at: both retrievers on and the skip not switched off."""
    return settings.encoder_skip and settings.dense and settings.lexical


def needs_lexical(rule: SkipRule = RULE) -> bool:
    """Whether deciding needs BM25's hits first (a margin rule); otherwise BM25 keeps
    running beside the encoder when the encoder runs."""
    return rule.margin is not None


def lexical_margin(lex: Hits) -> float:
    """``(s1 - s2) / s1`` over BM25's first two scores; 1 for a single hit, 0 for none."""
    if not lex.scores or lex.scores[0] <= 0:
        return 0.0
    if len(lex.scores) < 2:
        return 1.0
    return max((lex.scores[0] - lex.scores[1]) / lex.scores[0], 0.0)


def reason(exact: Mapping[str, str], lex: Hits, rule: SkipRule = RULE) -> str:
    """Why the encoder can be skipped for this request ("exact" or "margin"), or ""."""
    if rule.on_exact and exact:
        return "exact"
    if rule.margin is not None and lex.ids and lexical_margin(lex) >= rule.margin:
        return "margin"
    return ""
