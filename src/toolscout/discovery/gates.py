"""Gates on the request's shape: a step around the ranker only where the request warrants it.

The steps around the learned ranker (the merge of a long request's parts, reformulation,
the exact-hit guarantee, the prerequisite step, the dedupe) each help some requests and
cost others. A gate keeps a step on only where the request's shape is on one side of a
threshold: ``"exact_hits:terms<12"`` keeps the exact-hit guarantee for requests of fewer
than twelve distinct content terms. The shape is read off the request alone
(:func:`request_shape`): distinct content terms, characters, sentences and the parts
``discovery/parts.py`` reads it in. No gate is shipped unless it won leave-one-set-out over
the six dev sets on full sets, with no set losing (``benchmarks/steps.py``,
docs/history/calibration.md, h/rank round six): one is, :data:`SHIPPED`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from toolscout.discovery.lexical import sentences, terms
from toolscout.discovery.parts import request_parts
from toolscout.errors import ConfigError
from toolscout.settings import SearchSettings

#: the steps a gate may apply to (SearchSettings' switch of the same name)
STEPS: tuple[str, ...] = ("parts", "reformulate", "exact_hits", "prerequisites", "dedupe")
#: what a gate may read of the request
FEATURES: tuple[str, ...] = ("terms", "chars", "sentences", "parts")
#: the shipped gates, chosen leave-one-set-out on the six full dev sets
#: (``benchmarks/steps.py``, docs/history/calibration.md "This round (h/rank, round six)"): the
#: dedupe only for requests of fewer than ten distinct content terms (held out: apibench
#: +0.006, bfcl +0.004, toolbench +0.005 recall@5, no set lower)
SHIPPED: tuple[str, ...] = ("dedupe:terms<10",)

_SPEC = re.compile(r"^\s*(\w+)\s*:\s*(\w+)\s*(>=|<)\s*(\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Gate:
    """``step`` is on only where ``feature`` is ``>=`` (side "ge") or ``<`` (side "lt")
    ``threshold``."""

    step: str
    feature: str
    threshold: float
    side: str

    def on(self, shape: Mapping[str, float]) -> bool:
        return (shape[self.feature] >= self.threshold) == (self.side == "ge")

    def __str__(self) -> str:
        op = ">=" if self.side == "ge" else "<"
        return f"{self.step}:{self.feature}{op}{self.threshold:g}"


def parse(spec: str) -> Gate:
    """A gate from its spelling, ``"step:feature>=threshold"`` or ``"step:feature<threshold"``."""
    m = _SPEC.match(spec) if isinstance(spec, str) else None
    if m is None:
        raise ConfigError(
            f"a step gate is spelt 'step:feature>=number' or 'step:feature<number', got {spec!r}"
        )
    step, feature, op, threshold = m.groups()
    if step not in STEPS:
        raise ConfigError(f"a step gate's step must be one of {STEPS}, got {step!r}")
    if feature not in FEATURES:
        raise ConfigError(f"a step gate's feature must be one of {FEATURES}, got {feature!r}")
    return Gate(step, feature, float(threshold), "ge" if op == ">=" else "lt")


@lru_cache(maxsize=64)
def parse_all(specs: tuple[str, ...] | None) -> tuple[Gate, ...]:
    """The gates of ``specs`` (None: the shipped ones); at most one per step."""
    gates = tuple(parse(s) for s in (SHIPPED if specs is None else specs))
    steps = [g.step for g in gates]
    twice = sorted({s for s in steps if steps.count(s) > 1})
    if twice:
        raise ConfigError(f"at most one step gate per step; {twice} have more")
    return gates


def feature(name: str, text: str) -> float:
    """One feature of the request's shape (see :data:`FEATURES`)."""
    if name == "terms":
        return float(len(set(terms(text))))
    if name == "chars":
        return float(len(text))
    if name == "sentences":
        return float(sum(1 for s in sentences(text) if s.strip()))
    return float(len(request_parts(text)))


def request_shape(text: str) -> dict[str, float]:
    """What a gate may read of a request (nothing of the catalog, nothing learned)."""
    return {name: feature(name, text) for name in FEATURES}


def step_on(step: str, text: str, settings: SearchSettings) -> bool:
    """Whether ``step`` applies to the request ``text``: its switch in ``settings`` (the
    field of the same name) is on, and no gate on that step (``settings.step_gates``;
    None: :data:`SHIPPED`) says no."""
    if not getattr(settings, step):
        return False
    for g in parse_all(settings.step_gates):
        if g.step == step:
            return g.on({g.feature: feature(g.feature, text)})
    return True
