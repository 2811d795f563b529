"""Torch kernels for Monte-Carlo on an accelerator (imported only when a device is given;
the rest of ``participation`` never imports torch).

The delay kernel is the bit-packed doubling/lifting of
:func:`participation.delays.per_round_delay`, written with torch int64 words (all-ones
is −1). Independent patterns are also *generated* on the device: replicate r draws its
uniforms from a torch generator seeded by the keyed stream (seed, r), so results do not
depend on chunking or workers, and are reproducible on a given device type (torch and
numpy streams differ, so the device path and the numpy path give different samples).
"""
from __future__ import annotations

import numpy as np
import torch

from ...patterns import IndependentPattern, Pattern


def _pack(masks: torch.Tensor) -> torch.Tensor:
    """(..., T, N) bool → (..., T + 1, W) int64 words, padding bits set, all-ones row −1."""
    *batch, rounds, n = masks.shape
    words = -(-n // 64)
    padded = torch.ones(*batch, rounds + 1, words * 64, dtype=torch.bool, device=masks.device)
    padded[..., 1:, :n] = masks
    weights = torch.ones(64, dtype=torch.int64, device=masks.device) << torch.arange(64, device=masks.device)
    return (padded.view(*batch, rounds + 1, words, 64).to(torch.int64) * weights).sum(-1)


def per_round_delay_torch(masks, device) -> np.ndarray:
    masks = torch.as_tensor(np.asarray(masks) if not isinstance(masks, torch.Tensor) else masks, device=device)
    words = _pack(masks.bool())
    full = lambda w: (w == -1).all(-1)
    levels = [words]
    while not bool(full(levels[-1]).all()):
        span = 1 << (len(levels) - 1)
        wider = levels[-1].clone()
        wider[..., span:, :] |= levels[-1][..., :-span, :]
        wider[..., :span, :] = -1
        levels.append(wider)
    rounds = words.shape[-2]
    end = torch.arange(rounds, device=words.device)
    delay = torch.zeros(words.shape[:-1], dtype=torch.int64, device=words.device)
    covered = torch.zeros_like(words)
    for j in range(len(levels) - 2, -1, -1):
        index = (end - delay).unsqueeze(-1).expand_as(covered)
        candidate = covered | torch.gather(levels[j], -2, index)
        missing = ~full(candidate)
        covered = torch.where(missing.unsqueeze(-1), candidate, covered)
        delay += missing.to(torch.int64) << j
    return delay[..., 1:].cpu().numpy()


def generate(pattern: Pattern, rounds: int, root: np.random.SeedSequence, first: int, count: int, device) -> torch.Tensor:
    """Masks (count, rounds, N) on ``device``; independent patterns are drawn there."""
    if not isinstance(pattern, IndependentPattern):
        return torch.as_tensor(pattern.sample_batch(rounds, count, root, first_replicate=first), device=device)
    p = torch.as_tensor(pattern.probabilities(0, rounds), device=device)
    out = torch.empty((count, rounds, pattern.n_clients), dtype=torch.bool, device=device)
    for j in range(count):
        key = np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + (first + j, 1 << 20))
        generator = torch.Generator(device=device)
        generator.manual_seed(int(key.generate_state(1, np.uint64)[0] >> np.uint64(1)))
        out[j] = torch.rand((rounds, pattern.n_clients), generator=generator, device=device, dtype=p.dtype) < p
    return out
