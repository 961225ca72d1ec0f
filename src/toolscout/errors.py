"""Every error toolscout raises, under one root.

::

    ToolscoutError
    ├── CardError            a capability card or schema is invalid (tool id, field, reason)
    ├── CatalogFileError     a catalog file cannot be read or parsed (path, line, reason)
    │   └── QueryFileError   an evaluation queries file cannot be read or parsed
    ├── ImportRefused        an import would change protected tools (tool ids, changes)
    ├── AdminDenied          the principal may not administer this (action, tool id, reason)
    ├── UnknownToolError     a tool id is not in the catalog
    ├── QueryError           a discovery query is empty, too long or malformed
    ├── FormatError          an unknown rendering format was asked for
    ├── ConfigError          a setting or configuration file is wrong
    ├── MissingExtraError    an optional dependency is not installed (names the extra)
    ├── ModelError           the embedding model or tokenizer file is missing or corrupt
    ├── StoreError           the store cannot be opened or written
    └── GatewayError         an execution was refused or failed (tool id, reason code)
        ├── PolicyDenied         the principal may not use the tool
        ├── TokenError           the caller's token is missing, forged, expired, ...
        ├── GrantError           strict mode: no valid discovery grant covers the tool
        ├── ArgumentError        the arguments do not validate against the schema
        ├── SchemaError          the tool's own schema cannot be used (remote or broken $ref)
        ├── RateLimited          the principal is over its call budget
        └── ExecutorError        the executor failed
            └── ExecutorTimeout  the executor did not answer in time

A denial is always an explicit error with a reason, never an empty result.
"""

from __future__ import annotations


class ToolscoutError(Exception):
    """Root of every toolscout error."""


class CardError(ToolscoutError):
    """A capability card or its schema is invalid."""

    def __init__(self, tool_id: str, field: str, reason: str) -> None:
        self.tool_id = tool_id
        self.field = field
        self.reason = reason
        super().__init__(f"card {tool_id!r}: field {field!r}: {reason}")


class CatalogFileError(ToolscoutError):
    """A catalog file cannot be read or parsed; nothing was stored."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class QueryFileError(CatalogFileError):
    """A ``queries.jsonl`` evaluation file cannot be read or parsed."""


class ImportRefused(ToolscoutError):
    """An import would change another source's tool or widen who may use a tool."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        self.conflicts = conflicts  # (tool id, what changes)
        listed = "; ".join(f"{tid}: {what}" for tid, what in conflicts)
        super().__init__(
            f"import refused: it changes {len(conflicts)} protected tool(s) "
            f"(re-run with --force / force=True to accept): {listed}"
        )


class AdminDenied(ToolscoutError):
    """The principal may not make this administrative change; nothing was changed.

    ``reason`` is a :class:`~toolscout.policy.Reason` code (``not_an_administrator``,
    ``platform_admin_required``, ``outside_own_tenant``); the message names the action
    and the tool, never another tenant's tool the caller could not already name."""

    def __init__(self, action: str, reason: str, message: str, tool_id: str = "") -> None:
        self.action = action
        self.reason = reason
        self.tool_id = tool_id
        super().__init__(message)


class UnknownToolError(ToolscoutError):
    """The tool id is not in the catalog."""

    def __init__(self, tool_id: str) -> None:
        self.tool_id = tool_id
        super().__init__(f"unknown tool id {tool_id!r}")


class UnknownDiscoveryError(ToolscoutError):
    """No discovery with this id was made by this caller (another's looks the same)."""

    def __init__(self, discovery_id: str) -> None:
        self.discovery_id = discovery_id
        super().__init__(f"unknown discovery id {discovery_id!r}")


class QueryError(ToolscoutError):
    """A discovery query is empty, too long or malformed."""


class FormatError(ToolscoutError):
    """An unknown rendering format."""

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown format {name!r}; expected one of: {', '.join(known)}")


class ConfigError(ToolscoutError):
    """A setting or configuration file is wrong."""


class MissingExtraError(ToolscoutError):
    """An optional dependency is missing."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f"{module} is not installed; install it with: pip install 'toolscout[{extra}]'"
        )


class ModelError(ToolscoutError):
    """The embedding model or a tokenizer file is missing or does not match its hash."""


class StoreError(ToolscoutError):
    """The store cannot be opened or written."""


class GatewayError(ToolscoutError):
    """An execution was refused or failed. ``reason`` is a stable machine-readable code."""

    reason: str = "gateway_error"
    #: the audit record the gateway wrote for this attempt (set once it is written)
    audit_id: int | None = None

    def __init__(
        self, message: str, *, tool_id: str = "", reason: str | None = None, detail: str = ""
    ) -> None:
        self.tool_id = tool_id
        #: what went wrong inside (exception text, upstream body): for the audit, never the caller
        self.detail = detail
        if reason is not None:
            self.reason = reason
        super().__init__(message)


class PolicyDenied(GatewayError):
    """The principal may not use the tool (reason: unknown_tool, tenant, missing_scope, ...)."""

    reason = "policy_denied"


class TokenError(GatewayError):
    """The token is missing, malformed, forged, expired or not for us."""

    reason = "invalid_token"


class GrantError(GatewayError):
    """Strict mode: no valid discovery grant covers this tool."""

    reason = "no_grant"


class ArgumentError(GatewayError):
    """The arguments do not validate against the tool's JSON Schema."""

    reason = "invalid_arguments"


class SchemaError(GatewayError):
    """The tool's schema cannot be used to validate (a remote or unresolvable ``$ref``, ...)."""

    reason = "invalid_schema"


class RateLimited(GatewayError):
    """The principal is over its call budget."""

    reason = "rate_limited"


class ExecutorError(GatewayError):
    """The executor failed."""

    reason = "executor_error"


class ExecutorTimeout(ExecutorError):
    """The executor did not answer in time."""

    reason = "executor_timeout"
