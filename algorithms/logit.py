"""LOGIT: surrogate updates for unavailable clients from per-client learned generators
(LOGIT, Alg. 1 and Sections 3.2–3.3), in the engine's notation.

Round t, S_t = A_t the clients whose upload arrives (K = |A_t|). Each active client takes
I = ``local_steps`` SGD steps x_{t,i}^n = x_{t,i−1}^n − η_l g_n(x_{t,i−1}^n) from x_t (eq. (7))
and sends its model difference Δ_n = x_t − x_{t,I}^n = η_l g_n(x_t), where
g_n(x_t) = Σ_{i=0}^{I−1} g_n(x_{t,i}^n) is the accumulated gradient of Alg. 1, line 8
(the text after eq. (7) sums one term fewer, a typo: the proof sums i = 0..I−1 in (14)–(15)).
The server

1. trains the generator θ_n of every n ∈ A_t by one step (eq. (4); Alg. 1, lines 12–15)
       θ_n ← θ_n − η_GGN (clip(∇θ L_n) + wd·θ_n)          (clipping and weight decay: text after eq. (4))
   on eq. (3), u = Δ/‖Δ‖ (ℓ2-normalised, text after eq. (9)), o_n the generator output:
       L_n = (1 − λ)‖o_n − u_n‖² − (λ/(K − 1)) Σ_{k∈A_t∖n} cos(o_n, u_k)   (no alignment if K = 1);
2. generates for n ∉ A_t, from the cache (eq. (5); Alg. 1, lines 16–19)
       Δ̃_n = ‖Δ_n^cache‖ · f_GGN(history_n; θ_n)   (rescaled to the cache's norm);
3. steps (eq. (8); Alg. 1, line 21), with weight 1/N over all clients:
       x_{t+1} = x_t − η_g (1/N) [Σ_{n∈A_t} Δ_n + Σ_{n∉A_t} Δ̃_n];
4. refreshes the cache Δ_n^cache ← Δ_n for n ∈ A_t (eq. (9)).

With η_g = 1 and η_l = η this is the paper's x_{t+1} = x_t − η(1/N)Σ[𝕀g + (1 − 𝕀)g̃]. If every
client is always available it is FedAvg with model averaging (``FedAvg``, either aggregate).

Baseline surrogates (``surrogate``; the baselines of Section 5, "Baselines"):

* ``"generator"``: LOGIT (above);
* ``"last"``: Δ̃_n = Δ_n^cache, the last received update (MIFA; Gu et al., NeurIPS 2021);
* ``"ws"``: Δ̃_n = (1 − λ)Δ_n^cache + λ·D̄_{t−1}, D̄_{t−1} the mean update applied in the last
  round (WS; Zhao et al., 2025, with its weight set to λ as in Section 5; the formula is not
  given there, so this one is chosen here);
* ``"zero"``: Δ̃_n = 0, still weighted 1/N (FedAvg with ``aggregate="all"``);
* ``"none"``: drop the unavailable clients and weight 1/|A_t| (FedAvg, Section 5).

Choices the paper leaves open (none of this is in the paper):

* Generator input / target (eq. (3) trains on the current gradient, eq. (5) generates
  from a stale one; the LSTM state is not specified in Section 5, "Implementation details"): the
  generator reads, coordinatewise, the window of client n's last ≤ H = ``history`` received normalised updates ("historical gradients and
  the previous hidden state", Section 5) from a zero LSTM state (no hidden state kept across
  rounds: BPTT over the window). ``train_input="cached"`` (default) trains it to map the
  history before round t to u_n(x_t), the same map it applies at generation ("mapping its
  most recent stored gradient to the current round", text before eq. (5)); a client with no history yet
  is not trained. ``"current"`` is eq. (3) literally: the window ends with u_n(x_t) and the
  target is u_n(x_t) itself.
* Scale (inputs are ℓ2-normalised, aggregation uses raw vectors, text after eq. (9)): the network
  sees √d·u (unit vector times √d, so coordinates are O(1) for any d); the MSE is taken as (1/d)‖·‖² on that scale, i.e. ‖·‖² between unit vectors as in
  (3). The output is mapped back by ‖Δ_n^cache‖/√d.
* ``residual`` (default True): φ = last input + linear head, head initialised at zero, so an
  untrained generator is MIFA up to rounding; False: φ = head (Andrychowicz-style).
* ``warmup``: a client's generator is used once it has had ``warmup`` training steps; before,
  its surrogate is the cache (the paper has no warm-up: Alg. 1 generates from round 1,
  lines 16–19; default 0).
* Cold start (a case the paper does not cover), ``cold_start``: a client never received
  contributes ``"zero"`` (default, weight 1/N unchanged) or is ``"exclude"``d (weight 1/#contributors).
* Optimiser: plain SGD as eq. (4); per-client gradient clipped to norm ``clip``, L2 weight
  decay added after clipping. Defaults (the paper gives none but η_GGN): λ = 0.5, h = 20
  (Andrychowicz et al.), η_GGN = 0.001 (Section 5), clip 1.0, weight decay 1e-4, H = 8.
* Randomness: θ^0 is drawn at the first round from the generator of step index I of that
  round (the local steps use indices 0..I−1), so a run is reproducible from its seed.
  Training itself is deterministic (full batch over coordinates).

Memory kept by the server beyond x (``memory_bytes``), with b bytes per float, P = 4h² + 9h + 1
and H_t = min(H, number of rounds so far with an upload):

    b·(N·d [cache] + N·H_t·d [history] + N·P [θ] + d [D̄]) + 8·3N [counters]

(H_t = 0 and no θ unless ``surrogate="generator"``). A training step holds on the order of
10·K·H·d·h floats of activations for backpropagation; generation a 2·(N − K)·d·h LSTM state.

Communication: x down, Δ_n up (one vector each per available client); the generator runs
on the server (Section 3.2, after eq. (6)).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from . import generator as ggn
from .base import Algorithm, Generators, local_sgd, positive_rate, replace_rows, step_count

__all__ = ["LOGIT", "LOGITState", "ALGORITHMS", "SURROGATES"]

SURROGATES = ("generator", "last", "ws", "zero", "none")
TRAIN_INPUTS = ("cached", "current")
COLD_STARTS = ("zero", "exclude")


@dataclass(frozen=True, eq=False)
class LOGITState:
    """After round t: ``x`` = x_{t+1}; ``cache`` (N, d) last received Δ_n (zero before);
    ``count`` (N,) uploads received; ``last`` (N,) round of the last upload (−1 before; the
    staleness at round t is t − last); ``history`` (N, H_t, d) the √d-scaled unit vectors of
    the last received updates, right-aligned (None unless the generator is used);
    ``params`` the generators θ (dict of (N, ...) tensors; None before the first round);
    ``steps`` (N,) generator training steps; ``mean_update`` D̄ (d,) the mean update applied
    last round. Diagnostics of the last round: ``updates`` (N, d) the update used for each
    client (received or surrogate; zero for a client left out), ``gen_loss`` (N,) the
    generator loss of its last training step (nan before)."""

    x: torch.Tensor
    cache: torch.Tensor
    count: torch.Tensor
    last: torch.Tensor
    history: torch.Tensor | None
    params: dict | None
    steps: torch.Tensor
    mean_update: torch.Tensor
    updates: torch.Tensor
    gen_loss: torch.Tensor


def _choice(value, allowed, name):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _nonnegative(value, name) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, repr=False)
class LOGIT(Algorithm):
    """LOGIT (Alg. 1; module docstring for every formula).

    ``eta_l`` η, ``eta_g`` server factor (1 in the paper), ``local_steps`` I; ``surrogate``
    one of SURROGATES; generator: ``hidden`` h, ``history`` H (window cap), ``lr_generator``
    η_GGN, ``lam`` λ_n ∈ [0, 1] (also the WS weight), ``clip`` (None: off), ``weight_decay``,
    ``warmup``, ``train_input``, ``residual``; ``cold_start`` for never-received clients.
    """

    surrogate: str = "generator"
    hidden: int = 20
    history: int = 8
    lr_generator: float = 0.001
    lam: float = 0.5
    clip: float | None = 1.0
    weight_decay: float = 1e-4
    warmup: int = 0
    train_input: str = "cached"
    residual: bool = True
    cold_start: str = "zero"

    name = "logit"

    def __post_init__(self):
        super().__post_init__()
        _choice(self.surrogate, SURROGATES, "surrogate")
        _choice(self.train_input, TRAIN_INPUTS, "train_input")
        _choice(self.cold_start, COLD_STARTS, "cold_start")
        step_count(self.hidden, "hidden")
        step_count(self.history, "history")
        object.__setattr__(self, "lr_generator", positive_rate(self.lr_generator, "lr_generator"))
        lam = _nonnegative(self.lam, "lam")
        if lam > 1:
            raise ValueError(f"lam must lie in [0, 1], got {self.lam!r}")
        object.__setattr__(self, "lam", lam)
        if self.clip is not None:
            object.__setattr__(self, "clip", positive_rate(self.clip, "clip"))
        object.__setattr__(self, "weight_decay", _nonnegative(self.weight_decay, "weight_decay"))
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, numbers.Integral) or self.warmup < 0:
            raise ValueError(f"warmup must be an integer ≥ 0, got {self.warmup!r}")
        if not isinstance(self.residual, bool):
            raise ValueError(f"residual must be True or False, got {self.residual!r}")

    @property
    def _learns(self) -> bool:
        return self.surrogate == "generator"

    # ------------------------------------------------------------------ state

    def init(self, problem, x0: torch.Tensor) -> LOGITState:
        n, d = problem.n_clients, problem.dim
        longs = torch.zeros(n, dtype=torch.long, device=x0.device)
        return LOGITState(x=x0, cache=x0.new_zeros((n, d)), count=longs, last=longs - 1,
                          history=x0.new_zeros((n, 0, d)) if self._learns else None, params=None,
                          steps=longs, mean_update=x0.new_zeros(d), updates=x0.new_zeros((n, d)),
                          gen_loss=x0.new_full((n,), math.nan))

    def memory_bytes(self, state: LOGITState) -> int:
        """Bytes the server keeps beyond x (module docstring formula)."""
        tensors = [state.cache, state.mean_update, state.count, state.last, state.steps]
        if self._learns:
            tensors.append(state.history)
            tensors += list(state.params.values()) if state.params is not None else []
        return sum(t.numel() * t.element_size() for t in tensors)

    def max_memory_bytes(self, n_clients: int, dim: int, itemsize: int = 8) -> int:
        """The formula at H_t = H (what ``memory_bytes`` reaches once the window is full)."""
        floats = n_clients * dim + dim
        if self._learns:
            floats += n_clients * self.history * dim + n_clients * ggn.param_count(self.hidden)
        return itemsize * floats + 8 * 3 * n_clients

    # ------------------------------------------------------------------ round

    def round(self, state: LOGITState, problem, active, t: int, generators: Generators) -> LOGITState:
        n, d = problem.n_clients, problem.dim
        x, m = state.x, active.numel()
        is_active = torch.zeros(n, dtype=torch.bool, device=x.device).index_fill(0, active, True)
        inactive = torch.nonzero(~is_active).flatten()
        if m:
            X, _ = local_sgd(x, problem, active, self.eta_l, self.local_steps, generators)
            delta = x - X                                            # Δ_n = η_l g_n(x_t), (m, d)
        else:
            delta = x.new_zeros((0, d))

        params, steps, history, gen_loss = state.params, state.steps, state.history, state.gen_loss
        count = state.count.index_add(0, active, torch.ones_like(active))
        if self._learns:
            if params is None:
                params = ggn.init_params(n, self.hidden, generators(self.local_steps), x.dtype, x.device,
                                         self.residual)
            history = self._append(state.history, active, delta)
            if m:
                params, steps, gen_loss = self._train(params, steps, gen_loss, state, history, count, active, delta)

        # surrogates of the unavailable clients
        seen = state.count[inactive] > 0
        if self.surrogate == "none":
            surrogate, contributes = delta.new_zeros((inactive.numel(), d)), torch.zeros_like(seen)
        else:
            cache = state.cache[inactive]
            if self.surrogate == "last":
                surrogate = cache
            elif self.surrogate == "zero":
                surrogate = torch.zeros_like(cache)
            elif self.surrogate == "ws":
                surrogate = (1 - self.lam) * cache + self.lam * state.mean_update
            else:
                surrogate = self._generate(params, history, state, inactive, steps)
            surrogate = torch.where(seen.unsqueeze(1), surrogate, torch.zeros_like(surrogate))
            contributes = seen if self.cold_start == "exclude" else torch.ones_like(seen)

        denom = m + int(contributes.sum()) if self.surrogate != "none" else m
        total = delta.sum(dim=0) + surrogate.sum(dim=0)
        if denom:
            mean = (1 / denom) * total
            x_new = x - self.eta_g * (1 / denom) * total
        else:
            mean, x_new = torch.zeros_like(x), x
        updates = replace_rows(x.new_zeros((n, d)), inactive, surrogate)
        updates = replace_rows(updates, active, delta)
        return LOGITState(x=x_new, cache=replace_rows(state.cache, active, delta), count=count,
                          last=state.last.index_fill(0, active, t), history=history, params=params, steps=steps,
                          mean_update=mean, updates=updates, gen_loss=gen_loss)

    def observe(self, before: LOGITState, after: LOGITState, problem, active, t: int) -> dict:
        """The generation error of round t, the summand of LOGIT eq. (23)'s ε:
        ``generator_error`` = (1/N) Σ_{n∉A_t} (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖², with
        g̃_n = Δ̃_n/(η_l I) the surrogate's per-step gradient and x^n_{t,i} the path client n
        would have taken, x^n_{t,0} = x_t, x^n_{t,i+1} = x^n_{t,i} − η_l ∇F_n(x^n_{t,i}) (exact
        gradients: the paper's expectation over the local noise is not taken along the path;
        chosen here). The realised ε of a run is 4·(1/T) Σ_t of it (the indicator 1 − 𝕀_n^t
        in place of its mean 1 − p_n^t)."""
        n = problem.n_clients
        off = torch.nonzero(torch.ones(n, dtype=torch.bool, device=before.x.device).index_fill(0, active, False)).flatten()
        if not off.numel():
            return {"generator_error": 0.0}
        return {"generator_error": float(self.path_errors(before, after, problem, off).sum()) / n}

    def path_errors(self, before, after, problem, off) -> torch.Tensor:
        """e_n = (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖² for the unavailable clients ``off`` (the
        summand of eq. (23); see ``observe``), one value per client, all of them in one batch."""
        surrogate = after.updates[off] / (self.eta_l * self.local_steps)
        X = before.x.expand(off.numel(), -1)
        total = torch.zeros(off.numel(), dtype=X.dtype, device=X.device)
        for _ in range(self.local_steps):
            G = problem.grads_at(X, off)
            total = total + (surrogate - G).square().sum(dim=1)
            X = X - self.eta_l * G
        return total / self.local_steps

    # ------------------------------------------------------------------ generator

    def _append(self, history: torch.Tensor, active: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        """The window after this round's uploads: grows by one slot (up to H) in a round with an
        upload; each active row shifts left and takes √d·Δ_n/‖Δ_n‖ at the end."""
        if not active.numel():
            return history
        if history.shape[1] < self.history:
            history = torch.cat([history.new_zeros((history.shape[0], 1, history.shape[2])), history], dim=1)
        rows = torch.cat([history[active, 1:], _unit(delta).unsqueeze(1)], dim=1)
        return replace_rows(history, active, rows)

    def _train(self, params, steps, gen_loss, state, new_history, count, active, delta):
        """One training step of eq. (4) for every available client at once."""
        u = _unit(delta)                                              # √d-scaled unit vectors
        unit = u / math.sqrt(u.shape[1])
        others = unit.sum(dim=0) - unit                               # Σ_{k∈A_t∖n} u_k/‖u_k‖
        if self.train_input == "cached":
            seq, lengths = state.history[active], state.count[active].clamp(max=state.history.shape[1])
        else:
            seq, lengths = new_history[active], count[active].clamp(max=new_history.shape[1])
        trainable = lengths > 0
        if seq.shape[1] == 0:                                         # nothing to read yet
            return params, steps, gen_loss
        rows = {k: v[active] for k, v in params.items()}
        new_rows, losses = ggn.train_step(rows, seq, lengths, u, others, active.numel() - 1, lam=self.lam,
                                          lr=self.lr_generator, clip=self.clip, weight_decay=self.weight_decay,
                                          residual=self.residual, trainable=trainable)
        params = {k: replace_rows(params[k], active, new_rows[k]) for k in params}
        steps = steps.index_add(0, active, trainable.long())
        gen_loss = gen_loss.index_copy(0, active[trainable], losses[trainable])
        return params, steps, gen_loss

    def _generate(self, params, history, state, inactive, steps) -> torch.Tensor:
        """Δ̃_n = ‖Δ_n^cache‖/√d · f_GGN(window_n; θ_n) for the inactive clients whose generator
        has had ``warmup`` steps; the cache itself for the others."""
        cache = state.cache[inactive]
        if not inactive.numel() or history.shape[1] == 0:
            return cache
        lengths = state.count[inactive].clamp(max=history.shape[1])
        rows = {k: v[inactive] for k, v in params.items()}
        with torch.no_grad():
            out = ggn.forward(rows, history[inactive], lengths, self.residual)
        scale = cache.norm(dim=1, keepdim=True) / math.sqrt(cache.shape[1])
        ready = (steps[inactive] >= self.warmup).unsqueeze(1)
        return torch.where(ready, scale * out, cache)


def _unit(v: torch.Tensor) -> torch.Tensor:
    """√d · v/‖v‖ row-wise (a zero row stays zero)."""
    norm = v.norm(dim=1, keepdim=True)
    return math.sqrt(v.shape[1]) * v / torch.where(norm > 0, norm, torch.ones_like(norm))


ALGORITHMS = (LOGIT,)
