"""The block format of a run (:mod:`simdb.tables`): sorted permuted fingerprints cut into
blocks of at most one LMDB overflow page, each keyed by its first value (8 bytes
big-endian), holding fixed-width big-endian offsets from that value and, for table 0, the
ids.  Encoding, decoding, and the search inside blocks without decoding them.

A block's value: header ``>IBBI`` (count, offset width, id width, CRC-32 of key and block),
then for table 0 the smallest id (``>Q``), then ``count`` offsets from the block's first
value, ``offset width`` bytes each, then for table 0 ``count`` ids less the smallest,
``id width`` bytes each.  Equal values never straddle two blocks.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np

from simdb.arrays import distinct, expand_ranges
from simdb.errors import CorruptDatabaseError, Remedy

#: Largest block value: exactly one LMDB overflow page (4096 bytes less its 16-byte header).
#: A value that fits in a leaf page would share it with others, and rewrites in the middle
#: of a level split such pages half empty; an overflow page is allocated whole, and the leaf
#: keeps only a 24-byte node per block.
BLOCK_BYTES = 4080
#: At most this many entries in a block (blocks of near-identical values compress far),
#: except that one value repeated more often stays one block: equal values never straddle
#: two blocks, so such a block holds every copy and may span several pages.
BLOCK_ENTRIES = 1024
HEADER = struct.Struct(">IBBI")  # count, offset width, id width, crc32
ID_BASE = struct.Struct(">Q")


def _width(values: np.ndarray) -> np.ndarray:
    """Bytes needed to write each uint64 value (0 for 0).  Eight vectorised comparisons."""
    widths = np.zeros(len(values), dtype=np.int64)
    for byte in range(8):
        widths += values >= np.uint64(1 << (8 * byte))
    return widths


def _fields(big_endian: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bytes of each value of a contiguous big-endian uint64 array, as a
    view of ``width``-byte items 8 bytes apart: copying to or from it is one strided loop,
    2.5x faster than through an (n, 8) byte slice, which numpy copies row by row."""
    return np.ndarray((len(big_endian),), dtype=f"V{width}", buffer=big_endian, offset=8 - width, strides=(8,))


def _segments(widths: np.ndarray, counts: np.ndarray) -> list[tuple[int, int, int]]:
    """(width, first entry, end entry) of each stretch of consecutive blocks of one width,
    for blocks of ``counts`` entries and ``widths`` bytes each: usually one or two (a step's
    last block, holding fewer entries, may come out narrower)."""
    changes = (np.flatnonzero(widths[1:] != widths[:-1]) + 1).tolist()
    ends = np.cumsum(counts).tolist()
    firsts = [0, *changes]
    lasts = [*changes, len(widths)]
    return [(int(widths[first]), ends[first - 1] if first else 0, ends[last - 1]) for first, last in zip(firsts, lasts)]


def _pack(values: np.ndarray, widths: np.ndarray, counts: np.ndarray) -> bytes:
    """Values big-endian, block i's ``counts[i]`` of them in ``widths[i]`` bytes each,
    concatenated.  O(n) in one strided copy per stretch of blocks of one width."""
    big_endian = values.astype(">u8")
    return b"".join(
        _fields(big_endian[start:end], width).tobytes() for width, start, end in _segments(widths, counts) if width
    )


def _unpack(buffer: bytes, widths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_pack`.  O(n) in one strided copy per stretch of blocks of one width."""
    big_endian = np.zeros(int(counts.sum()), dtype=">u8")
    at = 0
    for width, start, end in _segments(widths, counts):
        if width:
            items = np.frombuffer(buffer, dtype=f"V{width}", count=end - start, offset=at)
            _fields(big_endian[start:end], width)[:] = items
            at += (end - start) * width
    return big_endian.astype(np.uint64)


def encode_blocks(values: np.ndarray, ids: np.ndarray | None) -> list[tuple[bytes, bytes]]:
    """Sorted permuted fingerprints (and, for table 0, their ids, ascending within equal
    values) as (key, block) pairs in key order.  Equal values never straddle blocks.  O(n)
    numpy plus one Python step per block (a few hundred entries)."""
    n = len(values)
    if not n:
        return []
    id_bytes = 0
    if ids is not None:
        id_bytes = int(_width(np.array([int(ids.max() - ids.min())], dtype=np.uint64))[0])
    header = HEADER.size + (ID_BASE.size if ids is not None else 0)
    size = BLOCK_ENTRIES
    if n > 1:
        # A block is one page: the best size is the most entries per page over the offset
        # widths, where w bytes hold offsets spanning up to 2**(8w), about size x gap (less a
        # margin, so few blocks come out too wide and need splitting).
        gap = max(float(values[-1] - values[0]) / (n - 1), 1.0)
        size = max(
            min(BLOCK_ENTRIES, (BLOCK_BYTES - header) // (width + id_bytes), int(2.0 ** (8 * width) / gap / 1.1))
            for width in range(1, 9)
        )
        size = max(size, 8)
    # A block starts every ``size`` entries, each start moved forward to where a new value
    # starts: the first position past the previous entry's value (a bisect per block,
    # rather than a pass over every entry to list where values change).
    cuts = np.searchsorted(values, values[np.arange(size, n, size) - 1], side="right")
    starts = distinct(np.concatenate([[0], cuts[cuts < n]]))
    # A block whose offsets came out wider than estimated is split where values change.
    for _ in range(8):
        counts = np.diff(np.append(starts, n))
        lasts = np.append(starts[1:], n) - 1
        spans = values[lasts] - values[starts]
        sizes = header + counts * (_width(spans) + id_bytes)
        over = np.flatnonzero((sizes > BLOCK_BYTES) & (counts > 1))
        if not len(over):
            break
        # Split at the first change of value at or past the middle, else at the last one
        # before it (a long repeat in the middle of a block ends past the block); one value
        # repeated stays one block, however long.
        middle = values[starts[over] + counts[over] // 2 - 1]
        after = np.searchsorted(values, middle, side="right")
        before = np.searchsorted(values, middle, side="left")
        inside_after = (after > starts[over]) & (after <= lasts[over])
        inside_before = (before > starts[over]) & (before <= lasts[over])
        splits = np.where(inside_after, after, before)[inside_after | inside_before]
        if not len(splits):
            break
        starts = distinct(np.concatenate([starts, splits]))
    counts = np.diff(np.append(starts, n))
    firsts = values[starts]
    lasts = np.append(starts[1:], n) - 1
    fp_widths = _width(values[lasts] - firsts)
    fp_bytes = _pack(values - np.repeat(firsts, counts), fp_widths, counts)
    fp_ends = np.cumsum(counts * fp_widths).tolist()
    if ids is not None:
        id_base = np.minimum.reduceat(ids, starts)
        id_offsets = ids - np.repeat(id_base, counts)
        id_widths = _width(np.maximum.reduceat(id_offsets, starts))
        id_buffer = _pack(id_offsets, id_widths, counts)
        id_ends = np.cumsum(counts * id_widths).tolist()
        id_base_list = id_base.tolist()
        id_width_list = id_widths.tolist()
    keys = firsts.astype(">u8").view("V8").tolist()
    out = []
    fp_start = id_start = 0
    for block, (key, count, fp_width, fp_end) in enumerate(zip(keys, counts.tolist(), fp_widths.tolist(), fp_ends)):
        if ids is not None:
            id_end = id_ends[block]
            body = ID_BASE.pack(id_base_list[block]) + fp_bytes[fp_start:fp_end] + id_buffer[id_start:id_end]
            id_width = id_width_list[block]
            id_start = id_end
        else:
            body = fp_bytes[fp_start:fp_end]
            id_width = 0
        fp_start = fp_end
        out.append((key, _block_value(key, count, fp_width, id_width, body)))
    return out


def _block_value(key: bytes, count: int, fp_width: int, id_width: int, body: bytes) -> bytes:
    """A block's stored value: its header (with the CRC of key, widths and body), then the body."""
    crc = zlib.crc32(body, zlib.crc32(key + bytes((count & 0xFF, fp_width, id_width))))
    return HEADER.pack(count, fp_width, id_width, crc) + body


def encode_block(values: np.ndarray, ids: np.ndarray | None) -> tuple[bytes, bytes]:
    """Sorted values (with their ids, for table 0) known to fit one block, as one (key,
    block) pair laid out as :func:`encode_blocks` lays it out: for what is left of a block
    after removals or a merge step took entries from it (fewer entries over a span no
    wider, so never larger).  A few numpy calls, not the block-sizing search."""
    first = int(values[0])
    fp_width = (int(values[-1]) - first).bit_length() + 7 >> 3
    one_block = np.array([len(values)])
    body = _pack(values - values[0], np.array([fp_width]), one_block)
    id_width = 0
    if ids is not None:
        id_base = int(ids.min())
        id_width = (int(ids.max()) - id_base).bit_length() + 7 >> 3
        body = ID_BASE.pack(id_base) + body + _pack(ids - ids.dtype.type(id_base), np.array([id_width]), one_block)
    key = first.to_bytes(8, "big")
    return key, _block_value(key, len(values), fp_width, id_width, body)


def decode_blocks(pairs: list[tuple[bytes, bytes]], with_ids: bool, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, ids) of blocks in key order.  Raises CorruptDatabaseError naming ``where`` for
    a block whose lengths do not add up (the CRC is checked by :meth:`Tables.verify`).
    O(n) numpy plus one Python step per block."""
    if not pairs:
        return np.empty(0, dtype=np.uint64), (np.empty(0, dtype=np.uint64) if with_ids else None)
    counts, fp_widths, id_widths, firsts, id_bases = [], [], [], [], []
    fp_parts, id_parts = [], []
    extra = ID_BASE.size if with_ids else 0
    for key, value in pairs:
        count, fp_width, id_width, _ = block_header(key, value, with_ids, where)
        start = HEADER.size + extra
        middle = start + count * fp_width
        counts.append(count)
        fp_widths.append(fp_width)
        id_widths.append(id_width)
        firsts.append(int.from_bytes(key, "big"))
        fp_parts.append(value[start:middle])
        if with_ids:
            id_bases.append(ID_BASE.unpack_from(value, HEADER.size)[0])
            id_parts.append(value[middle:])
    count_array = np.array(counts, dtype=np.int64)
    values = _unpack(b"".join(fp_parts), np.array(fp_widths, dtype=np.int64), count_array)
    values += np.repeat(np.array(firsts, dtype=np.uint64), count_array)
    if not with_ids:
        return values, None
    ids = _unpack(b"".join(id_parts), np.array(id_widths, dtype=np.int64), count_array)
    ids += np.repeat(np.array(id_bases, dtype=np.uint64), count_array)
    return values, ids


def block_header(key: bytes, value: bytes, with_ids: bool, where: str) -> tuple[int, int, int, int]:
    """A block's header, checked against the block's length.  O(1)."""
    if len(key) != 8 or len(value) < HEADER.size:
        raise CorruptDatabaseError(f"{where} holds a block {key.hex()} with a damaged header", remedy=Remedy.RUN_CHECK)
    count, fp_width, id_width, crc = HEADER.unpack_from(value)
    expected = HEADER.size + (ID_BASE.size if with_ids else 0) + count * (fp_width + id_width)
    if count == 0 or fp_width > 8 or id_width > 8 or len(value) != expected or (id_width and not with_ids):
        raise CorruptDatabaseError(f"{where} holds a damaged block at key {key.hex()}", remedy=Remedy.RUN_CHECK)
    return count, fp_width, id_width, crc


# -- searching -----------------------------------------------------------------------------

#: Entries a range is followed forward before its end is bisected instead (most hold a few).
_FORWARD_STEPS = 4
#: Per width w in bytes, the mask of a w-byte value read as the low bytes of 8.
_WIDTH_MASKS = np.array([(1 << (8 * width)) - 1 for width in range(9)], dtype=np.uint64)


def search_blocks(
    blocks: Sequence[bytes],
    firsts: np.ndarray,
    with_ids: np.ndarray,
    pair_block: np.ndarray,
    queries: np.ndarray,
    lows: np.ndarray,
    tops: np.ndarray,
    k: int,
    where: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries within ``k`` bits of queries, found inside stored blocks without decoding
    them.  ``blocks`` are block values with their first values ``firsts`` and whether each
    holds ids; each pair i searches block ``pair_block[i]`` for the entries in
    [``lows[i]``, ``tops[i]``] (inclusive, so a range may end at 2**64 - 1) within ``k``
    bits of ``queries[i]`` (all permuted alike).  Every block searched must start at or
    below its pair's top.  Returns (pair index, stored value, id, distance) per entry
    found; the id is 0 for blocks without ids.

    Vectorised over every pair at once: the blocks are joined into one buffer, read through
    a view of overlapping 8-byte big-endian words (a w-byte field is the low w bytes of the
    word that ends where it ends), the start of each range is bisected over the fixed-width
    offsets (about 10 steps of a few numpy calls), its end is followed forward a few entries
    and bisected only for longer ranges, and the entries between are gathered.  O(pairs x
    log(block) + blocks + found) numpy work, plus one copy of the blocks.  Raises
    CorruptDatabaseError naming ``where`` for a block whose header does not add up to its
    length."""
    empty = np.empty(0, dtype=np.int64)
    if not len(pair_block):
        return empty, np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64), empty
    lengths = np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks))
    if (lengths < HEADER.size).any():
        bad = int(np.flatnonzero(lengths < HEADER.size)[0])
        raise CorruptDatabaseError(
            f"{where} holds a block {int(firsts[bad]):016x} with a damaged header", remedy=Remedy.RUN_CHECK
        )
    joined = b"".join(blocks)
    starts = np.cumsum(lengths) - lengths
    words = np.ndarray((len(joined) - 7,), dtype=">u8", buffer=joined, strides=(1,))
    header = words[starts].astype(np.uint64)
    counts = (header >> np.uint64(32)).astype(np.int64)
    widths = (header >> np.uint64(24) & np.uint64(0xFF)).astype(np.int64)
    id_widths = (header >> np.uint64(16) & np.uint64(0xFF)).astype(np.int64)
    bodies = starts + HEADER.size + ID_BASE.size * with_ids
    damaged = (counts == 0) | (widths > 8) | (id_widths > 8) | ((id_widths > 0) & ~with_ids)
    damaged |= lengths != bodies - starts + counts * (widths + id_widths)
    if damaged.any():
        bad = int(np.flatnonzero(damaged)[0])
        raise CorruptDatabaseError(
            f"{where} holds a damaged block at key {int(firsts[bad]):016x}", remedy=Remedy.RUN_CHECK
        )

    pairs = len(pair_block)
    first = firsts[pair_block]
    count = counts[pair_block]
    step = widths[pair_block]
    base = bodies[pair_block] + step - 8  # where the word ending with offset 0 starts
    mask = _WIDTH_MASKS[step]
    # Offsets below the range's low end (0 when the block starts inside the range), and
    # at or below its top.
    below = np.where(lows > first, lows - first, np.uint64(0))
    up_to = tops - first
    start = _bisect(words, base, step, mask, count, below, inclusive=False)
    # Most ranges hold a few entries: step forward from the first a few times, and bisect
    # only for the ranges that go on.
    end = start.copy()
    going = np.flatnonzero(end < count)
    for _ in range(_FORWARD_STEPS):
        inside = (words[base[going] + end[going] * step[going]] & mask[going]) <= up_to[going]
        going = going[inside]
        end[going] += 1
        going = going[end[going] < count[going]]
    if len(going):
        end[going] = _bisect(words, base[going], step[going], mask[going], count[going], up_to[going], inclusive=True)
    spans = end - start
    owner = np.repeat(np.arange(pairs), spans)
    positions = expand_ranges(start, spans)
    entry_block = pair_block[owner]
    width = widths[entry_block]
    stored = firsts[entry_block] + (words[bodies[entry_block] + positions * width + width - 8] & _WIDTH_MASKS[width])
    distances = np.bitwise_count(stored ^ queries[owner]).astype(np.int64)
    near = distances <= k
    owner, positions, entry_block, stored, distances = (
        owner[near],
        positions[near],
        entry_block[near],
        stored[near],
        distances[near],
    )
    ids = np.zeros(len(owner), dtype=np.uint64)
    held = with_ids[entry_block]
    if held.any():
        at, blocks_at = positions[held], entry_block[held]
        id_width = id_widths[blocks_at]
        id_base = words[starts[blocks_at] + HEADER.size].astype(np.uint64)
        ids_start = bodies[blocks_at] + counts[blocks_at] * widths[blocks_at]
        ids[held] = id_base + (words[ids_start + at * id_width + id_width - 8] & _WIDTH_MASKS[id_width])
    return owner, stored, ids, distances


def _bisect(
    words: np.ndarray,
    base: np.ndarray,
    step: np.ndarray,
    mask: np.ndarray,
    count: np.ndarray,
    targets: np.ndarray,
    *,
    inclusive: bool,
) -> np.ndarray:
    """Per row, how many of a block's ``count`` offsets (the w-byte fields ending at the
    words ``base + i x step``, w = ``step``) are below its target (at or below, when
    ``inclusive``): a bisect over every row at once, in as many steps as the largest count
    has bits (a block holds at most BLOCK_ENTRIES entries, or more copies of one value)."""
    low = np.zeros(len(count), dtype=np.int64)
    high = count.copy()
    last = count - 1
    for _ in range(int(count.max(initial=0)).bit_length()):
        middle = (low + high) >> 1
        offset = words[base + np.minimum(middle, last) * step] & mask
        right = offset <= targets if inclusive else offset < targets
        still = low < high
        low = np.where(still & right, middle + 1, low)
        high = np.where(still & ~right, middle, high)
    return low
