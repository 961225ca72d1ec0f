"""The gateway config (mcpServers + toolscout sections) and the cards made from upstream tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolscout.cards import Risk
from toolscout.errors import ConfigError
from toolscout.mcp.cards import specs_from_tools, tool_spec
from toolscout.mcp.config import default_scope, load_config, parse_config

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "servers.json"


def test_claude_desktop_format_with_safe_default() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
                "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}},
            }
        }
    )
    time, remote = cfg.servers
    assert time.transport == "stdio" and time.args == ("--local-timezone", "UTC")
    assert remote.transport == "http" and remote.headers == {"X-Key": "k"}
    # no toolscout section: every tool needs mcp:<server>
    assert time.defaulted and time.policy.scopes == ("mcp:time",)
    assert cfg.mode == "auto" and cfg.db is None and cfg.principal is None


def test_toolscout_section_rules() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "fs": {
                    "command": "node",
                    "toolscout": {
                        "scopes": ["files:read"],
                        "tenants": ["acme"],
                        "hide": ["read_file"],
                        "risk": {"write_*": "write"},
                        "tools": {"write_*": {"scopes": ["files:write"], "aliases": ["save"]}},
                        "not_for": {"*": ["web pages"]},
                    },
                }
            },
            "toolscout": {"principal": {"subject": "me", "scopes": ["files:read"]}, "k": 4},
        }
    )
    (fs,) = cfg.servers
    assert fs.policy.hidden("read_file") and not fs.policy.hidden("read_text_file")
    scopes, risk, rule = fs.policy.for_tool("write_file")
    assert scopes == ("files:write",) and risk is Risk.WRITE
    assert rule.aliases == ("save",) and rule.not_for == ("web pages",)
    assert fs.policy.for_tool("list_directory")[0] == ("files:read",)
    assert cfg.principal is not None and cfg.principal.subject == "me" and cfg.k == 4


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({}, "mcpServers"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a: needs exactly one of"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}, "exactly one"),
        ({"mcpServers": {"a": {"url": "ftp://h/"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"command": "x", "args": "y z"}}}, None),
        ({"mcpServers": {"a": {"command": "x", "args": [1]}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"command": "x", "bogus": 1}}}, "unknown field 'bogus'"),
        (
            {"mcpServers": {"a": {"command": "x", "toolscout": {"scopes": ["bad scope"]}}}},
            "mcpServers.a.toolscout.scopes",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "toolscout": {"risk": {"*": "huge"}}}}},
            "'huge' is not one of",
        ),
        ({"mcpServers": {}, "toolscout": {"mode": "magic"}}, "toolscout.mode"),
        ({"mcpServers": {}, "toolscout": {"timeout_s": -1}}, "toolscout.timeout_s"),
        ({"mcpServers": {}, "toolscout": {"principal": {"scopes": []}}}, "principal.subject"),
        ({"mcpServers": {"a b": {"command": "x"}, "a_b": {"command": "y"}}}, "same id"),
    ],
)
def test_bad_config_names_the_field(doc: dict[str, object], needle: str | None) -> None:
    if needle is None:  # a single string is accepted as one argument
        assert parse_config(doc).servers[0].args == ("y z",)
        return
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        parse_config(doc)


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {,}}')
    with pytest.raises(ConfigError, match=r"bad\.json:1: not valid JSON"):
        load_config(bad)
    rel = tmp_path / "rel.json"
    rel.write_text(json.dumps({"mcpServers": {}, "toolscout": {"db": "g.db"}}))
    assert load_config(rel).db == str(tmp_path / "g.db")


def test_example_config_is_valid() -> None:
    cfg = load_config(EXAMPLE)
    names = {s.name for s in cfg.servers}
    assert {"time", "memory", "filesystem"} <= names


def test_cards_from_real_world_tools() -> None:
    server = parse_config({"mcpServers": {"my srv": {"command": "x"}}}).servers[0]
    wires = [
        {
            "name": "get time",
            "title": "Current time",
            "description": "Get the time.\n\nLong details follow here.",
            "inputSchema": {"type": "object", "properties": {"tz": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        },
        {"name": "get_time", "inputSchema": {"type": "object"}},  # no description
        {"name": "wipe", "description": "Erase.", "inputSchema": {"type": "array"}},  # bad schema
        {"name": "put", "description": "Store.", "annotations": {"destructiveHint": False}},
    ]
    tools, warnings = specs_from_tools(server, wires)
    ids = [t.spec.id for t in tools]
    assert ids == ["my_srv/get_time", "my_srv/get_time~2", "my_srv/wipe", "my_srv/put"]
    first, nodesc, wipe, put = (t.spec.card for t in tools)
    assert first.summary == "Get the time. Long details follow here."
    assert first.aliases == ("Current time",) and first.risk is Risk.READ
    assert first.scopes == (default_scope("my srv"),) == ("mcp:my_srv",)
    # no hints at all: write (its server's scope); hints left at the default: destructive
    assert nodesc.summary == "get time" and nodesc.risk is Risk.WRITE
    assert put.risk is Risk.WRITE and wipe.risk is Risk.WRITE
    hinted = tool_spec(server, {"name": "rm", "annotations": {"readOnlyHint": False}}, set())
    assert hinted.spec.card.risk is Risk.DESTRUCTIVE
    assert tools[2].spec.parameters == {"type": "object", "additionalProperties": True}
    assert any("no description" in w for w in warnings)
    assert any("my_srv/wipe" in w and "open argument schema" in w for w in warnings)
    assert tools[0].spec.parameters["properties"] == {"tz": {"type": "string"}}


def test_config_rules_shape_the_cards() -> None:
    server = parse_config(
        {
            "mcpServers": {
                "fs": {
                    "command": "x",
                    "toolscout": {
                        "scopes": [],
                        "hide": ["secret_*"],
                        "tools": {"rm": {"risk": "admin", "scopes": ["fs:admin"]}},
                        "aliases": {"ls": ["list folder"]},
                    },
                }
            }
        }
    ).servers[0]
    wires = [
        {"name": "ls", "description": "List.", "annotations": {"readOnlyHint": True}},
        {"name": "rm", "description": "Remove.", "annotations": {"readOnlyHint": True}},
        {"name": "secret_dump", "description": "Dump secrets."},
    ]
    tools, _ = specs_from_tools(server, wires)
    cards = {t.name: t.spec.card for t in tools}
    assert set(cards) == {"ls", "rm"}
    assert cards["ls"].scopes == () and cards["ls"].aliases == ("list folder",)
    assert cards["rm"].risk is Risk.ADMIN and cards["rm"].scopes == ("fs:admin",)
    taken: set[str] = set()
    assert tool_spec(server, wires[0], taken).spec.card.group == "fs"
