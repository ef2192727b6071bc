"""TensorFlow's best-fit-with-coalescing (BFC) allocator, replayed over a list of allocations.

The allocator counts what it hands out in whole chunks: it takes the smallest free chunk that
holds a request and splits it only when the chunk is at least twice the (256-byte rounded)
request, or the rest is 128 MiB or more; otherwise the whole chunk is in use. With growth on
(the CPU's oneDNN allocator), memory comes in regions of 2 MiB, doubled at every new region or
as many times as a request needs. Freed chunks merge with free neighbours of their region.
This module replays those rules (tensorflow/core/common_runtime/bfc_allocator.cc) so that a
prediction counts bytes as ``tf.config.experimental.get_memory_info`` does.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MIN_ALLOCATION", "Event", "replay"]

MIN_ALLOCATION = 256
MAX_INTERNAL_FRAGMENTATION = 128 * 2**20
INITIAL_REGION = 2 * 2**20


@dataclass(frozen=True)
class Event:
    """Allocate ``size`` bytes under ``key`` (size > 0), or free ``key`` (size 0)."""

    key: object
    size: int


@dataclass
class _Chunk:
    region: int
    offset: int
    size: int
    free: bool
    prev: _Chunk | None = None
    next: _Chunk | None = None


def replay(events: Iterable[Event], *, initial_region: int = INITIAL_REGION) -> int:
    """Replay ``events`` on a growing BFC allocator; return the peak bytes in use."""
    free: list[tuple[int, int, int]] = []  # (size, region, offset), sorted: best fit first
    chunks: dict[tuple[int, int], _Chunk] = {}
    taken: dict[object, _Chunk] = {}
    region_bytes = initial_region
    regions = 0
    in_use = peak = 0

    def add_free(chunk: _Chunk) -> None:
        bisect.insort(free, (chunk.size, chunk.region, chunk.offset))

    def remove_free(chunk: _Chunk) -> None:
        index = bisect.bisect_left(free, (chunk.size, chunk.region, chunk.offset))
        del free[index]

    for event in events:
        if event.size <= 0:
            chunk = taken.pop(event.key, None)
            if chunk is None:
                continue
            in_use -= chunk.size
            chunk.free = True
            for neighbour in (chunk.next, chunk.prev):
                if neighbour is not None and neighbour.free:
                    remove_free(neighbour)
                    first, second = (
                        (chunk, neighbour)
                        if neighbour is chunk.next
                        else (
                            neighbour,
                            chunk,
                        )
                    )
                    first.size += second.size
                    first.next = second.next
                    if second.next is not None:
                        second.next.prev = first
                    chunks.pop((second.region, second.offset), None)
                    chunk = first
            add_free(chunk)
            continue
        rounded = -(-event.size // MIN_ALLOCATION) * MIN_ALLOCATION
        index = bisect.bisect_left(free, (rounded, -1, -1))
        if index == len(free):
            grown = False
            while rounded > region_bytes:
                region_bytes *= 2
                grown = True
            chunk = _Chunk(regions, 0, region_bytes, True)
            chunks[(regions, 0)] = chunk
            regions += 1
            if not grown:
                region_bytes *= 2
        else:
            _size, region, offset = free.pop(index)
            chunk = chunks[(region, offset)]
        if chunk.size >= 2 * rounded or chunk.size - rounded >= MAX_INTERNAL_FRAGMENTATION:
            rest = _Chunk(chunk.region, chunk.offset + rounded, chunk.size - rounded, True)
            rest.prev, rest.next = chunk, chunk.next
            if chunk.next is not None:
                chunk.next.prev = rest
            chunk.next = rest
            chunk.size = rounded
            chunks[(rest.region, rest.offset)] = rest
            add_free(rest)
        chunk.free = False
        taken[event.key] = chunk
        in_use += chunk.size
        peak = max(peak, in_use)
    return peak
