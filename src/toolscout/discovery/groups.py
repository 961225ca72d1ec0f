"""The groups tier: the best hits, then the rest of their groups, within a budget.

With a mid-sized entitlement (:data:`toolscout.discovery.inject.GROUPS_UP_TO`)
a model does well with whole groups of related tools (every ``flights.*``
tool when one is relevant). The progressive top hits are always kept, first
and in their order; each hit's group then adds its other members, best hit's
group first, while the count and the token budget allow. A tool without a
group is a group of its own, so an ungrouped best match is never lost to the
members of another group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from toolscout.discovery.search import Candidate

#: the most tools the groups tier returns when no token budget bounds it
GROUPS_MAX_TOOLS = 10


def expand_groups(
    chosen: Sequence[Candidate],
    group_of: Mapping[str, str],
    entitled: Sequence[str],
    *,
    limit: int = GROUPS_MAX_TOOLS,
    token_cost: Callable[[str], int] | None = None,
    token_budget: int | None = None,
) -> list[Candidate]:
    """``chosen`` (kept whole, in order), then their groups' other entitled members.

    ``group_of`` maps a tool id to its group ("" or absent: ungrouped);
    ``entitled`` lists the ids the caller may use, in catalog order.
    """
    out = list(chosen)
    taken = {c.id for c in out}
    used = sum(token_cost(c.id) for c in out) if token_cost is not None else 0
    members: dict[str, list[str]] = {}
    for tid in entitled:
        group = group_of.get(tid, "")
        if group:
            members.setdefault(group, []).append(tid)
    for hit in chosen:
        for tid in members.get(group_of.get(hit.id, ""), ()):
            if len(out) >= max(limit, len(chosen)):
                return out
            if tid in taken:
                continue
            cost = token_cost(tid) if token_cost is not None else 0
            if token_budget is not None and used + cost > token_budget:
                continue
            out.append(Candidate(tid))
            taken.add(tid)
            used += cost
    return out
