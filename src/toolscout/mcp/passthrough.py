"""Upstream resources and prompts, passed through the gateway, namespaced and entitled.

A caller sees a server's resources and prompts when the policy function that
decides for tools (:func:`toolscout.policy.decide_scopes`) allows it the
server-wide scopes and tenants of that server's ``toolscout`` section (at read
risk). Resources keep their URIs (the first server listing a URI owns it) and
are named ``<server>/<name>``; prompts are named ``<server>/<name>`` and routed
by that prefix. Unknown and not-allowed look the same to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolscout.cards import CapabilityCard
from toolscout.errors import ToolscoutError
from toolscout.mcp.upstream import Upstream, Upstreams
from toolscout.policy import PolicyConfig, Principal, decide_scopes

__all__ = ["get_prompt", "list_prompts", "list_resources", "read_resource", "servers_for"]


def servers_for(upstreams: Upstreams, policy: PolicyConfig, principal: Principal) -> list[Upstream]:
    """The upstreams whose server-wide scopes and tenants ``principal`` satisfies."""
    granted = policy.effective_scopes(principal)
    out = []
    for up in upstreams.servers.values():
        sp = up.config.policy
        card = CapabilityCard(up.config.prefix + "*", up.name, up.name, sp.scopes, sp.tenants)
        if decide_scopes(granted, principal.tenant, card, policy.admin_scope).allowed:
            out.append(up)
    return out


def list_resources(servers: Sequence[Upstream]) -> Any:
    from mcp.types import ListResourcesResult, Resource

    seen: set[str] = set()
    resources = []
    for up in servers:
        for r in up.resources:
            if r["uri"] not in seen:
                seen.add(r["uri"])
                named = {**r, "name": up.config.prefix + str(r.get("name", ""))}
                resources.append(Resource.model_validate(named))
    return ListResourcesResult(resources=resources)


async def read_resource(servers: Sequence[Upstream], uri: str) -> Any:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, ReadResourceResult

    for up in servers:
        if any(r["uri"] == uri for r in up.resources):
            wire = await _forward(up, f"resource {uri}", lambda c: c.read_resource(uri))
            return ReadResourceResult.model_validate(wire)
    raise MCPError(INVALID_PARAMS, f"unknown resource {uri}")


def list_prompts(servers: Sequence[Upstream]) -> Any:
    from mcp.types import ListPromptsResult, Prompt

    prompts = [
        Prompt.model_validate({**p, "name": up.config.prefix + str(p["name"])})
        for up in servers
        for p in up.prompts
    ]
    return ListPromptsResult(prompts=prompts)


async def get_prompt(
    servers: Sequence[Upstream], name: str, arguments: Mapping[str, str] | None
) -> Any:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, GetPromptResult

    owner = next(
        (
            up
            for up in servers
            if name.startswith(up.config.prefix)
            and any(p["name"] == name[len(up.config.prefix) :] for p in up.prompts)
        ),
        None,
    )
    if owner is None:
        raise MCPError(INVALID_PARAMS, f"unknown prompt {name}")
    bare, args = name[len(owner.config.prefix) :], dict(arguments or {})
    wire = await _forward(owner, f"prompt {name}", lambda c: c.get_prompt(bare, args))
    return GetPromptResult.model_validate(wire)


async def _forward(up: Upstream, what: str, send: Callable[[Any], Any]) -> dict[str, Any]:
    """The upstream's answer without its own envelope; faults as protocol errors."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import INTERNAL_ERROR

    try:
        wire = await up.request(what, send)
    except ToolscoutError as exc:
        raise MCPError(INTERNAL_ERROR, str(exc)) from None
    return {k: v for k, v in wire.items() if k not in ("_meta", "resultType")}
