"""Relative links in README.md, docs/*.md and docs/history/*.md lead somewhere.

A link ``[text](path#anchor)`` must name a file that exists (relative to the linking file)
and, when it has an anchor, a heading of that file whose GitHub slug is the anchor: the
heading's text lowercased, markdown emphasis and code marks dropped, punctuation removed
(letters, digits, spaces, ``-`` and ``_`` kept), spaces turned into ``-``, and a repeated
slug suffixed ``-1``, ``-2``... Links to the web (``http:``, ``https:``, ``mailto:``) are
not followed. Headings and links inside fenced code blocks do not count."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: ``[text](target)`` and ``![alt](target)``; the text may hold one level of brackets
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
STRAY = re.compile(r"\]\(\s*<?([^)\s>]+)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def markdown_files() -> list[Path]:
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(docs.glob("*.md")), *sorted(docs.glob("history/*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers (from 1)."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        mark = FENCE.match(line)
        if mark and (not fence or mark.group(1) == fence):
            fence = "" if fence else mark.group(1)
            continue
        if not fence:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def paragraphs(text: str) -> list[tuple[int, str]]:
    """The prose's paragraphs (a link's text may wrap), each joined into one line, with the
    number of its first line."""
    out: list[tuple[int, str]] = []
    last = -1
    for number, line in prose_lines(text):
        if not line.strip():
            last = -1
            continue
        if last == number - 1 and out:
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}")
        else:
            out.append((number, line.strip()))
        last = number
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """Each link's target and the line its paragraph starts on, outside code blocks and
    inline code."""
    return [
        (number, match.group(1))
        for number, paragraph in paragraphs(path.read_text(encoding="utf-8"))
        for match in LINK.finditer(INLINE_CODE.sub("", paragraph))
    ]


def unlinked(path: Path) -> list[tuple[int, str]]:
    """Each target written as a link's ``](target)`` whose text is not taken as a link's
    (a stray bracket, as in ``[text]](target)``), with its paragraph's first line."""
    return [
        (number, match.group(1))
        for number, paragraph in paragraphs(path.read_text(encoding="utf-8"))
        for match in STRAY.finditer(LINK.sub("", INLINE_CODE.sub("", paragraph)))
    ]


def broken(path: Path, root: Path = ROOT) -> list[str]:
    """One line per link of ``path`` that names a missing file or a missing heading, or that
    is not read as a link at all."""
    problems = [
        f"{path.relative_to(root)}:{number}: {target}: not a link (a stray bracket before it)"
        for number, target in unlinked(path)
    ]
    for number, target in links(path):
        if target.startswith(EXTERNAL):
            continue
        file_part, _, anchor = target.partition("#")
        goal = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not goal.exists():
            problems.append(f"{where}: no file {goal}")
        elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {goal.name}")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    problems = broken(path)
    assert not problems, "\n".join(problems)


def test_slug_follows_githubs_rules() -> None:
    assert slug("Cold start: a new process's first discovery") == (
        "cold-start-a-new-processs-first-discovery"
    )
    assert slug("HTTP load: `toolscout serve` under `wrk`") == "http-load-toolscout-serve-under-wrk"
    assert slug("Scale: 1k / 10k / 100k tools on SQLite and PostgreSQL") == (
        "scale-1k--10k--100k-tools-on-sqlite-and-postgresql"
    )
    assert slug("Start-up: spawn → `initialize` and → first `search_tools`") == (
        "start-up-spawn--initialize-and--first-search_tools"
    )


def test_a_missing_file_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A part: its figures\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n[ok](other.md#a-part-its-figures) [self](#page)\n"
        "[gone](missing.md) [no anchor](other.md#a-part) [a wrapped\nlink](other.md#nowhere)\n"
        "```\n[in a fence](missing-too.md)\n```\n[a stray bracket]](other.md)\n",
        encoding="utf-8",
    )
    problems = broken(page, root=tmp_path)
    assert [p.split(": ")[1] for p in problems] == [
        "other.md",
        "missing.md",
        "other.md#a-part",
        "other.md#nowhere",
    ]
