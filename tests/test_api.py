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
    "FORMATS",
    "ArgumentError",
    "CapabilityCard",
    "CardError",
    "Catalog",
    "CatalogFileError",
    "ConfigError",
    "Decision",
    "Embedder",
    "ExecutorError",
    "ExecutorTimeout",
    "FormatError",
    "GatewayError",
    "GrantError",
    "MiniLMEmbedder",
    "MissingExtraError",
    "ModelError",
    "PolicyConfig",
    "PolicyDenied",
    "Principal",
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
    "ToolSpec",
    "ToolscoutError",
    "UnknownToolError",
    "__version__",
    "choose_tier",
    "decide",
    "entitle",
    "make_spec",
    "read_catalog",
    "read_policy",
    "render",
]
