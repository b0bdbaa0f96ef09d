"""A seeded permutation of [0, n) computed per index: any size in O(1) memory.

A balanced Feistel network is a bijection of [0, 4^h) for any round function; n sits in the
smallest such range (under 4n), and an index that lands outside [0, n) is sent through the
network again until it lands inside ("cycle walking"), which keeps the map a bijection of
[0, n). Every step is a few numpy operations on a chunk of indices, so shuffling a million
indices costs milliseconds, and nothing of size n is ever allocated.
"""

from __future__ import annotations

import hashlib

import numpy as np

ROUNDS = 6  # a balanced Feistel network mixes well from 4 rounds on
MAX_SIZE = (1 << 63) - 1  # indices are int64 elsewhere; the network works on uint64

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)


class Shuffle:
    """`Shuffle(n, seed)(indices)`: the images of uint64 indices in [0, n), as uint64."""

    def __init__(self, n: int, seed: bytes) -> None:
        if not 1 <= n <= MAX_SIZE:
            raise ValueError(f"cannot shuffle {n} items (1 .. 2^63 - 1)")
        self.n = np.uint64(n)
        bits = max(2, (n - 1).bit_length())
        self.half = np.uint64((bits + 1) // 2)
        self.mask = np.uint64((1 << int(self.half)) - 1)
        digest = hashlib.blake2b(seed, digest_size=8 * ROUNDS, person=b"plan-order").digest()
        self.keys = [np.uint64(k) for k in np.frombuffer(digest, dtype=">u8").tolist()]

    def _round(self, right: np.ndarray, key: np.uint64) -> np.ndarray:
        x = right + key  # the splitmix64 finaliser: every input bit reaches every output bit
        x = (x ^ (x >> _S30)) * _M1
        x = (x ^ (x >> _S27)) * _M2
        return (x ^ (x >> _S31)) & self.mask

    def _network(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self.half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ self._round(right, key)
        return (left << self.half) | right

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        out = self._network(indices.astype(np.uint64, copy=False))
        outside = np.flatnonzero(out >= self.n)
        while outside.size:  # under 4n slots for n items: a few passes, on ever fewer items
            again = self._network(out[outside])
            out[outside] = again
            outside = outside[again >= self.n]
        return out
