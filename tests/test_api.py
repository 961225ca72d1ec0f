"""The public API is small and pinned (as httpx does): a change here is a deliberate one."""

from __future__ import annotations

import subprocess
import sys

import pytest

import toolscout

EXPECTED = sorted(toolscout.__all__)


def test_all_is_sorted_and_complete() -> None:
    assert toolscout.__all__ == sorted(toolscout.__all__)
    for name in toolscout.__all__:
        assert hasattr(toolscout, name), name


def test_public_names_pinned() -> None:
    assert set(toolscout.__all__) == set(PINNED)


def test_import_has_no_side_effects() -> None:
    code = (
        "import sys, logging, toolscout; "
        "assert 'onnxruntime' not in sys.modules; assert 'tiktoken' not in sys.modules; "
        "assert not logging.getLogger().handlers"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_core_imports_no_concrete_backend_or_surface() -> None:
    code = (
        "import sys, toolscout, toolscout.discovery.pipeline, toolscout.discovery.catalog, "
        "toolscout.service; "
        "bad = [m for m in sys.modules if m.startswith(('toolscout.stores.sqlite', "
        "'toolscout.stores.memory', 'toolscout.stores.postgres', 'toolscout.embed.minilm', "
        "'toolscout.cli', 'toolscout.http', 'toolscout.mcp'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_backends_load_lazily_by_name() -> None:
    assert toolscout.SQLiteStore.__name__ == "SQLiteStore"
    assert toolscout.MemoryStore.__name__ == "MemoryStore"
    with pytest.raises(AttributeError):
        _ = toolscout.NoSuchThing  # type: ignore[attr-defined]


PINNED = [
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
