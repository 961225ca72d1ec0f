"""The suite's ports: a block per worker below the ephemeral range (tests/port_kit.py)."""

from __future__ import annotations

import socket

import pytest

import port_kit
from port_kit import BLOCK, FLOOR, WORKERS, block_start, free_port


def test_workers_of_a_run_get_disjoint_blocks_below_the_ephemeral_range() -> None:
    starts = [block_start(w, "run-a", 32_768) for w in range(WORKERS)]
    assert all(s is not None for s in starts)
    blocks = [set(range(s, s + BLOCK)) for s in starts if s is not None]
    assert all(a.isdisjoint(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    assert min(min(b) for b in blocks) >= FLOOR and max(max(b) for b in blocks) < 32_768
    # another run's slice is chosen from its own id, the same one every time
    assert block_start(0, "run-a", 32_768) == starts[0]
    assert block_start(3, "run-b", 32_768) is not None


def test_no_room_below_the_ephemeral_range_leaves_it_to_the_kernel() -> None:
    assert block_start(0, "run", FLOOR + BLOCK * WORKERS - 1) is None


def test_ports_are_handed_out_in_turn_and_skip_one_in_use() -> None:
    if port_kit._START is None:
        pytest.skip("no room below this machine's ephemeral port range: the kernel picks")
    first = free_port()
    while first + 2 >= port_kit._START + BLOCK:  # at the block's end: the next turn
        first = free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", first + 1))  # the next in turn, taken by someone else
        held.listen()
        assert free_port() == first + 2
    assert port_kit._START <= first < port_kit._START + BLOCK
