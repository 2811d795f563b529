"""Philox4x32-10, a counter-based random number generator, on torch tensors.

Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11 (Section
4.2 and Table 2): a 128-bit counter (c0, c1, c2, c3) and a 64-bit key (k0, k1) give four 32-bit
words after ten rounds of

    (hi0, lo0) = M0 · c0,   (hi1, lo1) = M1 · c2          (64-bit products split in halves)
    (c0, c1, c2, c3) ← (hi1 ⊕ c1 ⊕ k0, lo1, hi0 ⊕ c3 ⊕ k1, lo0)
    (k0, k1) ← (k0 + W0, k1 + W1) mod 2^32

with M0 = 0xD2511F53, M1 = 0xCD9E8D57, W0 = 0x9E3779B9, W1 = 0xBB67AE85. Every output depends
only on (key, counter), so any element of any stream is computed directly, in any order and
any grouping: the property that makes a batch of runs reproduce each run alone.

Words are held in int64 tensors (values in [0, 2^32)); a product of two such words wraps
modulo 2^64 and its halves are read with a shift and a mask. Known-answer vectors of the
authors' Random123 library are checked in the tests.

``uniform53`` turns two words into a float64 in [0, 1) (53 random bits: the 32 bits of the
first word above the top 21 bits of the second); ``box_muller`` turns four words into two
standard normals (Box and Muller, Ann. Math. Statist. 29, 1958): u ∈ (0, 1] from (c0, c1),
v ∈ [0, 1) from (c2, c3), r = √(−2 ln u), (r cos 2πv, r sin 2πv).
"""
from __future__ import annotations

import math

import torch

__all__ = ["philox4x32", "uniform53", "box_muller", "MASK32"]

MASK32 = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10


def philox4x32(c0: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor, c3: torch.Tensor,
               k0: torch.Tensor, k1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The four output words of Philox4x32-10 for broadcastable int64 tensors of 32-bit words."""
    c0, c1, c2, c3 = torch.broadcast_tensors(c0, c1, c2, c3, k0, k1)[:4]
    c0, c1, c2, c3 = c0.clone(), c1.clone(), c2.clone(), c3.clone()
    k0, k1 = k0.clone(), k1.clone()
    p0, p1 = torch.empty_like(c0), torch.empty_like(c0)
    for _ in range(_ROUNDS):
        torch.mul(c0, _M0, out=p0)
        torch.mul(c2, _M1, out=p1)
        c1.bitwise_xor_(k0)
        c3.bitwise_xor_(k1)
        torch.bitwise_right_shift(p1, 32, out=c0)
        c0.bitwise_and_(MASK32).bitwise_xor_(c1)
        torch.bitwise_right_shift(p0, 32, out=c2)
        c2.bitwise_and_(MASK32).bitwise_xor_(c3)
        torch.bitwise_and(p1, MASK32, out=c1)
        torch.bitwise_and(p0, MASK32, out=c3)
        k0 = (k0 + _W0).bitwise_and_(MASK32)
        k1 = (k1 + _W1).bitwise_and_(MASK32)
    return c0, c1, c2, c3


def _bits53(high: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
    return torch.bitwise_left_shift(high, 21).bitwise_or_(torch.bitwise_right_shift(low, 11))


def uniform53(high: torch.Tensor, low: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """Floats in [0, 1): (2^21·high + ⌊low / 2^11⌋) / 2^53, exact in float64."""
    return _bits53(high, low).to(torch.float64).mul_(2.0**-53).to(dtype)


def box_muller(words: tuple[torch.Tensor, ...], dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Two standard normals from the four words of one counter (computed in float64)."""
    c0, c1, c2, c3 = words
    u = _bits53(c0, c1).to(torch.float64).add_(1.0).mul_(2.0**-53)          # (0, 1]
    angle = _bits53(c2, c3).to(torch.float64).mul_(2.0**-53 * 2 * math.pi)
    radius = u.log_().mul_(-2.0).sqrt_()
    return (radius * torch.cos(angle)).to(dtype), (radius * torch.sin(angle)).to(dtype)
