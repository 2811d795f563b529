"""CA-Fed Markov availability: every client (or cluster of clients) follows its own
two-state chain, independently (CA-Fed §V-A "Federated system simulator", §V-B "CA-Fed with
Spatial Correlation", and App. F3)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import markov
from .._random import BLOCK, keyed_uniforms, seed_sequence
from .base import Pattern, frozen_array
from ..validation import integer


@dataclass(frozen=True, eq=False)
class Markov(Pattern):
    """Independent two-state availability chains, started in their stationary law.

    Chain k has P_k = [[1 − (1−λ_k)π_k, (1−λ_k)π_k], [(1−λ_k)(1−π_k), λ_k + (1−λ_k)π_k]]
    (CA-Fed eq. (236), App. F3): state 1 = available, π_k its stationary probability,
    λ_k = p_0 + p_1 − 1 its second eigenvalue (238). Round 0 is drawn from the stationary
    law (Assumption 1). ``clusters`` (length n_clients, chain index per client) lets
    clients share one chain: CA-Fed's spatial correlation (§V-B, Fig. 5). Without it,
    chain k is client k; a scalar π or λ is broadcast to ``n_clients`` chains.
    """

    pi: float | np.ndarray
    lam: float | np.ndarray
    n_clients: int | None = None
    clusters: np.ndarray | None = None
    HEADER_FIELDS = {"markov": ("pi", "lam")}

    def record_header(self) -> dict:
        """``{"model": "markov", "pi": [π_k], "lam": [λ_k]}``: one two-state chain per client, π_k its
        stationary probability and λ_k its second eigenvalue (CA-Fed Assumption 1, App. F3). The
        header holds no ``clusters``: π and λ are written per chain."""
        return {"model": "markov", "pi": [float(v) for v in np.asarray(self.pi, dtype=float)],
                "lam": [float(v) for v in np.asarray(self.lam, dtype=float)]}

    @classmethod
    def from_record_header(cls, header: dict, n_clients: int) -> "Markov":
        """``Markov(π, λ)``, one chain per client."""
        return cls(np.asarray(header["pi"], dtype=float), np.asarray(header["lam"], dtype=float))

    def __post_init__(self):
        pi, lam = np.asarray(self.pi, dtype=float), np.asarray(self.lam, dtype=float)
        if self.clusters is not None:
            clusters = np.asarray(self.clusters)
            if clusters.ndim != 1 or not np.issubdtype(clusters.dtype, np.integer):
                raise ValueError("clusters must be a 1-D integer array (chain index per client)")
            n_chains = max(pi.size, lam.size, int(clusters.max()) + 1)
            if clusters.min() < 0:
                raise ValueError(f"cluster index {clusters.min()} is negative")
            n = clusters.size
        else:
            n_chains = max(pi.size, lam.size) if (pi.ndim or lam.ndim) else integer(self.n_clients, "n_clients (needed with scalar pi and lam)")
            n = n_chains
        if self.n_clients is not None and self.n_clients != n:
            raise ValueError(f"n_clients={self.n_clients} does not match the {n} clients given")
        try:
            pi, lam = (np.broadcast_to(v, (n_chains,)).copy() for v in (pi, lam))
        except ValueError:
            raise ValueError(f"pi (shape {np.shape(self.pi)}) and lam (shape {np.shape(self.lam)}) do not match {n_chains} chains") from None
        markov.two_state(pi, lam)  # validates π ∈ (0, 1) and the admissible λ range
        object.__setattr__(self, "pi", frozen_array(pi))
        object.__setattr__(self, "lam", frozen_array(lam))
        object.__setattr__(self, "n_clients", n)
        if self.clusters is not None:
            object.__setattr__(self, "clusters", frozen_array(self.clusters, dtype=np.intp))

    # --- constructors ----------------------------------------------------------------
    @classmethod
    def from_rates(cls, a, b, **kwargs) -> "Markov":
        """Chains given by their switching rates, as FedAU's Markovian participation:
        a = P(unavailable → available), b = P(available → unavailable), both in (0, 1].
        Then π = a/(a + b) and λ = 1 − a − b."""
        pi, lam = markov.rates_to_pi_lam(a, b)
        return cls(pi, lam, **kwargs)

    @classmethod
    def cafed_temporal(cls, n_clients: int = 100, composition: str = "four-types", g: float = 0.4, nu: float = 0.9,
                       eps: float = 0.01, weak_draw: str = "paper", seed=0) -> "Markov":
        """CA-Fed's temporal-correlation mix (§V-A, "Federated system simulator"; the three
        groups are Fig. 1d's; the "code" draw is that of the authors' repository, linked in §V-A).

        "More available" clients have π = 1/2 + g, "less available" π = 1/2 − g;
        "correlated" clients have λ = ν, "weakly correlated" λ ~ N(0, ε²) (``weak_draw=
        "paper"``) or the authors' code's 0.5(N(0, ε²) + ε) (``"code"``), clipped to the
        admissible range. ``composition``:

        * ``"four-types"`` (the text): N/4 each of (more, correlated), (more, weak),
          (less, correlated), (less, weak);
        * ``"three-groups"`` (Fig. 1d and the code): 50% (more, weak), 25% (less, weak),
          25% (less, correlated).

        Clients are ordered by type in the order listed; the λ draws use ``seed``.
        """
        n = integer(n_clients, "n_clients")
        if not 0 < g < 0.5:
            raise ValueError(f"g must lie in (0, 1/2), got {g}")
        if weak_draw not in ("paper", "code"):
            raise ValueError(f"weak_draw must be 'paper' or 'code', got {weak_draw!r}")
        shares = {"four-types": [("more", "corr", 1), ("more", "weak", 1), ("less", "corr", 1), ("less", "weak", 1)],
                  "three-groups": [("more", "weak", 2), ("less", "weak", 1), ("less", "corr", 1)]}
        if composition not in shares:
            raise ValueError(f"composition must be 'four-types' or 'three-groups', got {composition!r}")
        groups = shares[composition]
        weights = np.array([w for *_, w in groups], dtype=float)
        counts = np.floor(n * weights / weights.sum()).astype(int)
        counts[: n - counts.sum()] += 1  # hand out the remainder to the first groups
        pi = np.concatenate([np.full(c, 0.5 + g if avail == "more" else 0.5 - g) for (avail, _, _), c in zip(groups, counts)])
        corr = np.concatenate([np.full(c, kind == "corr") for (_, kind, _), c in zip(groups, counts)])
        rng = np.random.default_rng(seed_sequence(seed))
        noise = rng.normal(0.0, eps, size=n)
        weak = noise if weak_draw == "paper" else 0.5 * (noise + eps)
        lam = np.where(corr, nu, np.clip(weak, markov.lambda_lower_bound(pi), np.nextafter(1.0, 0.0)))
        return cls(pi, lam)

    @classmethod
    def cafed_spatial(cls, n_clusters: int = 10, clients_per_cluster: int = 10) -> "Markov":
        """CA-Fed's spatial-correlation setting (§V-B, "CA-Fed with Spatial Correlation"; Fig. 5):
        the first half of the clusters have π = 0.9, λ = 0; cluster c of the second half has
        π = 0.1, λ = c/10. Clients of one cluster are available together."""
        c = integer(n_clusters, "n_clusters")
        integer(clients_per_cluster, "clients_per_cluster")
        half = c // 2
        idx = np.arange(c)
        pi = np.where(idx < half, 0.9, 0.1)
        lam = np.where(idx < half, 0.0, idx / c)
        return cls(pi, lam, clusters=np.repeat(idx, clients_per_cluster))

    # --- derived quantities ------------------------------------------------------------
    @property
    def n_chains(self) -> int:
        return self.pi.size

    def transition_matrices(self) -> np.ndarray:
        """P_k for every chain, shape (n_chains, 2, 2), state order (unavailable, available)."""
        return markov.two_state(self.pi, self.lam)

    # --- sampling -----------------------------------------------------------------------
    def _generate(self, root, replicates, start, stop):
        matrices = self.transition_matrices()
        on_from_off, on_from_on = matrices[:, 0, 1], matrices[:, 1, 1]
        chains = np.empty((len(replicates), stop - start, self.n_chains), dtype=bool)
        state = None
        for block in range(0, (stop - 1) // BLOCK + 1):  # a chain needs its past: walk from round 0
            u = keyed_uniforms(root, replicates, block, (BLOCK, self.n_chains))
            for r in range(BLOCK):
                t = block * BLOCK + r
                if t >= stop:
                    break
                state = u[:, r] < (self.pi if t == 0 else np.where(state, on_from_on, on_from_off))
                if t >= start:
                    chains[:, t - start] = state
        return chains if self.clusters is None else chains[:, :, self.clusters]
