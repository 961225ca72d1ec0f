"""Which discovery each tool call or feedback answers: the links every usage signal reads.

An event (an execution, or explicit feedback naming a tool) is linked to the discovery
before it — by its discovery id, or else by the latest discovery of the same
conversation (per tenant) since that conversation's previous event — together with every
discovery the conversation made in between (a **second search** when there were several).
The false-negative report (:mod:`toolscout.telemetry.report`) counts misses over these
links; the confidence check (:mod:`toolscout.telemetry.confidence`) scores the reported
confidence against them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from toolscout.telemetry.log import DiscoveryRow, EventRow

__all__ = ["Need", "link_needs"]


@dataclass(slots=True)
class Need:
    """One time a tool was needed: the event and the discoveries before it."""

    event: EventRow
    discovery: DiscoveryRow | None
    earlier: list[DiscoveryRow]  # the same conversation's discoveries since its last event


def link_needs(discoveries: Sequence[DiscoveryRow], events: Sequence[EventRow]) -> list[Need]:
    """Each event linked to its discovery (events with none to compare with are left out)."""
    by_id = {d.id: d for d in discoveries}
    by_conv: dict[tuple[str, str], list[DiscoveryRow]] = defaultdict(list)
    for row in discoveries:
        if row.conversation:
            by_conv[(row.tenant, row.conversation)].append(row)
    last_event: dict[tuple[str, str], float] = {}
    needs = []
    for e in events:
        d: DiscoveryRow | None = by_id.get(e.discovery_id) if e.discovery_id else None
        conv = e.conversation or (d.conversation if d else None)
        tenant = e.tenant if e.tenant is not None else (d.tenant if d else "")
        earlier: list[DiscoveryRow] = []
        if conv:
            key = (tenant, conv)
            after = last_event.get(key, float("-inf"))
            earlier = [x for x in by_conv.get(key, ()) if after <= x.ts <= e.ts]
            if d is None and earlier:
                d = earlier[-1]
            last_event[key] = e.ts
        if d is None and e.discovery_id is None:
            continue  # an execution with no discovery to compare with
        needs.append(Need(e, d, earlier))
    return needs
