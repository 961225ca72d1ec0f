"""The gateway's configuration: the ``mcpServers`` JSON that Claude Desktop and Cursor use.

::

    {
      "mcpServers": {
        "time":   {"command": "mcp-server-time", "args": [], "env": {}, "cwd": null},
        "search": {"url": "https://example.test/mcp", "headers": {"X-Key": "..."},
                   "toolscout": {"scopes": ["web:search"],
                                 "tools": {"delete_*": {"risk": "destructive",
                                                        "scopes": ["web:admin"]}},
                                 "tenants": ["acme"], "hide": ["debug_*"],
                                 "aliases": {"search": ["look something up online"]},
                                 "not_for": {"search": ["searching local files"]}}}
      },
      "toolscout": {"db": ":memory:", "mode": "auto", "principal": {...}, "auth": {...}}
    }

Each server may carry a ``toolscout`` section; a server without one gets the
safe default: every one of its tools needs the scope ``mcp:<server>``, and its
risk comes from the tool's own annotations (no annotations: ``destructive``, as
the MCP specification says, so the admin scope is needed too). The top-level
``toolscout`` section configures the gateway itself (:class:`GatewayConfig`).
Every mistake is a :class:`~toolscout.errors.ConfigError` naming the server and
the field.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolscout.cards import Risk
from toolscout.errors import ConfigError
from toolscout.policy import Principal

__all__ = [
    "MODES",
    "GatewayConfig",
    "ServerConfig",
    "ServerPolicy",
    "ToolRule",
    "default_scope",
    "load_config",
    "local_principal",
    "parse_config",
]

#: how the client sees the tools: the tier rule, meta-tools only, dynamic list, all directly
MODES = ("auto", "meta", "dynamic", "direct")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.-]")
_SCOPE_RE = re.compile(r"^[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*$")


def safe_name(name: str) -> str:
    """A server or tool name reduced to ``[A-Za-z0-9_.-]`` (other characters become ``_``)."""
    return _NAME_RE.sub("_", name.strip()) or "_"


def default_catalog(source: str | None) -> Path:
    """``<user data dir>/mcp/<config name>-<hash of its path>.db`` (``gateway.db`` without one)."""
    from platformdirs import user_data_dir

    base = Path(user_data_dir("toolscout", appauthor=False)) / "mcp"
    if source is None:
        return base / "gateway.db"
    resolved = str(Path(source).resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:10]
    return base / f"{safe_name(Path(source).stem)}-{digest}.db"


def local_principal(config: GatewayConfig) -> Principal:
    """The caller of a stdio gateway whose config names none: the local user, holding each
    server's server-wide scopes (``mcp:<server>`` without a ``toolscout`` section) and
    nothing more — no per-tool scopes, no admin scope, so tools that say they are
    destructive stay refused."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "local"
    scopes = sorted({scope for s in config.servers for scope in s.policy.scopes})
    return Principal.of(f"local:{user}", "", scopes, ())


def default_scope(server: str) -> str:
    """The scope a server's tools need when its config has no ``toolscout`` section."""
    return f"mcp:{safe_name(server)}"


@dataclass(frozen=True, slots=True)
class ToolRule:
    """Settings for the tools whose upstream name matches ``pattern`` (a glob)."""

    pattern: str
    scopes: tuple[str, ...] | None = None
    risk: Risk | None = None
    aliases: tuple[str, ...] = ()
    not_for: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: seconds this tool may go without answering or reporting progress
    timeout_s: float | None = None

    def matches(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.pattern)


@dataclass(frozen=True, slots=True)
class ServerPolicy:
    """A server's ``toolscout`` section: who may use its tools and how they are described."""

    scopes: tuple[str, ...]
    tenants: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    rules: tuple[ToolRule, ...] = ()
    group: str = ""
    #: this server's call time-out, result cap and argument cap (``None``: the gateway's)
    timeout_s: float | None = None
    max_result_bytes: int | None = None
    max_argument_bytes: int | None = None

    def timeout_for(self, tool: str) -> float | None:
        """The time-out of one tool: the last matching rule's, else the server's."""
        own = [r.timeout_s for r in self.rules if r.timeout_s is not None and r.matches(tool)]
        return own[-1] if own else self.timeout_s

    def hidden(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, p) for p in self.hide)

    def for_tool(self, tool: str) -> tuple[tuple[str, ...], Risk | None, ToolRule]:
        """(scopes, risk override, merged rule) for one upstream tool; later rules win."""
        scopes, risk = self.scopes, None
        aliases: list[str] = []
        not_for: list[str] = []
        tags: list[str] = []
        for rule in self.rules:
            if not rule.matches(tool):
                continue
            if rule.scopes is not None:
                scopes = rule.scopes
            if rule.risk is not None:
                risk = rule.risk
            aliases += rule.aliases
            not_for += rule.not_for
            tags += rule.tags
        merged = ToolRule(tool, scopes, risk, tuple(aliases), tuple(not_for), tuple(tags))
        return scopes, risk, merged


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream: a stdio command or a streamable-HTTP URL, plus its policy."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    policy: ServerPolicy = field(default_factory=lambda: ServerPolicy(()))
    #: the section had no ``toolscout`` key (the safe default applies)
    defaulted: bool = False

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def prefix(self) -> str:
        """The namespace of this server's card ids (``<server>/``)."""
        return safe_name(self.name) + "/"


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The whole file: the upstreams and the gateway's own settings."""

    servers: tuple[ServerConfig, ...]
    #: the catalog file; ``None`` (the default): one per config file under the user data
    #: directory (:meth:`catalog_path`); ``:memory:`` keeps it in a temporary file
    db: str | None = None
    mode: str = "auto"
    #: the caller over stdio (no token there); over HTTP each request's bearer token decides
    principal: Principal | None = None
    #: secret for HS256 tokens, or a PEM public key file path (``jwt_key_file``)
    jwt_key: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    #: this server's public URL and its authorization servers (protected-resource metadata)
    resource_url: str | None = None
    authorization_servers: tuple[str, ...] = ()
    #: seconds a call may go without an answer or progress (per server and tool: their
    #: own ``timeout_s``)
    timeout_s: float = 60.0
    connect_timeout_s: float = 10.0
    #: largest result or resource read passed through (per server: its own)
    max_result_bytes: int = 16 * 1024 * 1024
    #: largest arguments of one call, as JSON (per server: its own)
    max_argument_bytes: int = 4 * 1024 * 1024
    #: most tools the dynamic mode keeps in a caller's list (least recently used go first)
    dynamic_limit: int = 16
    k: int = 5
    #: the admin scope of the policy (privileged tools need it explicitly)
    admin_scope: str | None = None
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: calls per second per principal (0: off) and the burst, for the gateway's rate limit
    rate_per_second: float | None = None
    burst: int | None = None
    #: the audit log file (default: beside the catalog, or beside the default catalog path
    #: when the catalog is ``:memory:``); never a temporary file
    audit: str | None = None
    #: HMAC key of the audit chain (``audit_key``, ``audit_key_file`` or $TOOLSCOUT_AUDIT_KEY)
    audit_key: str | None = None
    #: over HTTP: each caller its own upstream sessions ("per_caller") or one for all
    upstream_sessions: str = "per_caller"
    #: the config file this was read from (names the default catalog)
    source: str | None = None
    #: HTTP development mode (``mcp serve --dev`` only, never from a file): loopback,
    #: callers without a token are ``principal``, CORS for the Inspector (mcp/devmode.py)
    dev: bool = False

    def catalog_path(self) -> str:
        """Where the catalog lives: ``db``, else a file per config under the user data dir."""
        return self.db if self.db is not None else str(default_catalog(self.source))

    def audit_path(self) -> str:
        """Where the audit log lives: ``audit``, else beside the (default) catalog file."""
        if self.audit is not None:
            return self.audit
        db = self.catalog_path()
        path = Path(db) if db != ":memory:" else default_catalog(self.source)
        return str(path.with_name(path.stem + ".audit" + (path.suffix or ".db")))

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        raise ConfigError(f"no server named {name!r} in the config")


# --------------------------------------------------------------------------- parsing


def _strs(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _scopes(where: str, value: Any) -> tuple[str, ...]:
    out = _strs(where, value)
    for scope in out:
        if not _SCOPE_RE.match(scope):
            raise ConfigError(f"{where}: {scope!r} is not a concrete scope like 'files:read'")
    return out


def _str_map(where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{where}: must map names to strings")
    return dict(value)


def _risk(where: str, value: Any) -> Risk:
    try:
        return Risk(value)
    except ValueError:
        choices = ", ".join(r.value for r in Risk)
        raise ConfigError(f"{where}: {value!r} is not one of: {choices}") from None


def _known(where: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown field {unknown[0]!r}; known fields: {', '.join(sorted(known))}"
        )


def _glob_lists(where: str, value: Any) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must map tool globs to lists of strings")
    return {str(k): _strs(f"{where}.{k}", v) for k, v in value.items()}


def _server_policy(name: str, data: Any) -> ServerPolicy:
    where = f"mcpServers.{name}.toolscout"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be an object")
    _known(
        where,
        data,
        {"scopes", "tenants", "hide", "tools", "risk", "aliases", "not_for", "group",
         "timeout_s", "max_result_bytes", "max_argument_bytes"},
    )  # fmt: skip
    scopes = (
        _scopes(f"{where}.scopes", data["scopes"]) if "scopes" in data else (default_scope(name),)
    )
    rules: list[ToolRule] = []
    risk_map = data.get("risk", {})
    if not isinstance(risk_map, Mapping):
        raise ConfigError(f"{where}.risk: must map tool globs to a risk level")
    for pattern, level in risk_map.items():
        rules.append(ToolRule(str(pattern), risk=_risk(f"{where}.risk.{pattern}", level)))
    for pattern, aliases in _glob_lists(f"{where}.aliases", data.get("aliases")).items():
        rules.append(ToolRule(pattern, aliases=aliases))
    for pattern, hints in _glob_lists(f"{where}.not_for", data.get("not_for")).items():
        rules.append(ToolRule(pattern, not_for=hints))
    tools = data.get("tools", {})
    if not isinstance(tools, Mapping):
        raise ConfigError(f"{where}.tools: must map tool globs to settings")
    for pattern, rule in tools.items():
        rw = f"{where}.tools.{pattern}"
        if not isinstance(rule, Mapping):
            raise ConfigError(f"{rw}: must be an object")
        _known(rw, rule, {"scopes", "risk", "aliases", "not_for", "tags", "timeout_s"})
        rules.append(
            ToolRule(
                str(pattern),
                scopes=_scopes(f"{rw}.scopes", rule["scopes"]) if "scopes" in rule else None,
                risk=_risk(f"{rw}.risk", rule["risk"]) if "risk" in rule else None,
                aliases=_strs(f"{rw}.aliases", rule.get("aliases")),
                not_for=_strs(f"{rw}.not_for", rule.get("not_for")),
                tags=_strs(f"{rw}.tags", rule.get("tags")),
                timeout_s=_number(f"{rw}.timeout_s", rule["timeout_s"], 0, low=0.01, high=86400)
                if "timeout_s" in rule
                else None,
            )
        )
    group = data.get("group", safe_name(name))
    if not isinstance(group, str):
        raise ConfigError(f"{where}.group: must be a string")
    return ServerPolicy(
        scopes=scopes,
        tenants=_strs(f"{where}.tenants", data.get("tenants")),
        hide=_strs(f"{where}.hide", data.get("hide")),
        rules=tuple(rules),
        group=group,
        timeout_s=_number(f"{where}.timeout_s", data["timeout_s"], 0, low=0.01, high=86400)
        if "timeout_s" in data
        else None,
        max_result_bytes=int(
            _number(f"{where}.max_result_bytes", data["max_result_bytes"], 0, low=1024, high=2**31)
        )
        if "max_result_bytes" in data
        else None,
        max_argument_bytes=int(
            _number(
                f"{where}.max_argument_bytes", data["max_argument_bytes"], 0, low=1024, high=2**31
            )
        )
        if "max_argument_bytes" in data
        else None,
    )


def _server(name: str, data: Any) -> ServerConfig:
    where = f"mcpServers.{name}"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be an object")
    _known(where, data, {"command", "args", "env", "cwd", "url", "headers", "type", "toolscout"})
    command, url = data.get("command"), data.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where}: needs exactly one of 'command' (stdio) or 'url' (HTTP)")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"{where}.command: must be a non-empty string")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{where}.url: must be an http(s) URL")
    kind = data.get("type")
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
        raise ConfigError(f"{where}.type: {kind!r} is not supported (stdio or http)")
    cwd = data.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}.cwd: must be a string")
    has_policy = "toolscout" in data
    policy = (
        _server_policy(name, data["toolscout"])
        if has_policy
        else ServerPolicy((default_scope(name),), group=safe_name(name))
    )
    env = data.get("env")
    return ServerConfig(
        name=name,
        command=command.strip() if isinstance(command, str) else None,
        args=_strs(f"{where}.args", data.get("args")) if data.get("args") is not None else (),
        env=_str_map(f"{where}.env", env) if env is not None else None,
        cwd=cwd,
        url=url,
        headers=_str_map(f"{where}.headers", data.get("headers")),
        policy=policy,
        defaulted=not has_policy,
    )


def _principal(data: Any) -> Principal:
    where = "toolscout.principal"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be an object")
    _known(where, data, {"subject", "tenant", "scopes", "roles"})
    subject = data.get("subject")
    if not isinstance(subject, str) or not subject.strip():
        raise ConfigError(f"{where}.subject: must be a non-empty string")
    tenant = data.get("tenant", "")
    if not isinstance(tenant, str):
        raise ConfigError(f"{where}.tenant: must be a string")
    scopes = _strs(f"{where}.scopes", data.get("scopes"))
    return Principal.of(subject, tenant, scopes, _strs(f"{where}.roles", data.get("roles")))


def _number(where: str, value: Any, default: float, *, low: float, high: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(f"{where}: must be a number within [{low:g}, {high:g}], got {value!r}")
    return float(value)


def parse_config(data: Any, *, base: Path | None = None) -> GatewayConfig:
    """Validate a parsed config document; ``base`` resolves relative paths."""
    if not isinstance(data, Mapping):
        raise ConfigError("the config must be a JSON object with an 'mcpServers' object")
    _known("(top level)", data, {"mcpServers", "toolscout", "$schema"})
    servers_raw = data.get("mcpServers")
    if not isinstance(servers_raw, Mapping):
        raise ConfigError("'mcpServers' must be an object of server name → settings")
    servers = tuple(_server(str(n), d) for n, d in servers_raw.items())
    seen: dict[str, str] = {}
    for s in servers:
        key = safe_name(s.name)
        if key in seen:
            raise ConfigError(f"mcpServers: {s.name!r} and {seen[key]!r} have the same id {key!r}")
        seen[key] = s.name
    gw = data.get("toolscout", {})
    if not isinstance(gw, Mapping):
        raise ConfigError("toolscout: must be an object")
    known = {
        "db", "mode", "principal", "jwt_key", "jwt_key_file", "jwt_issuer", "jwt_audience",
        "resource_url", "authorization_servers", "timeout_s", "connect_timeout_s",
        "max_result_bytes", "dynamic_limit", "k", "admin_scope", "roles", "rate_per_second",
        "burst", "audit", "audit_key", "audit_key_file", "max_argument_bytes",
        "upstream_sessions",
    }  # fmt: skip
    _known("toolscout", gw, known)
    mode = gw.get("mode", "auto")
    if mode not in MODES:
        raise ConfigError(f"toolscout.mode: {mode!r} is not one of: {', '.join(MODES)}")
    db = gw.get("db")
    if db is not None and (not isinstance(db, str) or not db):
        raise ConfigError("toolscout.db: must be a path or ':memory:'")
    if db is not None and db != ":memory:" and base is not None and not Path(db).is_absolute():
        db = str(base / db)
    audit = gw.get("audit")
    if audit is not None and (not isinstance(audit, str) or not audit or audit == ":memory:"):
        raise ConfigError("toolscout.audit: must be a file path (the audit log is never temporary)")
    if audit is not None and base is not None and not Path(audit).is_absolute():
        audit = str(base / audit)
    audit_key = gw.get("audit_key")
    if "audit_key_file" in gw:
        path = Path(str(gw["audit_key_file"]))
        path = path if path.is_absolute() or base is None else base / path
        try:
            audit_key = path.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"toolscout.audit_key_file: cannot read {path}: {exc}") from None
    if audit_key is not None and (not isinstance(audit_key, str) or len(audit_key) < 16):
        raise ConfigError("toolscout.audit_key: must be a string of at least 16 characters")
    jwt_key = gw.get("jwt_key")
    if "jwt_key_file" in gw:
        path = Path(str(gw["jwt_key_file"]))
        path = path if path.is_absolute() or base is None else base / path
        try:
            jwt_key = path.read_text()
        except OSError as exc:
            raise ConfigError(f"toolscout.jwt_key_file: cannot read {path}: {exc}") from None
    for key in ("jwt_issuer", "jwt_audience", "resource_url", "admin_scope"):
        if gw.get(key) is not None and not isinstance(gw[key], str):
            raise ConfigError(f"toolscout.{key}: must be a string")
    if jwt_key is not None and not isinstance(jwt_key, str):
        raise ConfigError("toolscout.jwt_key: must be a string")
    roles = gw.get("roles", {})
    if not isinstance(roles, Mapping):
        raise ConfigError("toolscout.roles: must map role names to lists of scopes")
    return GatewayConfig(
        servers=servers,
        db=db,
        mode=mode,
        principal=_principal(gw["principal"]) if "principal" in gw else None,
        jwt_key=jwt_key,
        jwt_issuer=gw.get("jwt_issuer"),
        jwt_audience=gw.get("jwt_audience"),
        resource_url=gw.get("resource_url"),
        authorization_servers=_strs(
            "toolscout.authorization_servers", gw.get("authorization_servers")
        ),
        timeout_s=_number("toolscout.timeout_s", gw.get("timeout_s"), 60.0, low=0.01, high=86400),
        connect_timeout_s=_number(
            "toolscout.connect_timeout_s", gw.get("connect_timeout_s"), 10.0, low=0.01, high=600
        ),
        max_result_bytes=int(
            _number(
                "toolscout.max_result_bytes",
                gw.get("max_result_bytes"),
                16 * 1024 * 1024,
                low=1024,
                high=2**31,
            )
        ),
        max_argument_bytes=int(
            _number(
                "toolscout.max_argument_bytes",
                gw.get("max_argument_bytes"),
                4 * 1024 * 1024,
                low=1024,
                high=2**31,
            )
        ),
        dynamic_limit=int(
            _number("toolscout.dynamic_limit", gw.get("dynamic_limit"), 16, low=1, high=128)
        ),
        k=int(_number("toolscout.k", gw.get("k"), 5, low=1, high=10)),
        admin_scope=gw.get("admin_scope"),
        roles={str(r): _scopes(f"toolscout.roles.{r}", v) for r, v in roles.items()},
        rate_per_second=(
            _number("toolscout.rate_per_second", gw["rate_per_second"], 0, low=0, high=1e6)
            if "rate_per_second" in gw
            else None
        ),
        burst=int(_number("toolscout.burst", gw["burst"], 1, low=1, high=1e6))
        if "burst" in gw
        else None,
        audit=audit,
        audit_key=audit_key,
        upstream_sessions=_sessions(gw.get("upstream_sessions", "per_caller")),
    )


def _sessions(value: Any) -> str:
    if value not in ("per_caller", "shared"):
        raise ConfigError(
            f"toolscout.upstream_sessions: {value!r} is not one of: per_caller, shared"
        )
    return str(value)


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a config file; :class:`ConfigError` names the file and the problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the config: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return dataclasses.replace(parse_config(data, base=p.resolve().parent), source=str(p))
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None
