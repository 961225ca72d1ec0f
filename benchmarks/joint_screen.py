"""Screen for issue 23's one per-catalog decision by the evidence's own noise (h/joint18).

For each dev set's catalog, its calibration's own pseudo-queries (index time, cards only:
the held-out fifth of the single-tool ones, ``calibrate.pseudo_queries``; the 64 multi-tool
ones, ``orders.multi_queries``) are run through the product's retrievers and ordered by each
option of the decision — ``ranker@32`` (the fits' blend), ``ranker@4`` (the smaller blend),
``lead@32`` (BM25 leading at the fits' blend) — and the plain ``bm25`` and the unblended
ranker the shipped lead reads. For each option the paired per-query difference against
``ranker@32`` is printed with its standard error (``calibrate.paired``: a query's unit is
its recall@5 — a multi-gold query counts the share of its gold found, not one hit — and the
single-tool queries of one tool are one cluster, so the SE is cluster-robust), and what each
z of the grid would decide (``calibrate.joint_choice``). No evaluation query is read.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/joint_screen.py --cache SETS [--seed N]
[--json OUT]`` (``--cache``: the indexed sets, opened read-only in spirit: nothing is stored).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality

#: the split reading, reported beside the product's pooled one: the lead from the single-tool
#: pseudo-queries (BM25 against the unblended ranker, what ``LEAD_MARGIN`` reads), the blend
#: from the multi-tool ones (``ranker.catalog_blend``'s evidence), each scaled by its SE
SPLIT = {"lead@32": "single:bm25-ranker", "ranker@4": "multi:ranker@4"}


def split_choice(joint: dict[str, list[float]], z: float) -> str:
    """The split reading's decision: the option whose own evidence beats the base by more
    than ``z`` SEs (both: the larger difference)."""
    from toolscout.discovery import calibrate as cal_mod

    return cal_mod.joint_choice({k: joint[v] for k, v in SPLIT.items() if v in joint}, z)


def evidence(cat: Any, seed: int) -> Any:
    from toolscout.discovery import calibrate as cal_mod
    from toolscout.discovery.queryvectors import embed_keys
    from toolscout.settings import SearchSettings

    retriever = cat.retriever(SearchSettings())
    specs = cat.specs()
    allowed = frozenset(s.id for s in specs)
    return cal_mod.calibrate(
        specs,
        lambda texts, vecs: retriever.pools(texts, vecs, allowed),
        retriever.phrases.fields,
        retriever.phrases.idf,
        embed=lambda texts: retriever._embed_all(embed_keys(texts), cache=False),
        seed=seed,
        measure_joint=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--seed", type=int, default=None, help="pseudo-queries' seed")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from toolscout.discovery import calibrate as cal_mod
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    seed = cal_mod.SEED if args.seed is None else args.seed
    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    for d in quality.bench_sets(args.bench):
        db = args.cache / f"{d.name}.db"
        if not db.is_file():
            raise SystemExit(f"error: {db} is missing: index the set into --cache first")
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            cal = evidence(cat, seed)
        decides = {f"{z:g}": cal_mod.joint_choice(cal.joint, z) for z in cal_mod.JOINT_ZS}
        split = {f"{z:g}": split_choice(cal.joint, z) for z in cal_mod.JOINT_ZS}
        out[d.name] = {
            "pseudo_recall": cal.pseudo_recall,
            "joint": cal.joint,
            "decides": decides,
            "decides_split": split,
        }
        print(f"{d.name} ({cal.n_tools} tools): pseudo recall@5 {cal.pseudo_recall}")
        for key, (diff, se, n) in cal.joint.items():
            t = diff / se if se > 0 else float("inf") if diff > 0 else 0.0
            print(f"  {key:<28} diff {diff:+.3f}  SE {se:.3f}  n {int(n):<4d} t {t:+.2f}")
        print("  decides: " + ", ".join(f"z={z} {o}" for z, o in decides.items()))
        print("  split:   " + ", ".join(f"z={z} {o}" for z, o in split.items()), flush=True)
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json, quality.command_line("benchmarks/joint_screen.py", argv_list), sets=out
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
