"""HTTP endpoints as executors, over ``httpx``.

One :class:`HTTPEndpoint` (method, URL template, headers from configuration) per
tool. The URL's ``{placeholders}`` (path or query, never the host) are filled
from the arguments, percent-encoded; the endpoint's fixed query parameters are
kept, and an argument named like one of them is refused (the template is
authoritative). The other arguments go in the query string or a JSON body.

Redirects are followed only within the endpoint's own origin (scheme, host and
port, compared after normalising: an explicit default port, userinfo or an IDN
host are all fine). ``max_response_bytes`` bounds the body both as sent and
after decompression (only gzip and deflate are asked for, and decoded here
with a bounded output). Upstream error bodies are kept for the audit
(``detail``), never shown to the caller.
"""

from __future__ import annotations

import json
import urllib.parse
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from string import Formatter
from typing import TYPE_CHECKING, Any

from toolscout.cards import ToolSpec
from toolscout.errors import ArgumentError, ConfigError, ExecutorError, ExecutorTimeout
from toolscout.executors.base import (
    BAD_URL_ARGUMENT,
    HTTP_ERROR,
    HTTP_STATUS,
    NOT_BOUND,
    REDIRECT_REFUSED,
    RESPONSE_TOO_LARGE,
    PerLoop,
    clip,
)

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["HTTPEndpoint", "HTTPExecutor"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: content encodings this executor asks for and decodes itself
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS}
COLLIDING_ARGUMENT = "argument_collides_with_endpoint"


def _origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an absolute URL, normalised as httpx sends it."""
    import httpx

    parsed = httpx.URL(url)
    scheme = parsed.scheme.lower()
    return scheme, parsed.host.lower(), parsed.port or _DEFAULT_PORTS.get(scheme, 0)


@dataclass(frozen=True, slots=True)
class HTTPEndpoint:
    """How one tool maps to an HTTP call.

    ``url`` is a template whose ``{placeholders}`` (path or query only, never the
    host) are filled from the arguments, percent-encoded; the other arguments go
    in the query string (``body="query"``) or as a JSON body (``body="json"``);
    ``"auto"`` picks query for GET/HEAD/DELETE and JSON otherwise.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = "auto"
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        method = self.method.upper()
        object.__setattr__(self, "method", method)
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
            raise ConfigError(f"unsupported HTTP method {self.method!r}")
        if self.body not in ("auto", "json", "query"):
            raise ConfigError(f"body must be auto, json or query, got {self.body!r}")
        scheme, sep, rest = self.url.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        if scheme.lower() not in ("http", "https") or not sep or not authority:
            raise ConfigError(f"endpoint URL must be an absolute http(s) URL, got {self.url!r}")
        if "{" in authority or "}" in authority:
            raise ConfigError(f"the host of {self.url!r} must be fixed, not a template")
        try:
            self.origin  # noqa: B018 - parse the fixed part once, now
        except Exception as exc:
            raise ConfigError(f"endpoint URL {self.url!r} does not parse: {exc}") from None

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(f for _, f, _, _ in Formatter().parse(self.url) if f)

    @property
    def origin(self) -> tuple[str, str, int]:
        """(scheme, host, port), normalised (default port filled in, IDN host as sent)."""
        return _origin_of(self.url.split("/", 3)[0] + "//" + self.url.split("/", 3)[2])

    @property
    def fixed_query(self) -> list[tuple[str, str]]:
        """The template's query parameters that have no placeholder in them."""
        query = urllib.parse.urlsplit(self.url).query
        return [
            (k, v)
            for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)
            if "{" not in k + v
        ]


def _url_part(tool_id: str, name: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str | int | float):
        text = str(value)
    else:
        raise ArgumentError(
            f"URL parameter {name!r} must be a string or number",
            tool_id=tool_id,
            reason=BAD_URL_ARGUMENT,
        )
    if text in ("", ".", ".."):
        raise ArgumentError(
            f"URL parameter {name!r} must not be empty, '.' or '..'",
            tool_id=tool_id,
            reason=BAD_URL_ARGUMENT,
        )
    return urllib.parse.quote(text, safe="")


def _query_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_query_value(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, dict):
        return json.dumps(value)
    return value


class HTTPExecutor:
    """Runs tools as HTTP calls; never follows a redirect to another origin."""

    def __init__(
        self,
        endpoints: Mapping[str, HTTPEndpoint],
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        max_redirects: int = 3,
        max_response_bytes: int = 1_000_000,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        self.max_response_bytes = max_response_bytes
        self._verify = verify
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(self._client)

    def _client(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(
            headers={
                "user-agent": "toolscout",
                **self.headers,
                "accept-encoding": "gzip, deflate",
            },
            timeout=self.timeout_s,
            follow_redirects=False,
            verify=self._verify,
            trust_env=False,
        )

    def _request(self, client: httpx.AsyncClient, spec: ToolSpec, args: Mapping[str, Any]) -> Any:
        ep = self.endpoints.get(spec.id)
        if ep is None:
            raise ExecutorError(
                f"no HTTP endpoint for {spec.id!r}", tool_id=spec.id, reason=NOT_BOUND
            )
        names = ep.placeholders
        missing = [n for n in names if n not in args]
        if missing:
            raise ArgumentError(
                f"URL parameter {missing[0]!r} is required",
                tool_id=spec.id,
                reason=BAD_URL_ARGUMENT,
            )
        fixed = ep.fixed_query
        fixed_names = {k for k, _ in fixed}
        rest = {k: v for k, v in args.items() if k not in names}
        as_query = ep.body == "query" or (
            ep.body == "auto" and ep.method in ("GET", "HEAD", "DELETE")
        )
        clash = sorted(k for k in rest if k in fixed_names) if as_query else []
        if clash:
            raise ArgumentError(
                f"argument {clash[0]!r} would replace the endpoint's fixed query parameter",
                tool_id=spec.id,
                reason=COLLIDING_ARGUMENT,
            )
        url = ep.url.format_map({n: _url_part(spec.id, n, args[n]) for n in names})
        kwargs: dict[str, Any] = {"headers": dict(ep.headers)}
        if as_query and rest:
            split = urllib.parse.urlsplit(url)
            pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
            for key, value in rest.items():
                value = _query_value(value)
                for item in value if isinstance(value, list) else [value]:
                    pairs.append((key, str(item)))
            query = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
            url = urllib.parse.urlunsplit(split._replace(query=query))
        elif rest:
            kwargs["json"] = rest
        if ep.timeout_s is not None:
            kwargs["timeout"] = ep.timeout_s
        request = client.build_request(ep.method, url, **kwargs)
        if _origin_of(str(request.url)) != ep.origin:
            raise ArgumentError(
                "arguments changed the endpoint's host", tool_id=spec.id, reason=BAD_URL_ARGUMENT
            )
        return request

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        import httpx

        try:
            client = await self._clients.get()
        except Exception as exc:
            raise ExecutorError(
                f"{spec.id}: the HTTP client could not start",
                tool_id=spec.id,
                reason=HTTP_ERROR,
                detail=clip(exc),
            ) from exc
        request = self._request(client, spec, arguments)
        origin = _origin_of(str(request.url))
        try:
            for _ in range(self.max_redirects + 1):
                response = await client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return await self._result(spec, response)
                finally:
                    await response.aclose()
                request = response.next_request
                if _origin_of(str(request.url)) != origin:
                    raise ExecutorError(
                        f"{spec.id}: refused a redirect to another host",
                        tool_id=spec.id,
                        reason=REDIRECT_REFUSED,
                        detail=clip(str(request.url.host)),
                    )
            raise ExecutorError(
                f"{spec.id}: too many redirects", tool_id=spec.id, reason=REDIRECT_REFUSED
            )
        except httpx.TimeoutException as exc:
            raise ExecutorTimeout(
                f"{spec.id}: the HTTP endpoint timed out",
                tool_id=spec.id,
                reason="executor_timeout",
                detail=clip(exc),
            ) from exc
        except httpx.HTTPError as exc:
            raise ExecutorError(
                f"{spec.id}: the HTTP request failed ({type(exc).__name__})",
                tool_id=spec.id,
                reason=HTTP_ERROR,
                detail=clip(exc),
            ) from exc

    def _too_large(self, spec: ToolSpec, how: str) -> ExecutorError:
        return ExecutorError(
            f"{spec.id}: the response is over {self.max_response_bytes} bytes{how}",
            tool_id=spec.id,
            reason=RESPONSE_TOO_LARGE,
        )

    async def _result(self, spec: ToolSpec, response: httpx.Response) -> Any:
        limit = self.max_response_bytes
        encodings = [
            e.strip().lower()
            for e in response.headers.get("content-encoding", "").split(",")
            if e.strip() and e.strip().lower() != "identity"
        ]
        if len(encodings) > 1 or any(e not in _ENCODINGS for e in encodings):
            raise ExecutorError(
                f"{spec.id}: the response uses an unsupported content encoding",
                tool_id=spec.id,
                reason=HTTP_ERROR,
                detail=clip(",".join(encodings)),
            )
        decoder = zlib.decompressobj(_ENCODINGS[encodings[0]]) if encodings else None
        chunks: list[bytes] = []
        size = raw_size = 0
        async for raw in response.aiter_raw():
            raw_size += len(raw)
            if raw_size > limit:
                raise self._too_large(spec, "")
            # never more output than the room left: a small bomb cannot blow up memory
            data = raw if decoder is None else _bounded(decoder, raw, limit - size + 1)
            size += len(data)
            if size > limit:
                raise self._too_large(spec, " decompressed")
            chunks.append(data)
        if decoder is not None:
            tail = decoder.flush()
            size += len(tail)
            if size > limit:
                raise self._too_large(spec, " decompressed")
            chunks.append(tail)
        body = b"".join(chunks).decode(response.encoding or "utf-8", "replace")
        if not response.is_success:
            raise ExecutorError(
                f"{spec.id}: the endpoint answered HTTP {response.status_code}",
                tool_id=spec.id,
                reason=HTTP_STATUS,
                detail=clip(body),
            )
        if "json" in response.headers.get("content-type", "") and body:
            try:
                return json.loads(body)
            except ValueError:
                return body
        return body

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def __aenter__(self) -> HTTPExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _bounded(decoder: Any, data: bytes, room: int) -> bytes:
    """Decompress ``data`` into at most ``room`` bytes (more means too large anyway)."""
    try:
        out: bytes = decoder.decompress(data, max(room, 1))
    except zlib.error as exc:
        raise ExecutorError(
            "the response's compressed body is corrupt", reason=HTTP_ERROR, detail=clip(exc)
        ) from None
    return out
