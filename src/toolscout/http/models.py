"""Request and response bodies of the HTTP API (the OpenAPI document is built from these)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Format = Literal["openai", "openai-responses", "anthropic", "gemini", "mcp", "langchain"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DiscoverRequest(_Strict):
    query: str = Field(min_length=1, max_length=65_536, description="The user's request")
    k: int = Field(3, ge=1, le=10, description="How many tools to shortlist")
    format: Format = Field("openai", description="Model API the schemas are rendered for")
    conversation: str | None = Field(
        None, max_length=200, description="Conversation id, to link turns and executions"
    )
    token_budget: int | None = Field(None, ge=1, le=1_000_000)


class ScoredToolOut(BaseModel):
    id: str
    name: str
    score: float
    lexical: float
    dense: float
    exact: str | None = None
    needed_by: str | None = Field(
        None,
        description="Set on a tool added because the shortlisted tool named here requires"
        " an identifier (e.g. person_id) that this tool finds and the request does not give",
    )


class TokensOut(BaseModel):
    catalog: int = Field(description="Schema tokens of the whole entitled catalog")
    injected: int = Field(description="Schema tokens of the shortlist")
    saved: int


class DiscoverResponse(BaseModel):
    discovery_id: str | None
    query: str
    tier: str
    format: str
    tools: list[ScoredToolOut]
    names: dict[str, str] = Field(description="Rendered tool name -> tool id")
    schemas: list[dict[str, Any]]
    confidence: float
    low_confidence: bool
    reformulations: list[str]
    filtered_by_policy: int | None = None
    tokens: TokensOut
    grant: str | None
    latency_ms: float


class ExecuteRequest(_Strict):
    name: str = Field(min_length=1, max_length=256, description="Tool id or the name the model saw")
    arguments: dict[str, Any] = Field(default_factory=dict)
    discovery_id: str | None = Field(None, max_length=200)
    grant: str | None = Field(None, max_length=8192)
    conversation: str | None = Field(None, max_length=200)


class ExecuteResponse(BaseModel):
    status: Literal["ok", "refused", "error"]
    ok: bool
    tool_id: str | None
    name: str
    value: Any = None
    reason: str | None = None
    message: str | None = None
    audit_id: str | None = None
    discovery_id: str | None = None
    latency_ms: float = 0.0
    overhead_ms: float = 0.0


class ImportRequest(_Strict):
    tools: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=100_000,
        description="Capability cards or tools.jsonl records; all validated before any is stored",
    )
    replace_all: bool = Field(
        False,
        description="Remove every stored tool not in this import (platform administrators only)",
    )
    force: bool = Field(
        False,
        description="Accept changes to another source's tools and widened tenants, scopes or "
        "risk (platform administrators only)",
    )
    strict: bool = Field(False, description="Refuse tools with quality problems (else: warnings)")


class ImportResponse(BaseModel):
    added: int
    updated: int
    unchanged: int
    removed: int
    embedded: int
    seconds: float
    warnings: list[str]
    generation: int


class DeleteRequest(_Strict):
    ids: list[str] = Field(min_length=1, max_length=100_000)


class DeleteResponse(BaseModel):
    removed: int
    generation: int


class FeedbackRequest(_Strict):
    discovery_id: str = Field(min_length=1, max_length=200)
    tool_id: str = Field(min_length=1, max_length=256)


class OkResponse(BaseModel):
    ok: bool = True


class HealthResponse(BaseModel):
    status: str
    tools: int | None = None
    generation: int | None = None
