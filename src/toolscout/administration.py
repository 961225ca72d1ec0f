"""Catalog administration: who may change the catalog, and the audit of every change.

Every surface (HTTP, CLI, console, MCP) changes the catalog through
:class:`Administration` (reached as ``Toolscout.admin``), never through the store:

1. **decide** — :func:`toolscout.policy.may_administer` for every part of the change,
   before anything is written: the whole-catalog actions (``replace_all``, ``force``,
   a policy) need a platform administrator; each tool touched needs an administrator
   of exactly the tenants it is offered to, as stored *and* as imported;
2. **audit the intent** — one ``admin`` row per tool that changes (digest before → after)
   is written before the change; if it cannot be written nothing changes;
3. **apply** — one store transaction (:meth:`Catalog.add` / :meth:`Catalog.remove`);
4. **audit the outcome** — one row for the whole operation (``applied`` or ``failed``).

A refused attempt is audited too (decision ``denied``, with the real reason), and the
caller gets :class:`~toolscout.errors.AdminDenied`. A tenant administrator asking to
delete a tool of another tenant is answered as for an id that does not exist.

The local operator — whoever can open the store file itself, as ``toolscout index``
does without ``--token`` — is a platform administrator by construction (it could
write the file directly); its changes are audited under ``local:<user>``.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolscout.cards import ToolSpec, check_unique
from toolscout.errors import AdminDenied, ImportRefused, StoreError
from toolscout.policy import (
    AdminAction,
    AdminLevel,
    PolicyConfig,
    Principal,
    Reason,
    admin_level,
    may_administer,
)

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.shortlist import IndexReport
    from toolscout.gateway.audit import AuditLog
    from toolscout.telemetry.report import AcceptedAlias


@dataclass(frozen=True, slots=True)
class Change:
    """One tool an administrative operation changes: its digest before and after
    (``""`` where the tool does not or will no longer exist)."""

    tool_id: str
    before: str
    after: str


def local_operator(config: PolicyConfig) -> Principal:
    """Whoever holds the store file: a platform administrator, named for the audit."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return Principal.of(f"local:{user}", scopes=[config.platform_scope])


def policy_digest(policy: PolicyConfig) -> str:
    blob = json.dumps(policy.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class Administration:
    """The catalog's administrative operations for a principal, decided and audited."""

    def __init__(self, catalog: Catalog, audit: AuditLog) -> None:
        self.catalog = catalog
        self.audit = audit

    # -- questions ----------------------------------------------------------------
    def level(self, principal: Principal) -> AdminLevel:
        return admin_level(principal, self.catalog.policy)

    def require(
        self,
        principal: Principal,
        action: AdminAction,
        *,
        operation: str,
        tenants: Sequence[str] | None = None,
        tool_id: str = "",
    ) -> None:
        """Raise :class:`AdminDenied` (audited) unless ``principal`` may do ``action``."""
        decision = may_administer(principal, self.catalog.policy, action, tenants)
        if decision.allowed:
            return
        assert decision.reason is not None
        self._denied(
            principal, operation, tool_id or action.value, decision.reason, decision.detail
        )
        raise AdminDenied(
            operation,
            decision.reason.value,
            _public(decision.reason, action, tool_id, self.catalog.policy, principal),
            tool_id,
        )

    # -- operations -----------------------------------------------------------------
    def import_tools(
        self,
        principal: Principal,
        specs: Iterable[ToolSpec],
        *,
        replace_all: bool = False,
        force: bool = False,
        warnings: Sequence[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Index ``specs`` for ``principal``: decided, audited, one transaction."""
        batch = check_unique(specs)
        op = "import"
        stored = self.check_import(principal, batch, replace_all=replace_all, force=force)
        changes = [
            Change(s.id, stored[s.id].content_hash() if s.id in stored else "", s.content_hash())
            for s in batch
        ]
        changes = [c for c in changes if c.before != c.after]
        if replace_all:
            keep = {s.id for s in batch}
            changes += [
                Change(s.id, s.content_hash(), "") for s in self.catalog.specs() if s.id not in keep
            ]

        def apply() -> IndexReport:
            return self.catalog.add(
                batch, replace_all=replace_all, force=force, warnings=warnings, progress=progress
            )

        report: IndexReport = self._apply(principal, op, changes, apply)
        return report

    def check_import(
        self,
        principal: Principal,
        batch: Sequence[ToolSpec],
        *,
        replace_all: bool = False,
        force: bool = False,
    ) -> dict[str, ToolSpec]:
        """Raise :class:`AdminDenied` (audited) unless ``principal`` may import ``batch``;
        the stored specs of its ids otherwise. Ask before telling the caller anything
        about the stored tools (an import plan names their tenants)."""
        op = "import"
        self.require(principal, AdminAction.VIEW, operation=op)
        if replace_all:
            self.require(principal, AdminAction.REPLACE_ALL, operation=op)
        if force:
            self.require(principal, AdminAction.FORCE, operation=op)
        stored = {s.id: s for s in self.catalog.specs_of([s.id for s in batch])}
        for spec in batch:
            old = stored.get(spec.id)
            if old is not None:
                self.require(
                    principal,
                    AdminAction.CHANGE_TOOL,
                    operation=op,
                    tenants=old.card.tenants,
                    tool_id=spec.id,
                )
            self.require(
                principal,
                AdminAction.CHANGE_TOOL,
                operation=op,
                tenants=spec.card.tenants,
                tool_id=spec.id,
            )
        return stored

    def delete_tools(self, principal: Principal, ids: Sequence[str]) -> int:
        """Delete ``ids``; a tenant administrator may name only its own tenant's tools
        (another tenant's id is refused as an unknown one would be)."""
        op = "delete"
        self.require(principal, AdminAction.VIEW, operation=op)
        wanted = list(dict.fromkeys(ids))
        stored = {s.id: s for s in self.catalog.specs_of(wanted)}
        platform = self.level(principal) is AdminLevel.PLATFORM
        for tid in wanted:
            old = stored.get(tid)
            if old is None and platform:
                continue  # nothing to delete; the platform may know that
            decision = (
                may_administer(
                    principal, self.catalog.policy, AdminAction.CHANGE_TOOL, old.card.tenants
                )
                if old is not None
                else None
            )
            if decision is None or not decision.allowed:
                real = decision.reason if decision is not None else Reason.UNKNOWN_TOOL
                assert real is not None
                self._denied(principal, op, tid, real, decision.detail if decision else "")
                raise AdminDenied(
                    op,
                    Reason.UNKNOWN_TOOL.value,
                    f"no tool of tenant {principal.tenant!r} has the id {tid!r}",
                    tid,
                )
        changes = [Change(t, stored[t].content_hash(), "") for t in wanted if t in stored]
        removed: int = self._apply(principal, op, changes, lambda: self.catalog.remove(wanted))
        return removed

    def replace_policy(self, principal: Principal, policy: PolicyConfig) -> None:
        """Store ``policy`` (platform administrators only)."""
        op = "replace_policy"
        self.require(principal, AdminAction.REPLACE_POLICY, operation=op)
        before, after = policy_digest(self.catalog.policy), policy_digest(policy)
        if before == after:
            return
        self._apply(
            principal,
            op,
            [Change("policy", before, after)],
            lambda: self.catalog.set_policy(policy),
        )

    def accept_aliases(
        self, principal: Principal, suggestion_ids: Sequence[str]
    ) -> list[AcceptedAlias]:
        """Accept alias suggestions of the usage report into their tools' cards (each
        tool must be one ``principal`` may change)."""
        from toolscout.telemetry.report import accept_aliases, report_for

        op = "accept_alias"
        self.require(principal, AdminAction.VIEW, operation=op)
        by_id = {s.id: s for s in report_for(self.catalog).suggestions}
        tools = {by_id[i].tool_id for i in suggestion_ids if i in by_id}
        specs = {s.id: s for s in self.catalog.specs_of(sorted(tools))}
        for tid, spec in specs.items():
            self.require(
                principal,
                AdminAction.CHANGE_TOOL,
                operation=op,
                tenants=spec.card.tenants,
                tool_id=tid,
            )
        aliases: dict[str, list[str]] = {}
        for i in dict.fromkeys(suggestion_ids):
            if i in by_id:
                aliases.setdefault(by_id[i].tool_id, []).append(by_id[i].alias)
        changes = [
            Change(t, s.content_hash(), s.with_aliases(aliases[t]).content_hash())
            for t, s in specs.items()
        ]
        accepted: list[AcceptedAlias] = self._apply(
            principal, op, changes, lambda: accept_aliases(self.catalog, suggestion_ids)
        )
        return accepted

    def set_confidence(self, principal: Principal, apply: Callable[[], Any]) -> Any:
        """Run a catalog-wide confidence change (platform administrators only)."""
        op = "confidence"
        self.require(principal, AdminAction.CATALOG, operation=op)
        return self._apply(principal, op, [Change("catalog", "", "")], apply)

    # -- audit ----------------------------------------------------------------------
    def _denied(
        self, principal: Principal, operation: str, target: str, reason: Reason, detail: str
    ) -> None:
        self.audit.admin(
            subject=principal.subject,
            tenant=principal.tenant,
            action=operation,
            target=target,
            decision="denied",
            reason=reason.value,
            status="refused",
            detail=detail,
        )

    def _apply(
        self,
        principal: Principal,
        operation: str,
        changes: Sequence[Change],
        apply: Callable[[], Any],
    ) -> Any:
        """Audit each change, run ``apply``, audit the outcome."""
        who = {"subject": principal.subject, "tenant": principal.tenant, "action": operation}
        # one transaction for every change; a failure here raises before anything changes
        self.audit.admin_many(
            **who, changes=[(c.tool_id, c.before, c.after) for c in changes], status="started"
        )
        try:
            result = apply()
        except ImportRefused as exc:
            self.audit.admin(
                **who,
                target="catalog",
                decision="denied",
                reason="import_refused",
                status="refused",
                detail=str(exc),
            )
            raise
        except Exception as exc:
            self._failed(who, exc)
            raise
        self.audit.admin(
            **who, target="catalog", status="applied", detail=f"{len(changes)} change(s)"
        )
        return result

    def _failed(self, who: dict[str, str], exc: Exception) -> None:
        # the original failure is what the caller must see, even if this row cannot be written
        with contextlib.suppress(StoreError):
            self.audit.admin(
                **who,
                target="catalog",
                decision="error",
                reason="failed",
                status="failed",
                detail=f"{type(exc).__name__}: {exc}",
            )


def _public(
    reason: Reason, action: AdminAction, tool_id: str, config: PolicyConfig, who: Principal
) -> str:
    """What the caller is told: the rule it hit, never whose tool it was."""
    if reason is Reason.NOT_ADMIN:
        return (
            f"administration needs the {config.admin_scope} scope (tenant administrators) "
            f"or {config.platform_scope} (platform administrators); no wildcard grants either"
        )
    if reason is Reason.PLATFORM_REQUIRED:
        what = {
            AdminAction.REPLACE_ALL: "replace_all",
            AdminAction.FORCE: "force",
            AdminAction.REPLACE_POLICY: "replacing the policy",
            AdminAction.CATALOG: "a catalog-wide change",
        }.get(action, action.value)
        return f"{what} needs a platform administrator ({config.platform_scope})"
    return (
        f"tool {tool_id!r}: a tenant administrator of {who.tenant!r} changes only tools "
        f"offered to exactly [{who.tenant}]; untenanted, multi-tenant and other tenants' "
        f"tools need a platform administrator ({config.platform_scope})"
    )


__all__ = ["Administration", "Change", "local_operator", "policy_digest"]
