from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolscout.errors import CatalogFileError, ConfigError
from toolscout.loader import demo_catalog_dir, read_catalog, read_jsonl, read_policy

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
        (json.dumps({**ROW, "id": "x:b", "description": ""}), "summary"),
        (json.dumps({**ROW, "id": "x:b", "parameters": {"type": 5}}), "parameters"),
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
    b.write_text(json.dumps(ROW) + "\n")
    with pytest.raises(CatalogFileError, match="duplicate id"):
        read_catalog([a, b])


def test_yaml_errors(tmp_path: Path) -> None:
    bad = tmp_path / "svc.yaml"
    bad.write_text("tools:\n  - id: a.b\n    summary: [unclosed\n")
    with pytest.raises(CatalogFileError, match="invalid YAML"):
        read_catalog([bad])
    bad.write_text("tools:\n  - id: a.b\n")
    with pytest.raises(CatalogFileError, match=r"tool #1.*summary"):
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
