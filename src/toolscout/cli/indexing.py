"""What ``toolscout index`` reads beside the catalog and prints: the policy file found
with it (and whether it may replace the stored one), the import with its progress bar, and
the report, as text or as one JSON object. The command itself is in :mod:`toolscout.cli.app`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from toolscout.cli.app import _shown, err, fail, out


class Indexed(NamedTuple):
    """What one ``toolscout index`` did, for its report."""

    path: Path | str
    specs: Sequence[Any]
    plan: Any
    report: Any
    warnings: Sequence[Any]
    #: what happened to the stored policy (``_policy_action``) and where it came from
    action: str
    source: str


def _read_specs(paths: Sequence[Path], *, strict: bool) -> list[Any]:
    from toolscout.loader import read_catalog

    return read_catalog(paths, strict=strict)


def _add(
    ts: Any,
    who: Any,
    specs: Sequence[Any],
    warnings: Sequence[Any],
    *,
    replace: bool,
    quiet: bool,
    force: bool = False,
) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("embedding"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=quiet,
    ) as bar:
        task = bar.add_task("embed", total=None)
        return ts.admin.import_tools(
            who,
            specs,
            replace_all=replace,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            warnings=[str(w) for w in warnings],
            force=force,
        )


def _policy_wanted(
    paths: Sequence[Path], explicit: Path | None, replace_policy: bool
) -> tuple[Any, str]:
    """(the policy this import would store, where it came from) or (None, "")."""
    from toolscout.loader import read_policy

    if explicit is not None:
        return read_policy(explicit), str(explicit)
    for p in paths:
        candidate = (p if p.is_dir() else p.parent) / "policy.yaml"
        if candidate.is_file():
            return read_policy(candidate), str(candidate)
    if replace_policy:
        raise fail("--replace-policy: no policy.yaml beside the catalog; use --policy FILE")
    return None, ""


def _policy_action(stored: Any, wanted: Any, source: str, *, explicit: bool) -> str:
    """What happens to the stored policy: none, unchanged, stored; or a refusal.

    A policy.yaml found beside the catalog replaces a stored, different policy only
    when asked (``--replace-policy`` or ``--policy FILE``); a catalog without a
    policy adopts it."""
    from toolscout.policy import PolicyConfig

    if wanted is None:
        return "none"
    if wanted == stored:
        return "unchanged"
    if explicit or stored == PolicyConfig():
        return "stored"
    raise fail(
        f"{source} differs from the policy stored in the catalog; nothing was changed: "
        "pass --replace-policy to store it, or --policy FILE to store another"
    )


def _index_json(done: Indexed) -> dict[str, Any]:
    from collections import Counter

    path, specs, plan, report, warnings, action, source = done
    s = report.stats
    return {
        "db": _shown(path),
        "tools": len(specs),
        "added": s.added,
        "updated": s.updated,
        "unchanged": s.unchanged,
        "removed": s.removed,
        "embedded": s.embedded,
        "seconds": round(report.seconds, 3),
        "calibration": report.calibration or None,
        "changes": plan.to_dict(),
        "policy": {"action": action, "from": source or None},
        "warning_counts": dict(Counter(w.kind.value for w in warnings)),
        "warnings": [w.to_dict() for w in warnings],
        "notes": _notes(report, warnings),
    }


def _print_index(done: Indexed) -> None:
    from toolscout.imports import summarise_warnings

    path, specs, plan, report, warnings, action, source = done
    s = report.stats
    out.print(
        f"indexed {len(specs)} tools into {_shown(path)}: {s.added} added, {s.updated} updated, "
        f"{s.unchanged} unchanged, {s.removed} removed; {s.embedded} texts embedded "
        f"in {report.seconds:.1f}s",
        markup=False,
    )
    if report.calibration:
        out.print(report.calibration, markup=False)
    for change in plan.updated[:10]:
        out.print(f"  updated {change}", markup=False)
    if len(plan.updated) > 10:
        out.print(f"  … and {len(plan.updated) - 10} more updated (--json lists them)")
    for change in plan.forced:
        out.print(
            f"forced: {change.tool_id}: " + "; ".join(str(c) for c in change.protected),
            markup=False,
        )
    if action == "stored":
        out.print(f"policy: stored {source} with the catalog", markup=False)
    elif action == "unchanged":
        out.print(f"policy: {source} is the stored policy (unchanged)", markup=False)
    for line in summarise_warnings(warnings):
        err.print(f"warning: {line}", markup=False)
    if warnings:
        err.print(
            f"warning: {len(warnings)} quality warning(s) in all; --json lists every one, "
            "--strict refuses them",
            markup=False,
        )
    notes = _notes(report, warnings)
    for note in notes[:5]:
        err.print(f"warning: {note}", markup=False)
    if len(notes) > 5:
        err.print(f"warning: … and {len(notes) - 5} more (--json lists them)")


def _notes(report: Any, warnings: Sequence[Any]) -> list[str]:
    """The report's other warnings (oversized cards, ...): import warnings are summarised."""
    mine = {str(w) for w in warnings}
    return [w for w in report.warnings if w not in mine]
