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
* Randomness: θ^0_n is drawn at the first round from the run's noise stream, the P uniforms
  of client n at the reserved step key ``GENERATOR_KEY`` (the local steps use keys 0..I−1), so
  θ^0 depends on the run's seed and n only (not on the other runs of a batch) and a run is
  reproducible from its seed. Training itself is deterministic (full batch over coordinates).

Memory kept by the server beyond x (``memory_bytes``), with b bytes per float, P = 4h² + 9h + 1
and H_t = min(H, number of rounds so far with an upload):

    b·(N·d [cache] + N·H_t·d [history] + N·P [θ] + d [D̄]) + 8·3N [counters]

(H_t = 0 and no θ unless ``surrogate="generator"``). In a batch of runs the window is as wide
as the widest run's (H_t counts the rounds in which any run had an upload); the extra slots
of a run are padding, read as absent, so its numbers are those of the run alone. A training
step holds on the order of 10·K·H·d·h floats of activations for backpropagation; generation
a 2·(N − K)·d·h LSTM state.

Communication: x down, Δ_n up (one vector each per available client); the generator runs
on the server (Section 3.2, after eq. (6)).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from . import logit_generator as ggn
from .base import Algorithm, Round, local_sgd, positive_rate, step_count
from participation.validation import finite_real, integer

__all__ = ["LOGIT", "LOGITState", "ALGORITHMS", "SURROGATES", "GENERATOR_KEY", "unavailable"]

SURROGATES = ("generator", "last", "ws", "zero", "none")
TRAIN_INPUTS = ("cached", "current")
COLD_STARTS = ("zero", "exclude")

#: The noise step key of θ^0's uniforms (local step k uses key k < GENERATOR_KEY).
GENERATOR_KEY = 2**31 - 2


@dataclass(frozen=True, eq=False)
class LOGITState:
    """After round t, per run (batch axis first): ``x`` = x_{t+1} (B, d); ``cache`` (B, N, d)
    last received Δ_n (zero before); ``count`` (B, N) uploads received; ``last`` (B, N) round of
    the last upload (−1 before; the staleness at round t is t − last); ``history`` (B, N, H_t, d)
    the √d-scaled unit vectors of the last received updates, right-aligned (None unless the
    generator is used); ``params`` (B, N, P) the generators θ (rows as in ``generator``; None
    before the first round); ``steps`` (B, N) generator training steps; ``mean_update`` D̄ (B, d)
    the mean update applied last round. Diagnostics of the last round: ``updates`` (B, N, d)
    the update used for each client (received or surrogate; zero for a client left out),
    ``gen_loss`` (B, N) the generator loss of its last training step (nan before)."""

    x: torch.Tensor
    cache: torch.Tensor
    count: torch.Tensor
    last: torch.Tensor
    history: torch.Tensor | None
    params: torch.Tensor | None
    steps: torch.Tensor
    mean_update: torch.Tensor
    updates: torch.Tensor
    gen_loss: torch.Tensor


def unavailable(r: Round) -> Round:
    """The rows (run, client) of round ``r`` NOT in S_t, as a Round (sorted by run then client;
    ``count`` N − |S_t| per run), for taking, putting and summing them per run like the active
    rows. Its ``draws`` are not used."""
    runs, clients = torch.nonzero(~r.mask, as_tuple=True)
    return dataclasses.replace(r, run=runs, client=clients, count=r.n_clients - r.count)


def _choice(value, allowed, name):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _nonnegative(value, name) -> float:
    return finite_real(value, name, at_least=0)


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
        integer(self.warmup, "warmup", 0)
        if not isinstance(self.residual, bool):
            raise ValueError(f"residual must be True or False, got {self.residual!r}")
        if self.local_steps >= GENERATOR_KEY:
            raise ValueError(f"local_steps must stay below {GENERATOR_KEY} (θ^0's noise key), got {self.local_steps}")

    @property
    def _learns(self) -> bool:
        return self.surrogate == "generator"

    # ------------------------------------------------------------------ state

    def init(self, problem, x0: torch.Tensor) -> LOGITState:
        b, n, d = x0.shape[0], problem.n_clients, problem.dim
        longs = torch.zeros((b, n), dtype=torch.long, device=x0.device)
        return LOGITState(x=x0, cache=x0.new_zeros((b, n, d)), count=longs, last=longs - 1,
                          history=x0.new_zeros((b, n, 0, d)) if self._learns else None, params=None,
                          steps=longs, mean_update=x0.new_zeros((b, d)), updates=x0.new_zeros((b, n, d)),
                          gen_loss=x0.new_full((b, n), math.nan))

    def memory_bytes(self, state: LOGITState) -> int:
        """Bytes the server keeps beyond x (module docstring formula) in ``state``: one run's
        state (as ``algorithms.iterate`` yields it), or the B runs of a batched one together."""
        tensors = [state.cache, state.mean_update, state.count, state.last, state.steps]
        if self._learns:
            tensors.append(state.history)
            tensors += [state.params] if state.params is not None else []
        return sum(t.numel() * t.element_size() for t in tensors)

    def max_memory_bytes(self, n_clients: int, dim: int, itemsize: int = 8) -> int:
        """The formula at H_t = H (what ``memory_bytes`` reaches once the window is full)."""
        floats = n_clients * dim + dim
        if self._learns:
            floats += n_clients * self.history * dim + n_clients * ggn.param_count(self.hidden)
        return itemsize * floats + 8 * 3 * n_clients

    # ------------------------------------------------------------------ round

    def round(self, state: LOGITState, problem, r: Round) -> LOGITState:
        x, d = state.x, problem.dim
        off = unavailable(r)
        if r.m:
            start = r.rows(x)
            X, _ = local_sgd(start, problem, r, r.rows(r.eta_l), self.local_steps)
            delta = start - X                                        # Δ_n = η_l g_n(x_t), (M, d)
        else:
            delta = x.new_zeros((0, d))

        params, steps, history, gen_loss = state.params, state.steps, state.history, state.gen_loss
        count = state.count + r.mask.long()
        if self._learns:
            if params is None:
                params = self._init_params(r, x)
            history = self._append(state.history, r, delta)
            if r.m:
                params, steps, gen_loss = self._train(params, steps, gen_loss, state, history, count, r, delta)

        # surrogates of the unavailable clients
        seen = off.take(state.count) > 0
        if self.surrogate == "none":
            surrogate, contributes = delta.new_zeros((off.m, d)), torch.zeros_like(seen)
        else:
            cache = off.take(state.cache)
            if self.surrogate == "last":
                surrogate = cache
            elif self.surrogate == "zero":
                surrogate = torch.zeros_like(cache)
            elif self.surrogate == "ws":
                surrogate = (1 - self.lam) * cache + self.lam * off.rows(state.mean_update)
            else:
                surrogate = self._generate(params, history, state, off, steps)
            surrogate = torch.where(seen.unsqueeze(1), surrogate, torch.zeros_like(surrogate))
            contributes = seen if self.cold_start == "exclude" else torch.ones_like(seen)

        denom = r.count.unsqueeze(1) + off.sum(contributes.to(x.dtype)).unsqueeze(1)    # (B, 1)
        total = r.sum(delta) + off.sum(surrogate)
        stepped = denom > 0
        weight = 1 / torch.where(stepped, denom, torch.ones_like(denom))
        mean = torch.where(stepped, weight * total, torch.zeros_like(x))
        x_new = torch.where(stepped, x - r.eta_g * weight * total, x)
        updates = r.put(off.put(torch.zeros_like(state.cache), surrogate), delta)
        return LOGITState(x=x_new, cache=r.put(state.cache, delta), count=count,
                          last=r.put(state.last, torch.full_like(r.client, r.t)), history=history, params=params,
                          steps=steps, mean_update=mean, updates=updates, gen_loss=gen_loss)

    def observe(self, before: LOGITState, after: LOGITState, problem, r: Round) -> dict:
        """The generation error of round t per run (B,), the summand of LOGIT eq. (23)'s ε:
        ``generator_error`` = (1/N) Σ_{n∉A_t} (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖², with
        g̃_n = Δ̃_n/(η_l I) the surrogate's per-step gradient and x^n_{t,i} the path client n
        would have taken, x^n_{t,0} = x_t, x^n_{t,i+1} = x^n_{t,i} − η_l ∇F_n(x^n_{t,i}) (exact
        gradients: the paper's expectation over the local noise is not taken along the path;
        chosen here). The realised ε of a run is 4·(1/T) Σ_t of it (the indicator 1 − 𝕀_n^t
        in place of its mean 1 − p_n^t)."""
        off = unavailable(r)
        errors = self.path_errors(before, after, problem, off)
        return {"generator_error": off.sum(errors).to(torch.float64) / problem.n_clients}

    def path_errors(self, before: LOGITState, after: LOGITState, problem, off: Round) -> torch.Tensor:
        """e_n = (1/I) Σ_{i<I} ‖g̃_n − ∇F_n(x^n_{t,i})‖² for the rows (run, client) of ``off``
        (the unavailable clients, ``unavailable(r)``; the summand of eq. (23), see ``observe``),
        one value per row (M_off,), all of them in one batch, each with its run's η_l."""
        if not off.m:
            return after.x.new_zeros(0)
        eta = off.rows(off.eta_l)
        surrogate = off.take(after.updates) / (eta * self.local_steps)
        X = off.rows(before.x)
        total = X.new_zeros(off.m)
        for _ in range(self.local_steps):
            G = problem.grads_at(X, off.client)
            total = total + (surrogate - G).square().sum(dim=1)
            X = X - eta * G
        return total / self.local_steps

    # ------------------------------------------------------------------ generator

    def _init_params(self, r: Round, x: torch.Tensor) -> torch.Tensor:
        """θ^0 (B, N, P): client n of run b takes the P uniforms of its row at (t, GENERATOR_KEY)."""
        b, n = r.n_runs, r.n_clients
        runs = torch.arange(b, device=x.device).repeat_interleave(n)
        clients = torch.arange(n, device=x.device).repeat(b)
        uniforms = r.noise.draws(r.t, GENERATOR_KEY, clients, runs).uniform(ggn.param_count(self.hidden), x.dtype)
        return ggn.init_params(uniforms, self.hidden, self.residual).reshape(b, n, -1)

    def _append(self, history: torch.Tensor, r: Round, delta: torch.Tensor) -> torch.Tensor:
        """The window after this round's uploads: grows by one slot (up to H) in a round with an
        upload in some run; each active row shifts left and takes √d·Δ_n/‖Δ_n‖ at the end."""
        if not r.m:
            return history
        if history.shape[2] < self.history:
            history = torch.cat([history.new_zeros((*history.shape[:2], 1, history.shape[3])), history], dim=2)
        rows = torch.cat([r.take(history)[:, 1:], _unit(delta).unsqueeze(1)], dim=1)
        return r.put(history, rows)

    def _train(self, params, steps, gen_loss, state, new_history, count, r: Round, delta):
        """One training step of eq. (4) for every available client of every run at once."""
        u = _unit(delta)                                              # √d-scaled unit vectors
        unit = u / math.sqrt(u.shape[1])
        others = r.rows(r.sum(unit)) - unit                           # Σ_{k∈A_t∖n} u_k/‖u_k‖
        if self.train_input == "cached":
            seq, lengths = r.take(state.history), r.take(state.count).clamp(max=state.history.shape[2])
        else:
            seq, lengths = r.take(new_history), r.take(count).clamp(max=new_history.shape[2])
        if seq.shape[1] == 0:                                         # nothing to read yet
            return params, steps, gen_loss
        trainable = lengths > 0
        new_rows, losses = ggn.train_step(r.take(params), seq, lengths, u, others, r.rows(r.count) - 1, lam=self.lam,
                                          lr=self.lr_generator, clip=self.clip, weight_decay=self.weight_decay,
                                          residual=self.residual, trainable=trainable)
        params = r.put(params, new_rows)
        steps = r.put(steps, r.take(steps) + trainable.long())
        gen_loss = r.put(gen_loss, torch.where(trainable, losses, r.take(gen_loss)))
        return params, steps, gen_loss

    def _generate(self, params, history, state, off: Round, steps) -> torch.Tensor:
        """Δ̃_n = ‖Δ_n^cache‖/√d · f_GGN(window_n; θ_n) for the unavailable rows ``off`` whose
        generator has had ``warmup`` steps; the cache itself for the others."""
        cache = off.take(state.cache)
        if not off.m or history.shape[2] == 0:
            return cache
        lengths = off.take(state.count).clamp(max=history.shape[2])
        with torch.no_grad():
            out = ggn.forward(off.take(params), off.take(history), lengths, self.residual)
        scale = cache.norm(dim=1, keepdim=True) / math.sqrt(cache.shape[1])
        ready = (off.take(steps) >= self.warmup).unsqueeze(1)
        return torch.where(ready, scale * out, cache)


def _unit(v: torch.Tensor) -> torch.Tensor:
    """√d · v/‖v‖ row-wise (a zero row stays zero)."""
    norm = v.norm(dim=1, keepdim=True)
    return math.sqrt(v.shape[1]) * v / torch.where(norm > 0, norm, torch.ones_like(norm))


ALGORITHMS = (LOGIT,)
