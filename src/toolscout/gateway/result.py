"""The outcome of one tool call, allowed or refused, as a value a tool loop hands back.

A refusal is a result, not an exception: :meth:`ExecutionResult.to_message`
renders any outcome as the tool-result message of each model API, so an agent
loop returns "refused: missing_scope" to the model without ``try``/``except``.
The message never says more than the caller may know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from toolscout.errors import FormatError
from toolscout.policy import Principal

Status = Literal["ok", "refused", "error"]

#: formats a result renders to (the discovery formats)
RESULT_FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp", "langchain")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """One call's outcome: ``ok`` with the tool's value, or ``refused``/``error`` with a reason."""

    tool_id: str | None
    value: Any
    principal: Principal | None
    latency_ms: float
    #: the gateway's own share of the latency (everything but the executor)
    overhead_ms: float
    audit_id: int
    status: Status = "ok"
    #: a stable code: "ok", or the refusal / error reason (``missing_scope``, ``unknown_tool``...)
    reason: str = "ok"
    #: human-readable, safe to show the caller and the model
    message: str = ""
    #: the name the model used
    name: str = ""
    discovery_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def content(self) -> str:
        """The text a model reads: the value, or ``refused: reason: message``."""
        if self.ok:
            return _text(self.value)
        return f"{self.status}: {self.reason}: {self.message}" if self.message else (
            f"{self.status}: {self.reason}"
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ok": self.ok,
            "tool_id": self.tool_id,
            "name": self.name,
            "value": self.value if self.ok else None,
            "reason": self.reason,
            "message": self.message,
            "audit_id": self.audit_id,
            "latency_ms": round(self.latency_ms, 3),
            "overhead_ms": round(self.overhead_ms, 3),
            "discovery_id": self.discovery_id,
        }

    def to_message(self, fmt: str = "openai", call_id: str | None = None) -> dict[str, Any]:
        """This outcome as the tool-result message the ``fmt`` API expects back."""
        text = self.content()
        name = self.name or self.tool_id or ""
        if fmt == "openai":
            return {"role": "tool", "tool_call_id": call_id or "", "content": text}
        if fmt == "openai-responses":
            return {"type": "function_call_output", "call_id": call_id or "", "output": text}
        if fmt == "anthropic":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call_id or "",
                "content": text,
            }
            if not self.ok:
                block["is_error"] = True
            return {"role": "user", "content": [block]}
        if fmt == "gemini":
            payload = {"result": self.value} if self.ok else {"error": text}
            return {
                "role": "user",
                "parts": [{"functionResponse": {"name": name, "response": payload}}],
            }
        if fmt == "mcp":
            return {"content": [{"type": "text", "text": text}], "isError": not self.ok}
        if fmt == "langchain":
            return {
                "type": "tool",
                "tool_call_id": call_id or "",
                "name": name,
                "content": text,
                "status": "success" if self.ok else "error",
            }
        raise FormatError(fmt, RESULT_FORMATS)
