"""toolscout: progressive tool discovery for AI agents.

Entitle first (policy before ranking), hybrid retrieval over capability cards,
just-in-time schemas for the shortlisted tools, and an execution gateway that
re-checks every call. ``Toolscout`` holds the whole loop (discover → execute).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolscout.cards import CapabilityCard, Risk, ToolSpec, make_spec
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.inject import FORMATS, Tier, choose_tier, render
    from toolscout.discovery.shortlist import ScoredTool, Shortlist, TokenReport
    from toolscout.embed.base import Embedder
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.errors import (
        ArgumentError,
        CardError,
        CatalogFileError,
        ConfigError,
        ExecutorError,
        ExecutorTimeout,
        FormatError,
        GatewayError,
        GrantError,
        MissingExtraError,
        ModelError,
        PolicyDenied,
        QueryError,
        RateLimited,
        StoreError,
        TokenError,
        ToolscoutError,
        UnknownToolError,
    )
    from toolscout.executors.base import (
        DryRunExecutor,
        Executor,
        HTTPEndpoint,
        HTTPExecutor,
        PythonExecutor,
        tool,
    )
    from toolscout.executors.mcp import MCPExecutor
    from toolscout.gateway.audit import AuditLog
    from toolscout.gateway.auth import ClaimsMapping, JWTVerifier, TokenVerifier, issue_token
    from toolscout.gateway.core import Gateway, ToolLookup
    from toolscout.gateway.grants import GrantSigner
    from toolscout.gateway.limits import Limits
    from toolscout.gateway.result import ExecutionResult
    from toolscout.loader import read_catalog, read_policy
    from toolscout.policy import Decision, PolicyConfig, Principal, Reason, decide, entitle
    from toolscout.service import Toolscout
    from toolscout.settings import SearchSettings, Settings
    from toolscout.stores.base import Store
    from toolscout.stores.memory import MemoryStore
    from toolscout.stores.sqlite import SQLiteStore


#: every public name, imported on first use: ``import toolscout`` loads nothing heavy (the
#: MCP gateway answers a client before numpy, the models or any backend is imported), and
#: a concrete backend is loaded only when asked for: ``toolscout.SQLiteStore`` still works
_LAZY = {
    "ArgumentError": "toolscout.errors",
    "AuditLog": "toolscout.gateway.audit",
    "CapabilityCard": "toolscout.cards",
    "CardError": "toolscout.errors",
    "Catalog": "toolscout.discovery.catalog",
    "CatalogFileError": "toolscout.errors",
    "ClaimsMapping": "toolscout.gateway.auth",
    "ConfigError": "toolscout.errors",
    "Decision": "toolscout.policy",
    "DryRunExecutor": "toolscout.executors.base",
    "Embedder": "toolscout.embed.base",
    "ExecutionResult": "toolscout.gateway.result",
    "Executor": "toolscout.executors.base",
    "ExecutorError": "toolscout.errors",
    "ExecutorTimeout": "toolscout.errors",
    "FORMATS": "toolscout.discovery.inject",
    "FormatError": "toolscout.errors",
    "Gateway": "toolscout.gateway.core",
    "GatewayError": "toolscout.errors",
    "GrantError": "toolscout.errors",
    "GrantSigner": "toolscout.gateway.grants",
    "HTTPEndpoint": "toolscout.executors.base",
    "HTTPExecutor": "toolscout.executors.base",
    "JWTVerifier": "toolscout.gateway.auth",
    "Limits": "toolscout.gateway.limits",
    "MCPExecutor": "toolscout.executors.mcp",
    "MissingExtraError": "toolscout.errors",
    "ModelError": "toolscout.errors",
    "PolicyConfig": "toolscout.policy",
    "PolicyDenied": "toolscout.errors",
    "Principal": "toolscout.policy",
    "PythonExecutor": "toolscout.executors.base",
    "QueryError": "toolscout.errors",
    "RateLimited": "toolscout.errors",
    "Reason": "toolscout.policy",
    "Risk": "toolscout.cards",
    "ScoredTool": "toolscout.discovery.shortlist",
    "SearchSettings": "toolscout.settings",
    "Settings": "toolscout.settings",
    "Shortlist": "toolscout.discovery.shortlist",
    "Store": "toolscout.stores.base",
    "StoreError": "toolscout.errors",
    "Tier": "toolscout.discovery.inject",
    "TokenError": "toolscout.errors",
    "TokenReport": "toolscout.discovery.shortlist",
    "TokenVerifier": "toolscout.gateway.auth",
    "ToolLookup": "toolscout.gateway.core",
    "ToolSpec": "toolscout.cards",
    "Toolscout": "toolscout.service",
    "ToolscoutError": "toolscout.errors",
    "UnknownToolError": "toolscout.errors",
    "choose_tier": "toolscout.discovery.inject",
    "decide": "toolscout.policy",
    "entitle": "toolscout.policy",
    "issue_token": "toolscout.gateway.auth",
    "make_spec": "toolscout.cards",
    "read_catalog": "toolscout.loader",
    "read_policy": "toolscout.loader",
    "render": "toolscout.discovery.inject",
    "tool": "toolscout.executors.base",
    "MemoryStore": "toolscout.stores.memory",
    "MiniLMEmbedder": "toolscout.embed.minilm",
    "SQLiteStore": "toolscout.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolscout' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "AuditLog",
    "CapabilityCard",
    "CardError",
    "Catalog",
    "CatalogFileError",
    "ClaimsMapping",
    "ConfigError",
    "Decision",
    "DryRunExecutor",
    "Embedder",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "ExecutorTimeout",
    "FORMATS",
    "FormatError",
    "Gateway",
    "GatewayError",
    "GrantError",
    "GrantSigner",
    "HTTPEndpoint",
    "HTTPExecutor",
    "JWTVerifier",
    "Limits",
    "MCPExecutor",
    "MemoryStore",
    "MiniLMEmbedder",
    "MissingExtraError",
    "ModelError",
    "PolicyConfig",
    "PolicyDenied",
    "Principal",
    "PythonExecutor",
    "QueryError",
    "RateLimited",
    "Reason",
    "Risk",
    "SQLiteStore",
    "ScoredTool",
    "SearchSettings",
    "Settings",
    "Shortlist",
    "Store",
    "StoreError",
    "Tier",
    "TokenError",
    "TokenReport",
    "TokenVerifier",
    "ToolLookup",
    "ToolSpec",
    "Toolscout",
    "ToolscoutError",
    "UnknownToolError",
    "__version__",
    "choose_tier",
    "decide",
    "entitle",
    "issue_token",
    "make_spec",
    "read_catalog",
    "read_policy",
    "render",
    "tool",
]
