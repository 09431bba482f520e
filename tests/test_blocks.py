"""The search inside stored blocks (simdb.blocks.search_blocks) against a brute-force scan
of the decoded entries, and its refusal of damaged blocks; the encoded blocks read byte by
byte as their layout says."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.blocks import BLOCK_BYTES, decode_blocks, encode_blocks, search_blocks
from simdb.errors import CorruptDatabaseError

WORD = (1 << 64) - 1


def _stored(size: int, spread: int, repeats: int, with_ids: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``size`` sorted values drawn over the top ``spread`` bits (so blocks hold offsets of
    every width), some repeated, with distinct ids ascending within equal values."""
    rng = np.random.default_rng(seed)
    array = rng.integers(0, WORD, size, dtype=np.uint64, endpoint=True)
    array = array >> np.uint64(64 - spread) << np.uint64(64 - spread) if spread else np.full(size, 9, dtype=np.uint64)
    array = np.sort(np.concatenate([array, array[:repeats]]))
    ids = rng.permutation(1 << 24)[: len(array)].astype(np.uint64) if with_ids else np.zeros(len(array), np.uint64)
    order = np.lexsort((ids, array))
    return array[order], ids[order]


def _pairs_for(firsts: np.ndarray, lows: np.ndarray, tops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (query, block) pair a caller searches: from the block holding the low end (or
    the first) to the last block starting at or below the top."""
    queries, blocks = [], []
    for query, (low, top) in enumerate(zip(lows.tolist(), tops.tolist())):
        start = max(int(np.searchsorted(firsts, np.uint64(low), side="right")) - 1, 0)
        stop = int(np.searchsorted(firsts, np.uint64(top), side="right"))
        for block in range(start, stop):
            queries.append(query)
            blocks.append(block)
    return np.array(queries, dtype=np.int64), np.array(blocks, dtype=np.int64)


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(1, 3000),
    spread=st.sampled_from([64, 44, 20, 9, 0]),
    repeats=st.integers(0, 1500),
    with_ids=st.booleans(),
    span_bits=st.sampled_from([0, 1, 30, 50, 63, 64]),
    k=st.integers(0, 64),
    seed=st.integers(0, 1 << 30),
)
def test_search_finds_exactly_the_entries_a_scan_finds(
    size: int, spread: int, repeats: int, with_ids: bool, span_bits: int, k: int, seed: int
) -> None:
    """Every (query, entry) in the query's range [low, top] within k bits, with its id, and
    nothing else, over blocks of every offset width, repeated values, ranges spanning
    several blocks and ranges reaching 2**64 - 1; and the encoder keeps blocks to a page
    except where one value repeats beyond it."""
    stored, ids = _stored(size, spread, repeats, with_ids, seed)
    encoded = encode_blocks(stored, ids if with_ids else None)
    firsts = np.array([int.from_bytes(key, "big") for key, _ in encoded], dtype=np.uint64)
    # A block is at most a page, unless it is every copy of one value.
    bounds = [*np.searchsorted(stored, firsts).tolist(), len(stored)]
    for (_, value), start, stop in zip(encoded, bounds, bounds[1:]):
        assert len(value) <= BLOCK_BYTES or stored[start] == stored[stop - 1]
    rng = np.random.default_rng(seed)
    near = stored[rng.integers(0, len(stored), 20)] ^ (np.uint64(1) << rng.integers(0, 64, 20, dtype=np.uint64))
    edges = np.array([0, WORD], dtype=np.uint64)
    queries = np.concatenate([near, rng.integers(0, WORD, 20, dtype=np.uint64, endpoint=True), edges])
    span = np.uint64((1 << span_bits) - 1)
    lows, tops = queries & ~span, queries | span
    pair_query, pair_block = _pairs_for(firsts, lows, tops)
    owner, found, found_ids, distances = search_blocks(
        [value for _, value in encoded],
        firsts,
        np.full(len(encoded), with_ids),
        pair_block,
        queries[pair_query],
        lows[pair_query],
        tops[pair_query],
        k,
        "test run",
    )
    got = sorted(zip(pair_query[owner].tolist(), found.tolist(), found_ids.tolist(), distances.tolist()))
    # The oracle: every (query, entry) pair, compared in full.
    every_distance = np.bitwise_count(queries[:, None] ^ stored[None, :])
    inside = (lows[:, None] <= stored[None, :]) & (stored[None, :] <= tops[:, None]) & (every_distance <= k)
    query_at, entry_at = np.nonzero(inside)
    expected = sorted(
        zip(query_at.tolist(), stored[entry_at].tolist(), ids[entry_at].tolist(), every_distance[inside].tolist())
    )
    assert got == expected


def _entries_as_laid_out(key: bytes, block: bytes, with_ids: bool) -> list[tuple[int, int]]:
    """A block's (value, id) entries read byte by byte as the module docstring lays a block
    out, checking its CRC: the oracle of the vectorised encoder and decoder."""
    count, width, id_width, crc = struct.unpack_from(">IBBI", block)
    body = block[10:]
    assert zlib.crc32(body, zlib.crc32(key + bytes((count & 0xFF, width, id_width)))) == crc
    id_base = struct.unpack_from(">Q", body)[0] if with_ids else 0
    offsets = body[8:] if with_ids else body
    assert len(offsets) == count * (width + id_width)
    first = int.from_bytes(key, "big")
    entries = []
    for at in range(count):
        value = first + int.from_bytes(offsets[at * width : (at + 1) * width], "big")
        id_at = count * width + at * id_width
        entries.append((value, id_base + int.from_bytes(offsets[id_at : id_at + id_width], "big")))
    return entries


@settings(max_examples=150, deadline=None)
@given(
    spread=st.integers(0, 3000),
    clustered=st.integers(0, 3000),
    cluster_bits=st.integers(0, 40),
    run=st.integers(0, 3000),
    with_ids=st.booleans(),
    id_bits=st.sampled_from([1, 12, 24, 40, 64]),
    seed=st.integers(0, 1 << 30),
)
def test_blocks_hold_every_entry_as_the_layout_says(
    spread: int, clustered: int, cluster_bits: int, run: int, with_ids: bool, id_bits: int, seed: int
) -> None:
    """Read byte by byte, the encoded blocks hold exactly the entries, in order, each keyed
    by its first value, with a CRC that checks; decoding returns them too.  Values spread
    over 64 bits, a cluster within ``cluster_bits`` of one value and a run of one repeated
    value give blocks of different offset widths side by side (and ids of different
    widths), so the packing of mixed widths is read too."""
    rng = np.random.default_rng(seed)
    centre = int(rng.integers(0, 1 << 63))
    parts = [
        rng.integers(0, WORD, spread, dtype=np.uint64, endpoint=True),
        centre + rng.integers(0, 1 << cluster_bits, clustered, dtype=np.uint64, endpoint=True),
        np.full(run, centre + (1 << cluster_bits), dtype=np.uint64),
    ]
    stored = np.concatenate(parts)
    if not len(stored):
        return
    ids = rng.integers(0, WORD >> (64 - id_bits), len(stored), dtype=np.uint64, endpoint=True)
    order = np.lexsort((ids, stored))
    stored, ids = stored[order], ids[order]
    encoded = encode_blocks(stored, ids if with_ids else None)
    laid_out = []
    for key, block in encoded:
        entries = _entries_as_laid_out(key, block, with_ids)
        assert entries[0][0] == int.from_bytes(key, "big")
        laid_out.extend(entries)
    assert [value for value, _ in laid_out] == stored.tolist()
    if with_ids:
        assert [id_ for _, id_ in laid_out] == ids.tolist()
    values, decoded_ids = decode_blocks(encoded, with_ids, "test run")
    assert np.array_equal(values, stored)
    assert np.array_equal(decoded_ids, ids) if with_ids else decoded_ids is None


@pytest.mark.parametrize("damage", ["truncated", "short", "wide"])
def test_a_damaged_block_is_refused_with_its_run_named(damage: str) -> None:
    stored = np.arange(0, 4000, 3, dtype=np.uint64) << np.uint64(20)
    key, value = encode_blocks(stored, None)[0]
    if damage == "truncated":
        value = value[:-1]
    elif damage == "short":
        value = value[:6]
    else:
        value = value[:4] + bytes([9]) + value[5:]  # an offset width over 8 bytes
    zero = np.zeros(1, dtype=np.int64)
    with pytest.raises(CorruptDatabaseError, match="t.03.s01"):
        search_blocks(
            [value, value],
            np.array([int.from_bytes(key, "big")] * 2, dtype=np.uint64),
            np.zeros(2, dtype=bool),
            zero,
            stored[:1],
            stored[:1],
            stored[:1],
            3,
            "t.03.s01",
        )


@pytest.mark.parametrize("with_ids", [False, True])
def test_a_long_repeat_inside_a_block_becomes_a_block_of_its_own(with_ids: bool) -> None:
    """5,000 copies of one value between 300 distinct values on each side: the copies are
    one block (offsets 0 bytes wide) and the others keep to a page, instead of one block
    of every entry with 8-byte offsets."""
    rng = np.random.default_rng(0)
    below = rng.integers(0, 1 << 62, 300, dtype=np.uint64)
    above = rng.integers((1 << 62) + 1, 1 << 63, 300, dtype=np.uint64)
    stored = np.sort(np.concatenate([below, np.full(5000, 1 << 62, dtype=np.uint64), above]))
    ids = np.arange(len(stored), dtype=np.uint64) if with_ids else None
    encoded = encode_blocks(stored, ids)
    repeat = [value for key, value in encoded if int.from_bytes(key, "big") == 1 << 62]
    assert len(repeat) == 1 and len(repeat[0]) < 100 + (2 * 5000 if with_ids else 0)  # 2-byte ids
    assert all(len(value) <= BLOCK_BYTES for value in encoded_values_except(encoded, repeat[0]))
    assert np.array_equal(decode_blocks(encoded, with_ids, "test")[0], stored)


def encoded_values_except(encoded: list[tuple[bytes, bytes]], skipped: bytes) -> list[bytes]:
    return [value for _, value in encoded if value is not skipped]
