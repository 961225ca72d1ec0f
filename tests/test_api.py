"""The public API is small and pinned (as httpx does): a change here is a deliberate one."""

from __future__ import annotations

import subprocess
import sys

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
    "Shortlist",
    "Store",
    "StoreError",
    "Tier",
    "TokenError",
    "TokenReport",
    "TokenVerifier",
    "ToolLookup",
    "ToolSpec",
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
