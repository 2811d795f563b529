"""A coordinatewise LSTM gradient generator per client, batched over clients and coordinates.

LOGIT's GGN (Section 3.2, eq. (6); Section 5, "Implementation details"): one small network φ
with parameters θ_n per client n, applied to every coordinate j of a gradient,
[f(g)]_j = φ(g_j; θ_n); φ is a single-layer LSTM (Andrychowicz et al., NeurIPS 2016) that
reads the coordinate's history of (normalised) updates and outputs the next one.

θ_n is one flat row of P = 4h² + 9h + 1 numbers (hidden size h), the blocks of ``PARAMS`` in
that order, each row-major:

    w_ih (4h,), w_hh (4h, h), bias (4h,)    LSTM gates i, f, g, o (PyTorch order, one bias)
    w_out (h,), b_out ()                     linear head h → 1

so a table of generators is a (..., P) tensor (LOGIT keeps one per run and client, (B, N, P))
and ``unpack`` gives the blocks as views. The functions below take m rows θ (m, P), any m
clients of any runs: one LSTM step is applied to an (m rows × d coordinates) batch of
sequences with one ``bmm``; the only Python loop is over the H time steps of the history
window. Sequences are right-aligned in an (m, H, d) window: row r has ``lengths[r]`` valid
entries at the end; the state is held through the padding, so a short history is read
exactly as if the window were that long. With ``residual`` the head predicts a correction to
the last input (φ = last value + head); its zero initialisation makes the untrained generator
return the last input exactly.
"""
from __future__ import annotations

import math

import torch

__all__ = ["PARAMS", "param_count", "shapes", "unpack", "init_params", "forward", "loss", "train_step"]

PARAMS = ("w_ih", "w_hh", "bias", "w_out", "b_out")


def param_count(hidden: int) -> int:
    """P = 4h² + 9h + 1 parameters per client."""
    return 4 * hidden * hidden + 9 * hidden + 1


def shapes(hidden: int) -> dict:
    """The shape of each block of one θ row, in the order of ``PARAMS``."""
    return {"w_ih": (4 * hidden,), "w_hh": (4 * hidden, hidden), "bias": (4 * hidden,), "w_out": (hidden,),
            "b_out": ()}


def unpack(theta: torch.Tensor, hidden: int) -> dict:
    """The blocks of θ rows (..., P) as views of shapes (..., *shapes(hidden)[name])."""
    blocks, start, lead = {}, 0, theta.shape[:-1]
    for name, shape in shapes(hidden).items():
        size = math.prod(shape)
        blocks[name] = theta[..., start:start + size].reshape(*lead, *shape)
        start += size
    return blocks


def init_params(uniforms: torch.Tensor, hidden: int, residual: bool = True) -> torch.Tensor:
    """θ rows (..., P) from as many uniforms in [0, 1) (..., P): entries U(−1/√h, 1/√h)
    (PyTorch's LSTM default), (2u − 1)/√h in the order of ``PARAMS``; the head (w_out, b_out,
    the last h + 1 entries) is zero when ``residual``."""
    bound = 1.0 / math.sqrt(hidden)
    theta = (2 * uniforms - 1) * bound
    if residual:
        theta = torch.cat([theta[..., :-(hidden + 1)], torch.zeros_like(theta[..., -(hidden + 1):])], dim=-1)
    return theta


def forward(theta: torch.Tensor, seq: torch.Tensor, lengths: torch.Tensor, residual: bool = True) -> torch.Tensor:
    """The generator's output (m, d) after reading ``seq`` (m, H, d) coordinatewise with θ (m, P).

    ``lengths`` (m,) counts each row's valid (last) entries; (h, c) start at zero and move
    only on valid steps. Output: w_outᵀ h_H + b_out (+ the last input with ``residual``).
    """
    m, H, d = seq.shape
    hidden = _hidden(theta.shape[-1])
    params = unpack(theta, hidden)
    h = seq.new_zeros((m, d, hidden))
    c = seq.new_zeros((m, d, hidden))
    w_hh_t = params["w_hh"].transpose(1, 2).contiguous()            # (m, h, 4h); contiguous: bmm is ~4x faster
    w_ih, bias = params["w_ih"].unsqueeze(1), params["bias"].unsqueeze(1)
    first = (H - lengths).view(m, 1, 1)
    for s in range(H):
        gates = seq[:, s, :].unsqueeze(-1) * w_ih + torch.bmm(h, w_hh_t) + bias   # (m, d, 4h)
        i, f, g, o = gates.chunk(4, dim=-1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        valid = first <= s
        h, c = torch.where(valid, h_new, h), torch.where(valid, c_new, c)
    out = (h * params["w_out"].unsqueeze(1)).sum(-1) + params["b_out"].unsqueeze(1)
    return out + seq[:, -1, :] if residual else out


def loss(out: torch.Tensor, target: torch.Tensor, others: torch.Tensor, n_others: torch.Tensor,
         lam: float) -> torch.Tensor:
    """Per-row loss (m,) of eq. (3) on √d-scaled unit vectors:

        (1 − λ)·(1/d)‖o − u‖² − (λ/(K − 1))·⟨o/‖o‖, Σ_{k∈A_t∖n} u_k/‖u_k‖⟩.

    (1/d)‖o − u‖² is the paper's ‖o/√d − u/√d‖² between unit-scale vectors; ``others`` (m, d)
    holds Σ_{k≠n} of the other available clients' unit vectors (of the row's run),
    ``n_others`` (m,) = K − 1 of the row's run; the alignment term is dropped where K = 1
    (λ/(K − 1) undefined, a case the paper does not cover; chosen here).
    """
    mse = (out - target).square().mean(dim=-1)
    if lam == 0:
        return (1 - lam) * mse
    align = (out * others).sum(dim=-1) / out.norm(dim=-1).clamp_min(torch.finfo(out.dtype).tiny)
    n_others = n_others.to(out.dtype)
    has_others = n_others >= 1
    aligned = (1 - lam) * mse - lam / torch.where(has_others, n_others, torch.ones_like(n_others)) * align
    return torch.where(has_others, aligned, (1 - lam) * mse)


def train_step(theta: torch.Tensor, seq, lengths, target, others, n_others: torch.Tensor, *, lam: float, lr: float,
               clip: float | None, weight_decay: float, residual: bool, trainable: torch.Tensor):
    """One step θ ← θ − η_GGN (clip(∇θ L) + wd·θ) for every row θ (m, P) at once (eq. (4);
    clipping and weight decay, text after eq. (4)). The rows' losses depend on disjoint θ
    rows, so one backward pass of their sum gives each its own gradient; each is clipped to
    norm ``clip`` (``None``: no clipping). Rows with ``trainable`` False are returned
    unchanged. Returns (new θ (m, P), per-row losses (m,) before the step)."""
    old = theta.detach()
    with torch.enable_grad():
        leaf = old.clone().requires_grad_(True)
        losses = loss(forward(leaf, seq, lengths, residual), target, others, n_others, lam)
        total = torch.where(trainable, losses, torch.zeros_like(losses)).sum()
        (grad,) = torch.autograd.grad(total, leaf)
    if clip is not None:
        norm = grad.square().sum(dim=1, keepdim=True).sqrt()
        grad = grad * (clip / (norm + 1e-6)).clamp(max=1.0)
    stepped = old - lr * (grad + weight_decay * old)
    return torch.where(trainable.unsqueeze(1), stepped, old), losses.detach()


def _hidden(p: int) -> int:
    """h from P = 4h² + 9h + 1."""
    hidden = int(round((math.sqrt(81 + 16 * (p - 1)) - 9) / 8))
    if param_count(hidden) != p:
        raise ValueError(f"θ rows must have 4h² + 9h + 1 entries, got {p}")
    return hidden
