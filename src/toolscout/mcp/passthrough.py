"""Upstream resources, templates, prompts and completions, passed through, entitled.

A caller sees a server's resources and prompts when the policy function that
decides for tools (:func:`toolscout.policy.decide_scopes`) allows it the
server-wide scopes and tenants of that server's ``toolscout`` section (at read
risk). Unknown and not-allowed look the same to the caller.

Names: resources keep their URIs (the URI is what a client reads; the first
server listing a URI owns it) and are named ``<server>/<name>``; prompts are
named ``<server>/<name>``; a prompt asked for by its bare upstream name is found
when exactly one of the caller's servers has it. Lists are fetched live from
each server, every page, so what a server created a moment ago is there; a
template URI is routed to the server whose template matches it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolscout.cards import CapabilityCard
from toolscout.errors import ToolscoutError
from toolscout.mcp.upstream import Upstream, Upstreams
from toolscout.mcp.wire import pages
from toolscout.policy import PolicyConfig, Principal, decide_scopes

__all__ = [
    "complete",
    "get_prompt",
    "list_prompts",
    "list_resources",
    "list_templates",
    "prompt_owner",
    "read_resource",
    "resource_owner",
    "servers_for",
    "set_level",
    "subscribe",
]


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


def _caps(up: Upstream, what: str) -> bool:
    client = up._client
    if client is None or up.state != "up":
        return False
    return getattr(client.server_capabilities, what, None) is not None


#: the field of each list result that holds its items (SDK attribute names)
_ITEMS = {
    "list_resources": "resources",
    "list_resource_templates": "resource_templates",
    "list_prompts": "prompts",
}


async def _live(up: Upstream, attr: str, method: str) -> list[dict[str, Any]]:
    """One server's full list (every page), fetched now; the cached one if it cannot answer."""
    if not _caps(up, "resources" if attr != "prompts" else "prompts"):
        return list(getattr(up, attr))
    try:
        items: list[dict[str, Any]] = await up.raw(
            method, lambda c: pages(getattr(c, method), _ITEMS[method])
        )
    except ToolscoutError:
        return list(getattr(up, attr))
    setattr(up, attr, items)
    return items


async def list_resources(servers: Sequence[Upstream]) -> Any:
    from mcp.types import ListResourcesResult, Resource

    seen: set[str] = set()
    resources = []
    for up in servers:
        for r in await _live(up, "resources", "list_resources"):
            if r["uri"] not in seen:
                seen.add(r["uri"])
                named = {**r, "name": up.config.prefix + str(r.get("name", ""))}
                resources.append(Resource.model_validate(named))
    return ListResourcesResult(resources=resources)


async def list_templates(servers: Sequence[Upstream]) -> Any:
    from mcp.types import ListResourceTemplatesResult, ResourceTemplate

    templates = []
    for up in servers:
        for t in await _live(up, "templates", "list_resource_templates"):
            named = {**t, "name": up.config.prefix + str(t.get("name", ""))}
            templates.append(ResourceTemplate.model_validate(named))
    return ListResourceTemplatesResult(resource_templates=templates)


def _matches(template: str, uri: str) -> bool:
    from mcp.shared.uri_template import UriTemplate

    try:
        return UriTemplate.parse(template).match(uri) is not None
    except Exception:
        return False


async def resource_owner(servers: Sequence[Upstream], uri: str) -> Upstream | None:
    """The server that serves ``uri``: listing it, else a matching template, else the only
    server offering resources."""
    for up in servers:
        if any(r["uri"] == uri for r in up.resources):
            return up
    for up in servers:
        if any(_matches(str(t.get("uriTemplate", "")), uri) for t in up.templates):
            return up
    for up in servers:  # created since the last listing
        if any(r["uri"] == uri for r in await _live(up, "resources", "list_resources")):
            return up
    offering = [up for up in servers if _caps(up, "resources")]
    return offering[0] if len(offering) == 1 else None


async def read_resource(servers: Sequence[Upstream], uri: str) -> Any:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, ReadResourceResult

    up = await resource_owner(servers, uri)
    if up is None:
        raise MCPError(INVALID_PARAMS, f"unknown resource {uri}")
    wire = await _forward(up, f"resource {uri}", lambda c: c.read_resource(uri))
    return ReadResourceResult.model_validate(wire)


async def subscribe(servers: Sequence[Upstream], uri: str, *, on: bool) -> Upstream:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS

    up = await resource_owner(servers, uri)
    if up is None:
        raise MCPError(INVALID_PARAMS, f"unknown resource {uri}")

    async def send(c: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # handshake-era feature, deprecated in 2026-07-28
            return await (c.subscribe_resource(uri) if on else c.unsubscribe_resource(uri))

    await _forward(up, f"resource {uri}", send)
    return up


async def list_prompts(servers: Sequence[Upstream]) -> Any:
    from mcp.types import ListPromptsResult, Prompt

    prompts = []
    for up in servers:
        for p in await _live(up, "prompts", "list_prompts"):
            prompts.append(Prompt.model_validate({**p, "name": up.config.prefix + str(p["name"])}))
    return ListPromptsResult(prompts=prompts)


def prompt_owner(servers: Sequence[Upstream], name: str) -> tuple[Upstream, str] | None:
    """(server, upstream name) of a prompt named ``<server>/<name>`` or, if unambiguous, bare."""
    for up in servers:
        bare = name[len(up.config.prefix) :]
        if name.startswith(up.config.prefix) and any(p["name"] == bare for p in up.prompts):
            return up, bare
    having = [up for up in servers if any(p["name"] == name for p in up.prompts)]
    return (having[0], name) if len(having) == 1 else None


async def get_prompt(
    servers: Sequence[Upstream], name: str, arguments: Mapping[str, str] | None
) -> Any:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, GetPromptResult

    found = prompt_owner(servers, name)
    if found is None:
        for up in servers:  # a prompt added since the last listing
            await _live(up, "prompts", "list_prompts")
        found = prompt_owner(servers, name)
    if found is None:
        raise MCPError(INVALID_PARAMS, f"unknown prompt {name}")
    owner, bare = found
    args = dict(arguments or {})
    wire = await _forward(owner, f"prompt {name}", lambda c: c.get_prompt(bare, args))
    return GetPromptResult.model_validate(wire)


async def complete(servers: Sequence[Upstream], params: Any) -> Any:
    """``completion/complete`` routed by its reference (a prompt or a resource template)."""
    from mcp.types import CompleteResult, Completion, PromptReference, ResourceTemplateReference

    ref = params.ref
    owner: Upstream | None = None
    if isinstance(ref, PromptReference) or getattr(ref, "type", "") == "ref/prompt":
        found = prompt_owner(servers, ref.name)
        if found is not None:
            owner, bare = found
            ref = PromptReference(type="ref/prompt", name=bare)
    else:
        uri = str(getattr(ref, "uri", ""))
        owner = next(
            (up for up in servers if any(t.get("uriTemplate") == uri for t in up.templates)),
            None,
        ) or await resource_owner(servers, uri)
        ref = ResourceTemplateReference(type="ref/resource", uri=uri)
    if owner is None:
        return CompleteResult(completion=Completion(values=[]))
    argument = {"name": params.argument.name, "value": params.argument.value}
    context = dict(params.context.arguments or {}) if params.context is not None else None
    wire = await _forward(
        owner, "completion", lambda c: c.complete(ref, argument, context_arguments=context)
    )
    return CompleteResult.model_validate(wire)


async def set_level(servers: Sequence[Upstream], level: str) -> None:
    """``logging/setLevel`` to every server the caller may use that offers logging."""
    for up in servers:
        if not _caps(up, "logging"):
            continue

        async def send(c: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in 2026-07-28, not gone
                return await c.set_logging_level(level)

        with contextlib.suppress(ToolscoutError):
            await up.request("logging/setLevel", send)


async def _forward(up: Upstream, what: str, send: Callable[[Any], Any]) -> dict[str, Any]:
    """The upstream's answer without its own envelope; faults as protocol errors."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import INTERNAL_ERROR

    try:
        wire = await up.request(what, send)
    except ToolscoutError as exc:
        reason = getattr(exc, "reason", "")
        raise MCPError(INTERNAL_ERROR, f"{exc} [{reason}]" if reason else str(exc)) from None
    return {k: v for k, v in wire.items() if k not in ("_meta", "resultType")}
