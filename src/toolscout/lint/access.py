"""Checks on what a tool may do and who may call it: risk, scopes and names that lie.

The policy asks for the explicit admin scope only for tools whose risk is
``admin`` or ``destructive``; a tool that deletes but says ``write`` slips past
that gate. These checks read the tool's name and annotations against its
declared risk and scopes.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolscout.cards import Risk
from toolscout.discovery.lexical import words
from toolscout.lint.findings import Finding
from toolscout.lint.source import LintTool
from toolscout.policy import DEFAULT_ADMIN_SCOPE

#: name words that mean data or access is destroyed or taken away
DESTRUCTIVE_WORDS = frozenset(
    "delete drop truncate purge erase wipe destroy obliterate nuke shred".split()
)
#: name words that mean the tool changes who may do what, or overrides a control
ADMIN_WORDS = frozenset("grant revoke impersonate override sudo elevate".split())
#: name words that say "this changes something" when they lead the name (HTTP verbs too)
WRITE_WORDS = frozenset(
    "create add insert post put patch update edit modify set change rename move send submit "
    "upload write save store publish book schedule cancel assign approve reject close reset "
    "restart start stop enable disable archive merge import transfer pay charge refund invite "
    "register subscribe unsubscribe remove replace apply trigger deploy".split()
)
#: name words that say "this only reads" when they lead the name
READ_WORDS = frozenset(
    "get list read search find fetch view show lookup query describe check count "
    "browse inspect peek preview".split()
)


def _name_words(tool: LintTool) -> list[str]:
    return words(tool.spec.card.name)


def _privileged_word(tool: LintTool) -> tuple[str, Risk] | None:
    for w in _name_words(tool):
        if w in DESTRUCTIVE_WORDS:
            return w, Risk.DESTRUCTIVE
        if w in ADMIN_WORDS:
            return w, Risk.ADMIN
    return None


def _is_admin_scope(scope: str, admin_scope: str) -> bool:
    return scope == admin_scope or scope.rsplit(":", 1)[-1] == "admin"


def _annotated_destructive(tool: LintTool) -> str | None:
    ann = tool.annotations
    if ann.get("destructiveHint") is True:
        return "destructiveHint: true"
    if ann.get("readOnlyHint") is False:
        return "readOnlyHint: false"
    return None


def _says_it_writes(tool: LintTool) -> str | None:
    """Why the tool's name or annotations say it changes or deletes something, if they do."""
    names = _name_words(tool)
    deleting = [w for w in names if w in DESTRUCTIVE_WORDS or w in ADMIN_WORDS]
    if deleting:
        return f"the name says {deleting[0]!r}"
    if names and names[0] in WRITE_WORDS:
        return f"the name starts with {names[0]!r}"
    why = _annotated_destructive(tool)
    return f"its annotations say {why}" if why is not None else None


def check_risk_declared(
    tools: Iterable[LintTool], admin_scope: str = DEFAULT_ADMIN_SCOPE
) -> list[Finding]:
    """Tools published without a risk (so indexed as ``read``) that evidently need one."""
    out: list[Finding] = []
    for t in tools:
        if t.risk_declared:
            continue
        card = t.spec.card
        admin = [s for s in card.scopes if _is_admin_scope(s, admin_scope)]
        if admin:
            out.append(
                Finding.of(
                    "admin-scope-no-risk",
                    [t.id],
                    f"{t.id} requires the admin scope {admin[0]!r} but declares no risk, so "
                    "it is indexed as a read tool",
                    "declare its risk: admin or destructive if it changes access or data "
                    "(read or write if it truly does not)",
                )
            )
        why = _says_it_writes(t)
        if why is not None:
            out.append(
                Finding.of(
                    "risk-undeclared",
                    [t.id],
                    f"{t.id} declares no risk, so it is indexed as a read tool, but {why}",
                    "declare its risk (write, or destructive/admin with an admin scope when it "
                    "deletes or changes access)",
                )
            )
    return out


def check_access(
    tools: Iterable[LintTool], admin_scope: str = DEFAULT_ADMIN_SCOPE
) -> list[Finding]:
    out: list[Finding] = []
    for t in tools:
        card = t.spec.card
        hit = _privileged_word(t)
        if hit is not None and not card.risk.privileged:
            word, should = hit
            out.append(
                Finding.of(
                    "privileged-not-gated",
                    [t.id],
                    f"{t.id}: the name says {word!r} but risk is {card.risk.value!r}, so the "
                    f"admin scope is not required to see or call it",
                    f"set risk: {should.value} (and an admin scope such as "
                    f"'{_service(t)}:admin'), or rename it if it does not {word}",
                    word=word,
                )
            )
        if (
            card.risk.privileged
            and card.scopes
            and not any(_is_admin_scope(s, admin_scope) for s in card.scopes)
        ):
            out.append(
                Finding.of(
                    "admin-scope-missing",
                    [t.id],
                    f"{t.id}: risk is {card.risk.value!r} but its scopes "
                    f"({', '.join(card.scopes)}) include no admin scope",
                    f"require '{_service(t)}:admin' so that write grants do not cover it",
                )
            )
        if not card.scopes:
            sev_note = "anyone in its tenants" if card.tenants else "every caller"
            out.append(
                Finding.of(
                    "scopes-missing",
                    [t.id],
                    f"{t.id} requires no scope: {sev_note} may discover and call it",
                    f"add the scope that grants it, e.g. '{_service(t)}:"
                    f"{'read' if card.risk is Risk.READ else 'write'}'",
                )
            )
        lead = _name_words(t)[:1]
        if lead and lead[0] in READ_WORDS and card.risk is not Risk.READ:
            out.append(
                Finding.of(
                    "write-named-read",
                    [t.id],
                    f"{t.id}: the name starts with {lead[0]!r} but risk is {card.risk.value!r}",
                    "name it for the change it makes (e.g. update_..., apply_...), or set "
                    "risk: read if it only reads",
                )
            )
        why = _annotated_destructive(t)
        if why is not None and card.risk is Risk.READ:
            out.append(
                Finding.of(
                    "read-annotated-destructive",
                    [t.id],
                    f"{t.id}: risk is 'read' but its annotations say {why}",
                    "set risk: destructive (or write) to match what the server declares",
                )
            )
    return out


def _service(tool: LintTool) -> str:
    card = tool.spec.card
    for scope in card.scopes:
        return scope.split(":", 1)[0]
    return card.source or card.id.split(".", 1)[0].split(":", 1)[0] or "service"
