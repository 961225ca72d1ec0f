from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from support import alias_bomb
from toolscout.cards import WarningKind
from toolscout.errors import CatalogFileError, ConfigError
from toolscout.loader import (
    YAML_ALIAS_BUDGET,
    demo_catalog_dir,
    read_cards,
    read_catalog,
    read_jsonl,
    read_policy,
)

ROW = {
    "id": "x:a",
    "name": "a",
    "description": "Does a.",
    "parameters": {},
    "source": "x",
    "group": "",
}


def _jsonl(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "tools.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_jsonl_maps_fields(tmp_path: Path) -> None:
    row = {
        **ROW,
        "group": "g",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    (s,) = read_jsonl(_jsonl(tmp_path, json.dumps(row)))
    assert (s.id, s.card.name, s.card.summary, s.card.group, s.card.source) == (
        "x:a",
        "a",
        "Does a.",
        "g",
        "x",
    )
    assert "q" in s.parameters["properties"]


@pytest.mark.parametrize(
    ("bad_line", "fragment"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({**ROW, "id": None}), "missing"),
        (json.dumps({**ROW, "id": "x:b", "parameters": {"type": 5}}), "parameters"),
        (json.dumps({**ROW, "id": "x:b", "parameters": {"$ref": "http://10.0.0.1/s"}}), "remote"),
        (json.dumps({**ROW, "id": "x:b", "scopes": "a b"}), "scopes"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path: Path, bad_line: str, fragment: str) -> None:
    p = _jsonl(tmp_path, json.dumps(ROW), "", bad_line)
    with pytest.raises(CatalogFileError) as info:
        read_jsonl(p)
    assert info.value.line == 3 and fragment in str(info.value) and str(p) in str(info.value)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text(json.dumps(ROW) + "\n")
    b.write_text("\n" + json.dumps(ROW) + "\n")
    with pytest.raises(CatalogFileError) as info:
        read_catalog([a, b])
    assert info.value.path == str(b) and info.value.line == 2
    assert f"duplicate id 'x:a' (first at {a}:1)" in str(info.value)


def test_duplicate_id_in_one_file_names_both_lines(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, json.dumps(ROW), json.dumps({**ROW, "id": "x:b"}), json.dumps(ROW))
    with pytest.raises(CatalogFileError) as info:
        read_catalog([p])
    assert info.value.line == 3 and f"first at {p}:1" in str(info.value)
    cards = tmp_path / "svc.yaml"
    cards.write_text("tools:\n  - id: a.x\n    summary: A.\n\n  - id: a.x\n    summary: B.\n")
    with pytest.raises(CatalogFileError) as info:
        read_catalog([cards])
    assert info.value.line == 5 and f"first at {cards}:2" in str(info.value)


MESSY = [
    {"id": "rapid:getWeatherForecast", "description": "", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}}},
    {"id": "mcp:fetch_rows", "description": "Fetch rows of a table.", "parameters": {
        "type": "object",
        "properties": {
            "table": {"type": "string", "required": True},
            "limit": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            "page": {"type": "integer", "maximum": "50"},
        },
    }},
    {"id": "clean:ping", "description": "Ping the service.", "parameters": {}},
]  # fmt: skip


def test_messy_catalog_reads_with_warnings_naming_file_and_line(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, *(json.dumps(r) for r in MESSY))
    specs = read_catalog([p])
    assert [s.id for s in specs] == ["rapid:getWeatherForecast", "mcp:fetch_rows", "clean:ping"]
    empty, schema, clean = (s.warnings for s in specs)
    assert [w.kind for w in empty] == [WarningKind.EMPTY_SUMMARY]
    assert empty[0].where == f"{p}:1" and specs[0].card.summary == "Get weather forecast (city)."
    assert [w.kind for w in schema] == [WarningKind.INVALID_SCHEMA] and schema[0].where == f"{p}:2"
    assert specs[1].parameters == MESSY[1]["parameters"]  # kept as published
    assert clean == ()
    with pytest.raises(CatalogFileError) as info:
        read_catalog([p], strict=True)
    assert info.value.line == 1 and "summary" in str(info.value) and "strict" in str(info.value)


def test_card_file_errors_and_warnings_name_the_line(tmp_path: Path) -> None:
    p = tmp_path / "svc.yaml"
    p.write_text(
        "service: svc\ntools:\n  - id: svc.a\n    summary: A.\n"
        "  - id: svc.b\n    parameters: {type: object}\n"
    )
    _, b = read_cards(p)
    assert b.warnings[0].where == f"{p}:5" and b.card.source == "svc"
    p.write_text("tools:\n  - id: svc.a\n    summary: A.\n  - id: svc.b\n    risk: huge\n")
    with pytest.raises(CatalogFileError) as info:
        read_cards(p)
    assert info.value.line == 4 and "tool #2" in str(info.value)


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
def test_binary_and_non_utf8_files_are_one_line_errors(tmp_path: Path, suffix: str) -> None:
    binary = tmp_path / f"blob{suffix}"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(CatalogFileError, match="binary file"):
        read_catalog([binary])
    latin = tmp_path / f"latin{suffix}"
    latin.write_bytes(b'{"id": "a.b",\n "summary": "caf\xe9"}\n')
    with pytest.raises(CatalogFileError) as info:
        read_catalog([latin])
    assert "not UTF-8" in str(info.value) and info.value.line == 2
    assert "\n" not in str(info.value)


def test_yaml_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    bomb = alias_bomb(tmp_path / "bomb.yaml")
    assert bomb.stat().st_size < 1500
    start = time.perf_counter()
    with pytest.raises(CatalogFileError, match="alias bomb"):
        read_catalog([bomb])
    assert time.perf_counter() - start < 5
    policy = tmp_path / "policy.yaml"
    policy.write_text(bomb.read_text().replace("tools:", "roles:"))
    with pytest.raises(ConfigError, match="alias bomb"):
        read_policy(policy)


def test_self_referencing_yaml_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "loop.yaml"
    p.write_text("tools: &t\n  - id: a.b\n    summary: x\n    tags: *t\n")
    with pytest.raises(CatalogFileError, match="refers to itself"):
        read_catalog([p])


def test_modest_yaml_aliases_are_fine(tmp_path: Path) -> None:
    p = tmp_path / "svc.yaml"
    p.write_text(
        "common: &scopes [billing:read]\ntools:\n"
        + "".join(f"  - id: svc.t{i}\n    summary: T{i}.\n    scopes: *scopes\n" for i in range(50))
    )
    specs = read_catalog([p])
    assert len(specs) == 50 and all(s.card.scopes == ("billing:read",) for s in specs)
    assert YAML_ALIAS_BUDGET >= 10_000


def test_yaml_errors(tmp_path: Path) -> None:
    bad = tmp_path / "svc.yaml"
    bad.write_text("tools:\n  - id: a.b\n    summary: [unclosed\n")
    with pytest.raises(CatalogFileError, match="invalid YAML"):
        read_catalog([bad])
    bad.write_text("tools:\n  - summary: no id\n")
    with pytest.raises(CatalogFileError, match=r"tool #1.*id"):
        read_catalog([bad])
    with pytest.raises(CatalogFileError, match="no such file"):
        read_catalog([tmp_path / "missing.yaml"])
    with pytest.raises(CatalogFileError, match=r"no \.yaml"):
        read_catalog([_empty(tmp_path)])


def _empty(tmp_path: Path) -> Path:
    d = tmp_path / "empty"
    d.mkdir()
    return d


def test_demo_catalog_and_policy_load() -> None:
    specs = read_catalog([demo_catalog_dir()])
    ids = {s.id for s in specs}
    assert {
        "orders.search_orders",
        "orders.find_order",
        "orders.query_freight_telemetry",
        "cloud.terminate_batch_process",
        "database.drop_partition",
        "billing.issue_full_refund",
    } <= ids
    policy = read_policy(demo_catalog_dir() / "policy.yaml")
    assert policy.admin_scope == "toolscout:admin" and "support_agent" in policy.roles


def test_bad_policy_file(tmp_path: Path) -> None:
    p = tmp_path / "policy.yaml"
    p.write_text("roles: [a, b]\n")
    with pytest.raises(ConfigError, match=r"policy\.yaml"):
        read_policy(p)
    with pytest.raises(ConfigError, match="cannot read"):
        read_policy(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("name", "text"),
    [("t.jsonl", ""), ("t.jsonl", "\n \n"), ("t.yaml", "tools: []\n"), ("t.json", "[]")],
)
def test_a_file_without_tools_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(CatalogFileError, match="no tools in this file"):
        read_catalog([p])


def test_devices_and_fifos_are_not_read(tmp_path: Path) -> None:
    import os

    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    with pytest.raises(CatalogFileError, match="not a regular file"):
        read_catalog([zero])
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(CatalogFileError, match="not a regular file"):
        read_catalog([fifo])
