"""Shared pieces of the console tests: the demo catalog, tokens, logging in with httpx."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from serve_fixture import KEY, token
from toolscout.loader import demo_catalog_dir, read_catalog, read_policy

#: generous: the suite must pass on a loaded machine, and no token is minted at import
TTL = 6 * 3600
ADMIN_SCOPES = ("toolscout:admin", "toolscout:platform")


def build_demo(path: Path) -> None:
    """The whole bundled demo catalog and its policy, as `toolscout demo` indexes them."""
    from support import card_embedder
    from toolscout import Settings, Toolscout

    with Toolscout.open(Settings(db=str(path), jwt_key=KEY), embedder=card_embedder()) as ts:
        ts.catalog.set_policy(read_policy(demo_catalog_dir() / "policy.yaml"))
        ts.catalog.add(read_catalog([demo_catalog_dir()]), replace_all=True)


def only_for(tenant: str) -> set[str]:
    """Demo tool ids offered to ``tenant`` alone."""
    return {s.id for s in read_catalog([demo_catalog_dir()]) if s.card.tenants == (tenant,)}


def privileged() -> set[str]:
    return {s.id for s in read_catalog([demo_catalog_dir()]) if s.card.risk.privileged}


def user(subject: str, tenant: str, *roles: str) -> str:
    return token(subject, tenant, roles=list(roles), ttl_seconds=TTL)


def tenant_admin(subject: str = "lena@acme", tenant: str = "acme") -> str:
    """A tenant administrator: the exact admin scope, a tenant, a support role."""
    return token(
        subject, tenant, roles=["support_agent"], scopes=["toolscout:admin"], ttl_seconds=TTL
    )


def platform_admin() -> str:
    return token("root@platform", "acme", scopes=list(ADMIN_SCOPES), ttl_seconds=TTL)


#: every client :func:`login` opened, closed by :func:`close_clients`
CLIENTS: list[httpx.Client] = []


def close_clients() -> None:
    while CLIENTS:
        CLIENTS.pop().close()


def login(url: str, tok: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=120)
    CLIENTS.append(client)
    page = client.get("/console/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None, page.text
    done = client.post("/console/login", data={"nonce": nonce.group(1), "token": tok})
    assert done.status_code == 303, done.text
    return client


def csrf(client: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/playground").text)
    assert found is not None
    return found.group(1)


def tool_ids(html: str) -> list[str]:
    return re.findall(r'<code class="tool">([^<]+)</code>', html)
