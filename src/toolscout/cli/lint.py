"""``toolscout lint``: check a catalog before deployment; exit 1 at the chosen severity."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer

from toolscout.cli.app import DbOption, err, fail, out
from toolscout.lint import CHECKS, LintReport, Severity, lint_catalog, lint_paths
from toolscout.lint.overlap import MAX_PROBES
from toolscout.lint.text import DEFAULT_TOKEN_BUDGET


def lint_command(
    catalog_paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="[CATALOG]...", help="tools.jsonl, card YAML/JSON or dirs"),
    ] = None,
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    fail_on: Annotated[
        str, typer.Option("--fail-on", help="Exit 1 on findings at this severity or worse.")
    ] = "error",
    token_budget: Annotated[
        int, typer.Option("--token-budget", help="Largest card size in tokens.")
    ] = DEFAULT_TOKEN_BUDGET,
    overlap: Annotated[
        bool, typer.Option("--overlap/--no-overlap", help="Measure overlapping tools.")
    ] = True,
    max_probes: Annotated[
        int, typer.Option("--max-probes", help="Probe queries at most (sampled beyond).")
    ] = MAX_PROBES,
    cache: Annotated[
        Path | None,
        typer.Option("--cache", help="SQLite file keeping lint's index between runs."),
    ] = None,
    show: Annotated[int, typer.Option("--show", help="Findings printed per check.")] = 10,
) -> None:
    """Check a catalog: overlapping tools, card quality, risk and scopes, schemas, ids."""
    levels = {s.value: s for s in Severity if s is not Severity.INFO}
    if fail_on not in levels:
        raise fail(f"--fail-on must be one of: {', '.join(levels)}; got {fail_on!r}")
    if token_budget < 1 or max_probes < 1 or show < 0:
        raise fail("--token-budget and --max-probes must be positive, --show not negative")
    if bool(catalog_paths) == (db is not None):
        raise fail("give catalog files to lint, or --db PATH for an indexed catalog (not both)")
    if catalog_paths:
        report = lint_paths(
            catalog_paths,
            token_budget=token_budget,
            admin_scope=_admin_scope(catalog_paths),
            measure_overlap=overlap,
            max_probes=max_probes,
            cache=cache,
        )
    else:
        from toolscout.discovery.catalog import Catalog

        target = str(db)
        if "://" not in target and not Path(target).is_file():
            raise fail(f"no catalog at {target}; run `toolscout index CATALOG --db {target}` first")
        with Catalog.open(target, log=False) as catalog:
            report = lint_catalog(
                catalog, token_budget=token_budget, measure_overlap=overlap, max_probes=max_probes
            )
    if as_json:
        out.print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False), markup=False)
    else:
        _print(report, show)
    if report.fails(levels[fail_on]):
        raise typer.Exit(code=1)


def _admin_scope(paths: list[Path]) -> str:
    """The admin scope of the policy.yaml beside the catalog, if there is one."""
    from toolscout.loader import read_policy
    from toolscout.policy import DEFAULT_ADMIN_SCOPE

    for p in paths:
        candidate = (p if p.is_dir() else p.parent) / "policy.yaml"
        if candidate.is_file():
            return read_policy(candidate).admin_scope
    return DEFAULT_ADMIN_SCOPE


def _print(report: LintReport, show: int) -> None:
    by_code: dict[str, list[Any]] = defaultdict(list)
    for f in report.findings:
        by_code[f.code].append(f)
    for code, found in by_code.items():
        check = CHECKS[code]
        out.print(
            f"\n{found[0].severity.value.upper()} {code} ({len(found)}): {check.title}",
            markup=False,
        )
        for f in found[:show]:
            out.print(f"  {f.message}", markup=False)
            out.print(f"    fix: {f.fix}", markup=False)
        if len(found) > show:
            out.print(f"  ... and {len(found) - show} more (--json lists all)", markup=False)
    if report.pairs:
        out.print("\ntop overlapping pairs (share of their probe queries confused):", markup=False)
        for p in report.pairs[:10]:
            hint = ("no not_for hint", "one-sided not_for", "not_for both ways")[p.hinted]
            out.print(
                f"  {p.rate:5.0%}  {p.a} <-> {p.b}  ({p.steals:.1f}/{p.probes}; {hint})",
                markup=False,
            )
    sev = report.by_severity()
    err.print(
        f"{report.tools} tools, {report.probes} probe queries, {report.seconds:.1f}s: "
        f"{sev['error']} errors, {sev['warning']} warnings, {sev['info']} notes",
        markup=False,
    )
