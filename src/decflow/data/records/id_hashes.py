"""Stable 64-bit hashes of record ids, for ids a monitor keeps across runs (its stored
predictions, the labels that join them later): the same on every machine and every version
of every library (polars' own hash, which the check uses within one run, may change between
its versions).

The hash: the id's UTF-8 bytes read as little-endian 64-bit words (the last one padded with
zeros), folded FNV-1a style (xor the word, multiply by the FNV prime), with the byte length
folded in last, then splitmix64's finalizer to spread every bit. Vectorized: one numpy step
per word of the longest id, over all ids at once (1M ids of 22 bytes: ≈ 0.1 s).
"""

from __future__ import annotations

import numpy as np
import polars as pl

ID_HASH = "fnv64-words-splitmix"  # recorded beside stored hashes
_OFFSET = np.uint64(0xCBF29CE484222325)
_PRIME = np.uint64(0x100000001B3)
_MIX = (np.uint64(30), np.uint64(0xBF58476D1CE4E5B9), np.uint64(27),
        np.uint64(0x94D049BB133111EB), np.uint64(31))


def stable_id_hashes(ids: pl.Series) -> np.ndarray:
    """The hash of each id (uint64; ids must not be null)."""
    # large_string: int64 offsets and the bytes, as a check reads them
    texts = ids.cast(pl.String).to_arrow(compat_level=pl.CompatLevel.oldest())
    if hasattr(texts, "combine_chunks"):
        texts = texts.combine_chunks()
    _, offsets_buffer, data_buffer = texts.buffers()
    n = len(texts)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=n + 1,
                            offset=texts.offset * 8)
    data = (np.empty(0, dtype=np.uint8) if data_buffer is None
            else np.frombuffer(data_buffer, dtype=np.uint8))
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    # every 8-byte window of the bytes, as a little-endian word (an unaligned view)
    words = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes = np.full(n, _OFFSET, dtype=np.uint64)
    longest = int(lengths.max()) if n else 0
    with np.errstate(over="ignore"):
        for at in range(0, longest, 8):
            _fold(hashes, words, starts, lengths, at)
        hashes ^= lengths.astype(np.uint64)
        hashes *= _PRIME
        shift_a, mul_a, shift_b, mul_b, shift_c = _MIX
        hashes ^= hashes >> shift_a
        hashes *= mul_a
        hashes ^= hashes >> shift_b
        hashes *= mul_b
        hashes ^= hashes >> shift_c
    return hashes


def _fold(hashes: np.ndarray, words: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
          at: int) -> None:
    """Fold in the word at byte `at` of every id that long (ids of one length, the usual
    case, take no fancy indexing)."""
    everyone = bool(lengths.min() > at)
    rows = slice(None) if everyone else np.flatnonzero(lengths > at)
    word = words[starts[rows] + at]
    left = lengths[rows] - at
    if int(left.min()) < 8:
        bits = (np.minimum(left, 8) * 8).astype(np.uint64)
        word &= np.where(bits == 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                         (np.uint64(1) << (bits % np.uint64(64))) - np.uint64(1))
    if everyone:
        hashes ^= word
        hashes *= _PRIME
    else:
        hashes[rows] = (hashes[rows] ^ word) * _PRIME
