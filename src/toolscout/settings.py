"""Explicit settings objects, built at the entry points and passed down.

Nothing here reads the environment on import; :func:`default_db_path` does so
only when called.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from toolscout.errors import ConfigError
from toolscout.stores.dsn import is_dsn

DB_ENV = "TOOLSCOUT_DB"
#: the learned ranker's orders (discovery.orders.ORDERS, spelled here: settings import no
#: discovery module; tests/test_orders.py pins the two equal)
_ORDERS = ("ranker", "lead", "fixed", "bm25")
#: a step gate's spelling, its steps and features (discovery.gates' STEPS and FEATURES,
#: spelt here for the same reason; tests/test_gates.py pins them equal)
_GATE = re.compile(r"^\s*(\w+)\s*:\s*(\w+)\s*(?:>=|<)\s*\d+(?:\.\d+)?\s*$")
_GATE_STEPS = ("parts", "reformulate", "exact_hits", "prerequisites", "dedupe")
_GATE_FEATURES = ("terms", "chars", "sentences", "parts")


def default_db_path() -> Path:
    """``$TOOLSCOUT_DB`` if set, else ``toolscout.db`` under the user's data directory."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("toolscout", appauthor=False)) / "toolscout.db"


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Knobs of the retrieval pipeline; each quality feature can be switched off."""

    lexical: bool = True
    dense: bool = True
    #: weight of the dense score in the fused score (the rest is lexical)
    dense_weight: float = 0.7
    #: shift the weight towards lexical when the query carries identifiers or rare exact terms
    adaptive_fusion: bool = True
    #: "learned" (the catalog's calibrated ranker, see discovery/calibrate.py),
    #: "weighted" (normalised score mix) or "rrf" (reciprocal rank fusion)
    fusion: str = "learned"
    #: an exact tool name, id or alias in the query always makes the shortlist
    exact_hits: bool = True
    #: reformulate low-confidence queries (identifier splitting, catalog synonyms, feedback)
    reformulate: bool = True
    #: push near-duplicates (card cosine >= 0.97) behind distinct tools in the top-K (the
    #: shipped step gate keeps it for requests of fewer than ten content terms: step_gates)
    dedupe: bool = True
    #: a near-duplicate gives way only to a distinct tool scoring at least this share of
    #: its own score (0: to any distinct tool; 1: only to one scoring as high; None: the
    #: shipped search.DEDUPE_YIELD, chosen on data by benchmarks/quality.py)
    dedupe_yield: float | None = None
    #: a shortlisted tool that requires an identifier the request does not give
    #: (``person_id``) is followed by the entitled tool that finds it (``search_person``)
    prerequisites: bool = True
    #: use aliases learned from the discovery log
    learned_aliases: bool = True
    #: a confidence (with fusion="learned": the calibrated chance that the top tool is
    #: right) below this is flagged as low
    confidence_threshold: float = 0.3
    #: with fusion="learned", a calibrated confidence below this abstains: the shortlist
    #: is empty, with the reason (discovery/abstain.py); 0 (the default) never abstains;
    #: discovery.abstain.RECOMMENDED is the threshold measured leave-one-set-out
    abstain_below: float = 0.0
    #: how many candidates each retriever hands to fusion
    candidate_pool: int = 50
    #: skip the query encoder when the lexical answer is decisive (an exact mention:
    #: discovery/skip.py; the confidence then reads confidence.CONFIDENCE_SKIPPED). Off by
    #: default: on every dev-set query, held out, toolbench loses 0.0032 recall@5 with it
    #: (over the 0.002 allowed; docs/benchmarks.md, Skipping the query encoder)
    encoder_skip: bool = False
    #: a longer request is read in part: its latest user turn, opening sentences and closing
    #: paragraph within this many characters (discovery.focus)
    max_query_chars: int = 8192
    #: a request longer than this is refused (a safety bound: agents' prompts are shorter)
    max_request_chars: int = 65_536
    #: split a request into tasks, rank each, merge so every task is represented (off by
    #: default: on the dev sets it cost recall and did not raise complete@5, docs/benchmarks.md)
    multi_intent: bool = False
    #: a long request of several sentences or clauses is also retrieved part by part and
    #: ranked jointly so every part is covered (discovery/parts.py; the request's shape
    #: decides: a short one is untouched)
    parts: bool = True
    #: when the catalog's own pseudo-queries show the learned ranker below BM25 by more
    #: than this recall@5, the default leans lexical (calibrate.LEAD_MARGIN; None: shipped)
    lexical_lead_margin: float | None = None
    #: choose the learned ranker's order per catalog from its own pseudo-queries
    #: (discovery/orders.py): another order than the ranker's is taken when it beats it by
    #: more than this (None: the shipped orders.ORDER_MARGIN, which keeps the ranker's)
    order_margin: float | None = None
    #: put every request in this order (discovery/orders.py ORDERS; "a/b": a request read
    #: whole in a, one in several parts in b; None: as chosen); evaluation forces each in
    #: turn to choose the margin above
    ranker_order: str | None = None
    #: the learned ranker's prior: one weight per feature, then the none option's bias
    #: (None: the shipped one); evaluation passes the one fitted with the evaluated set held out
    ranker_prior: tuple[float, ...] | None = None
    #: the learned order's own prior (ranker.ORDER_PRIOR: one weight per feature; None: the
    #: shipped one; an empty tuple: none, the order adds the probability's weights)
    ranker_order_prior: tuple[float, ...] | None = None
    #: Platt scaling (a, b) of the learned confidence (None: the shipped one)
    confidence_platt: tuple[float, float] | None = None
    #: how much of the fixed fusion's score the learned ranker adds to its own (None: the
    #: shipped calibrate.BLEND)
    ranker_blend: float | None = None
    #: the safety floor: where the learned ranker's probability that its first tool is
    #: right is below this, the fixed fusion orders its pool (0: never, the shipped default)
    ranker_floor: float = 0.0
    #: the coverage rule: the first hits of the BM25 and the dense lists are kept within
    #: this many places of the retrieval's final order (0: off, the shipped default)
    ranker_cover: int = 0
    #: gates on the request's shape, "step:feature>=n" or "step:feature<n": the step (parts,
    #: reformulate, exact_hits, prerequisites, dedupe) only where the request's shape
    #: (terms, chars, sentences, parts) is on that side (discovery/gates.py; None: the
    #: shipped gates.SHIPPED, chosen leave-one-set-out by benchmarks/steps.py)
    step_gates: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not (self.lexical or self.dense):
            raise ConfigError("at least one of lexical and dense retrieval must be on")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ConfigError(f"dense_weight must be within [0, 1], got {self.dense_weight}")
        if self.fusion not in ("learned", "weighted", "rrf"):
            raise ConfigError(f"fusion must be 'learned', 'weighted' or 'rrf', got {self.fusion!r}")
        if self.dedupe_yield is not None and not 0.0 <= self.dedupe_yield <= 1.0:
            raise ConfigError(f"dedupe_yield must be within [0, 1], got {self.dedupe_yield}")
        if self.ranker_blend is not None and not 0.0 <= self.ranker_blend <= 1000.0:
            raise ConfigError(f"ranker_blend must be within [0, 1000], got {self.ranker_blend}")
        if self.ranker_order is not None:
            got = self.ranker_order.split("/")
            if len(got) > 2 or any(o not in _ORDERS for o in got):
                raise ConfigError(
                    f"ranker_order must be one of {_ORDERS} or two of them as 'a/b', "
                    f"got {self.ranker_order!r}"
                )
        if not 0.0 <= self.ranker_floor <= 1.0:
            raise ConfigError(f"ranker_floor must be within [0, 1], got {self.ranker_floor}")
        if not 0 <= self.ranker_cover <= 100:
            raise ConfigError(f"ranker_cover must be within [0, 100], got {self.ranker_cover}")
        if self.order_margin is not None and not -1.0 <= self.order_margin <= 1.0:
            raise ConfigError(f"order_margin must be within [-1, 1], got {self.order_margin}")
        if not 0.0 <= self.abstain_below <= 1.0:
            raise ConfigError(f"abstain_below must be within [0, 1], got {self.abstain_below}")
        if not 64 <= self.max_query_chars <= self.max_request_chars:
            raise ConfigError(
                f"max_query_chars must be within [64, max_request_chars "
                f"({self.max_request_chars})], got {self.max_query_chars}"
            )
        if self.step_gates is not None:
            _check_gates(self.step_gates)
        if self.candidate_pool < 10:
            raise ConfigError(f"candidate_pool must be at least 10, got {self.candidate_pool}")

    def but(self, **changes: object) -> SearchSettings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _check_gates(gates: tuple[str, ...]) -> None:
    """Refuse a step gate that is misspelt, names an unknown step or feature, or gates a
    step twice."""
    if not isinstance(gates, tuple):
        raise ConfigError(f"step_gates must be a tuple of strings, got {type(gates).__name__}")
    steps: list[str] = []
    for gate in gates:
        m = _GATE.match(gate) if isinstance(gate, str) else None
        if m is None:
            raise ConfigError(
                f"a step gate is spelt 'step:feature>=number' or 'step:feature<number', "
                f"got {gate!r}"
            )
        if m.group(1) not in _GATE_STEPS:
            raise ConfigError(f"a step gate's step must be one of {_GATE_STEPS}, got {gate!r}")
        if m.group(2) not in _GATE_FEATURES:
            raise ConfigError(
                f"a step gate's feature must be one of {_GATE_FEATURES}, got {gate!r}"
            )
        if m.group(1) in steps:
            raise ConfigError(f"at most one step gate per step; {m.group(1)!r} has two")
        steps.append(m.group(1))


#: how the discovery log keeps query text
QUERY_LOG_MODES = ("text", "hash", "none")
#: days a discovery keeps its query text (``query_log="text"``) before only its hash stays
QUERY_TEXT_DAYS = 30.0


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a :class:`~toolscout.Toolscout` is built from, in one explicit object.

    Secrets are passed in here (or by the CLI from its flags and environment),
    never read from the environment by the library.
    """

    #: the catalog: a SQLite file path, ``":memory:"``, or a ``postgresql://`` DSN
    db: str | Path | None = None
    search: SearchSettings = SearchSettings()
    #: the embedding model by name (``all-MiniLM-L6-v2``, ``multilingual-e5-small``);
    #: None: the one the catalog was indexed with, else all-MiniLM-L6-v2
    embedder: str | None = None
    #: opening a stored catalog starts loading the embedder and the token counter on
    #: background threads (off for a surface that must answer something else first)
    prefetch_models: bool = True
    #: token verification (HS256 secret or PEM public key, or a local JWKS file)
    jwt_key: str | None = None
    jwt_jwks: str | Path | None = None
    jwt_algorithms: tuple[str, ...] = ("HS256",)
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    #: the audit log: a SQLite file or a ``postgresql://`` DSN (default: ``<db>.audit.db``
    #: beside a SQLite catalog; the catalog's own database for a PostgreSQL one)
    audit_path: str | Path | None = None
    #: HMAC key of the audit chain, kept outside the database
    audit_key: str | None = None
    #: strict mode: executions need a discovery grant signed with this secret
    grants_secret: str | None = None
    strict: bool = False
    #: executor time-out per call, in seconds
    timeout_s: float = 30.0
    #: the discovery log: on or off, and what it keeps of query text
    log: bool = True
    query_log: str = "text"
    #: days query text is kept (the false-negative report shows it) before it is reduced
    #: to its hash; ``None`` keeps it until the row itself is pruned
    query_text_days: float | None = QUERY_TEXT_DAYS
    allow_unknown_params: bool = False

    def __post_init__(self) -> None:
        if self.query_log not in QUERY_LOG_MODES:
            raise ConfigError(
                f"query_log must be one of {', '.join(QUERY_LOG_MODES)}, got {self.query_log!r}"
            )
        if self.query_text_days is not None and not self.query_text_days > 0:
            raise ConfigError(f"query_text_days must be positive, got {self.query_text_days}")
        if self.strict and not self.grants_secret:
            raise ConfigError("strict mode needs grants_secret to sign discovery grants")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {self.timeout_s}")
        if self.embedder is not None:
            from toolscout.embed import embedder_name

            embedder_name(self.embedder)  # ConfigError naming the choices

    def but(self, **changes: object) -> Settings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def catalog_target(self) -> str | Path:
        return self.db if self.db is not None else default_db_path()

    def audit_target(self) -> str | Path:
        """Where the audit log lives: beside a SQLite catalog in its own file (catalog
        writes never block it); in the catalog's database when that is PostgreSQL, so
        every replica appends to one chain."""
        if self.audit_path is not None:
            return self.audit_path
        target = str(self.catalog_target())
        if target in (":memory:", "memory:"):
            return ":memory:"
        if is_dsn(target):
            return target
        if "://" in target:
            raise ConfigError(f"the catalog must be a file or a postgresql:// DSN, got {target!r}")
        path = Path(target)
        return path.with_name(path.stem + ".audit" + (path.suffix or ".db"))
