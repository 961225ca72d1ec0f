"""toolscout: progressive tool discovery for AI agents.

Entitle first (policy before ranking), hybrid retrieval over capability cards,
just-in-time schemas for the shortlisted tools, and an execution gateway that
re-checks every call. ``Toolscout`` holds the whole loop (discover → execute).
"""

from typing import TYPE_CHECKING, Any

from toolscout.cards import CapabilityCard, Risk, ToolSpec, make_spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.inject import FORMATS, Tier, choose_tier, render
from toolscout.discovery.shortlist import ScoredTool, Shortlist, TokenReport
from toolscout.embed.base import Embedder
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

if TYPE_CHECKING:
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.stores.memory import MemoryStore
    from toolscout.stores.sqlite import SQLiteStore

#: concrete backends, imported on first use so that importing toolscout (or its core
#: packages) loads no backend: ``toolscout.SQLiteStore`` still works
_LAZY = {
    "MemoryStore": "toolscout.stores.memory",
    "MiniLMEmbedder": "toolscout.embed.minilm",
    "SQLiteStore": "toolscout.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolscout' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)


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
