"""The part of a long request that discovery reads.

Agents send whole prompts: a system preamble, the conversation so far, pasted
documents, and the latest request somewhere in it. Refusing such a request finds
nothing; reading all of it drowns the request in context. A request longer than
the budget is cut down to what says which tools are needed:

1. when it is a transcript (turns marked ``User:``/``Human:``/``<user>`` and the
   like), the latest user turn, which is the request being served;
2. then, when that is still too long, its opening sentences (where a task is
   stated) and its closing paragraph (where a question or instruction usually
   ends a pasted document), the middle left out.

A text within the budget is returned unchanged; nothing here decides relevance.
"""

from __future__ import annotations

import re

#: the start of a user turn in a transcript (a role label at the start of a line, a chat
#: template tag, or a Markdown heading naming the user's turn)
_USER_TURN = re.compile(
    r"(?im)(?:^[ \t>#*]*(?:user|human|customer|question|task|request)\s*:[ \t]*"
    r"|<\|?(?:user|human)\|?>"
    r"|^#{1,6}[ \t]*(?:user|human|task|request|question)\b[^\n]*\n)"
)
#: the end of the user's turn: the next turn of any other role
_OTHER_TURN = re.compile(
    r"(?im)(?:^[ \t>#*]*(?:assistant|ai|system|model|tool|observation)\s*:"
    r"|<\|?(?:assistant|system|tool|end)\|?>|</(?:user|human)>)"
)
#: where a sentence ends (Latin and CJK full stops, question and exclamation marks)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
#: the share of the budget given to the opening sentences when the text is cut in two
HEAD_SHARE = 0.75
#: a separator that marks where text was left out (no word of its own)
GAP = "\n…\n"


def latest_user_turn(text: str) -> str:
    """The text of the last user turn of a transcript, or "" when it is not one."""
    starts = list(_USER_TURN.finditer(text))
    if not starts:
        return ""
    last = starts[-1]
    end = _OTHER_TURN.search(text, last.end())
    return text[last.end() : end.start() if end else len(text)].strip()


def _head(text: str, budget: int) -> tuple[str, int]:
    """Whole opening sentences within ``budget`` characters (at least a cut first one),
    and where in ``text`` they end."""
    out: list[str] = []
    used = 0
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        sentence = text[pos : m.start()]
        if used + len(sentence) + 1 > budget:
            break
        out.append(sentence)
        used += len(sentence) + 1
        pos = m.end()
    if not out:
        return text[:budget].rstrip(), budget
    return " ".join(s.strip() for s in out if s.strip()), pos


def _tail(text: str, budget: int) -> str:
    """The closing paragraph (or the last whole sentences that fit ``budget``)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    last = paragraphs[-1] if paragraphs else ""
    if len(last) <= budget:
        return last
    sentences = [s for s in _SENTENCE_END.split(last) if s.strip()]
    out: list[str] = []
    used = 0
    for sentence in reversed(sentences):
        if used + len(sentence) + 1 > budget:
            break
        out.insert(0, sentence.strip())
        used += len(sentence) + 1
    return " ".join(out) if out else last[-budget:].lstrip()


def focus(text: str, budget: int) -> str:
    """``text`` itself when it fits ``budget`` characters, else the part that matters."""
    text = text.strip()
    if len(text) <= budget:
        return text
    turn = latest_user_turn(text)
    if turn:
        text = turn
        if len(text) <= budget:
            return text
    head, end = _head(text, int(budget * HEAD_SHARE))
    tail = _tail(text[end:], budget - len(head) - len(GAP))
    if not tail or tail in head:
        return head
    return head + GAP + tail
