"""``toolscout report``: the tools users needed that discovery did not show."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from toolscout.cli.app import DbOption, _open_admin, err, fail, out
from toolscout.telemetry.confidence import MIN_OUTCOMES
from toolscout.telemetry.report import (
    MIN_ALIAS_EVIDENCE,
    FalseNegativeReport,
    accept_confidence,
    parse_age,
    report_for,
)


def report_command(
    db: DbOption = None,
    since: Annotated[
        str, typer.Option("--since", help="The period: 7d, 12h, 30m, 2w (default: 7d).")
    ] = "7d",
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    accept: Annotated[
        str | None,
        typer.Option("--accept", metavar="ALIAS_ID", help="Write a suggested alias into its card."),
    ] = None,
    prune: Annotated[
        str | None,
        typer.Option("--prune", metavar="AGE", help="First delete log entries older than AGE."),
    ] = None,
    min_evidence: Annotated[
        int,
        typer.Option(
            "--min-evidence",
            help="Missed discoveries with one phrasing needed before it is suggested.",
        ),
    ] = MIN_ALIAS_EVIDENCE,
    top: Annotated[int, typer.Option("--top", help="Tools and suggestions printed.")] = 20,
    accept_conf: Annotated[
        bool,
        typer.Option(
            "--accept-confidence",
            help="Store the confidence correction the period's outcomes support.",
        ),
    ] = False,
    reset_conf: Annotated[
        bool,
        typer.Option("--reset-confidence", help="Remove the stored confidence correction."),
    ] = False,
) -> None:
    """Per-tool miss rates, the queries that missed, tools never surfaced, alias suggestions."""
    from toolscout.discovery.catalog import Catalog
    from toolscout.settings import default_db_path

    if min_evidence < 1 or top < 1:
        raise fail("--min-evidence and --top must be at least 1")
    period = parse_age(since)
    keep = parse_age(prune) if prune is not None else None
    target = str(db) if db is not None else str(default_db_path())
    if "://" not in target and not Path(target).is_file():
        raise fail(f"no catalog at {target}; run `toolscout index CATALOG --db {target}` first")
    with Catalog.open(target) as catalog:
        if catalog.log is None:
            raise fail(f"{target} keeps no discovery log")
        if keep is not None:
            removed = catalog.log.prune(keep / 86400)
            err.print(f"pruned {removed} log entries older than {prune}", markup=False)
        if accept_conf or reset_conf or accept is not None:
            if accept_conf and reset_conf:
                raise fail("--accept-confidence and --reset-confidence exclude each other")
            _administer(target, accept, reset_conf, period)
            return
        report = report_for(
            catalog, since=time.time() - period, tool=tool, min_evidence=min_evidence
        )
    if as_json:
        out.print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False), markup=False)
        return
    _print(report, since, top)


def _administer(target: str, accept: str | None, reset_conf: bool, period: float) -> None:
    """Accept an alias or change the confidence correction as the local operator, through
    the catalog's administration (decided by policy, written to the audit log)."""
    from toolscout.administration import local_operator

    with _open_admin(target, None) as ts:
        catalog = ts.catalog
        who = local_operator(catalog.policy)
        if accept is not None:
            (done,) = ts.admin.accept_aliases(who, [accept])
            s = done.suggestion
            out.print(
                f"accepted {s.id}: {s.tool_id} now has the alias {s.alias!r} "
                f"({done.embedded} text embedded; evidence: {s.times} misses, "
                f"{s.subjects} callers, tenant {s.tenant or '-'})",
                markup=False,
            )
            return
        old = catalog.confidence_shift.shift
        if reset_conf:
            ts.admin.set_confidence(who, lambda: catalog.set_confidence_shift(0.0))
            out.print(f"confidence correction removed (was {old:+.2f} logits)", markup=False)
            return
        new = ts.admin.set_confidence(
            who, lambda: accept_confidence(catalog, since=time.time() - period)
        )
        out.print(
            f"confidence correction {old:+.2f} -> {new.shift:+.2f} logits "
            f"({new.outcomes} outcomes in all); later discoveries report the corrected "
            "confidence",
            markup=False,
        )


def _print(report: FalseNegativeReport, since: str, top: int) -> None:
    out.print(
        f"last {since}: {report.discoveries} discoveries, {report.needed} tools needed, "
        f"{report.misses} missed ({report.miss_rate:.1%}); {report.low_confidence} "
        f"low-confidence, {report.zero_results} with no result",
        markup=False,
    )
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
    _print_confidence(report)
    missed = [t for t in report.tools if t.misses or t.second_searches]
    if missed:
        out.print("\nmissed tools (executed or named by feedback, not shown):", markup=False)
        for t in missed[:top]:
            out.print(
                f"  {t.tool_id}: {t.misses}/{t.needed} missed ({t.miss_rate:.0%}), "
                f"{t.second_searches} second searches, {t.feedback} feedback",
                markup=False,
            )
            for q in t.queries[:3]:
                text = q.query if q.query is not None else (q.query_hash or "(not kept)")
                instead = ", ".join(q.shown_instead[:3]) or "nothing"
                out.print(f"      {text!r} x{q.times} -> shown: {instead}", markup=False)
    if report.never_surfaced:
        shown = ", ".join(report.never_surfaced[:top])
        more = len(report.never_surfaced) - top
        out.print(
            f"\nnever surfaced ({len(report.never_surfaced)}): {shown}"
            + (f" ... and {more} more" if more > 0 else ""),
            markup=False,
        )
    if report.suggestions:
        out.print("\nalias suggestions (toolscout report --accept ID):", markup=False)
        for s in report.suggestions[:top]:
            ranked = f", ranks it #{s.rank}" if s.rank is not None else ""
            out.print(
                f"  {s.id}  {s.tool_id} += {s.alias!r}  (evidence: {s.times} missed "
                f"discoveries from {s.subjects} caller{'s' if s.subjects != 1 else ''}"
                f"{ranked}, tenant {s.tenant or '-'})",
                markup=False,
            )


def _print_confidence(report: FalseNegativeReport) -> None:
    check = report.confidence
    if check is None or not check.outcomes:
        return
    out.print(
        f"\nconfidence against outcomes ({check.outcomes} discoveries followed by a call or "
        f"feedback): mean {check.mean_confidence:.2f}, first tool used {check.right_first:.0%}",
        markup=False,
    )
    for b in check.bands:
        out.print(
            f"  {b.low:.1f}-{b.high:.1f}: {b.discoveries} discoveries, mean confidence "
            f"{b.mean_confidence:.2f}, first tool used {b.right_first:.0%}",
            markup=False,
        )
    if check.shift is None:
        out.print(f"  (a correction is proposed from {MIN_OUTCOMES} outcomes)", markup=False)
    else:
        out.print(
            f"  correction that fits: {check.shift:+.2f} logits "
            "(toolscout report --accept-confidence)",
            markup=False,
        )
