"""Expected delays per participation case: exact values, Monte-Carlo, paper bounds.

``exact_tau_t``, ``exact_tau_avg``, ``exact_tau_max`` (and the exact law
``exact_tau_max_tail``) cover every pattern with a formula: independent clients
(Bernoulli with homogeneous, per-client or time-varying p; Sine/P3; H.8; LOGIT's
setting), CA-Fed Markov availability (per client or per cluster), uniform sampling
(E[τ_t] and E[τ_avg]), deterministic cyclic, reshuffled cyclic (E[τ_t], E[τ_avg]),
on/off cycles with random phases, and any pattern with a never-available client
(τ_t = t + 1 exactly; :mod:`.laws.availability_laws`). Anything else raises a ValueError that
points to ``monte_carlo``. The families are one ordered table (:mod:`.laws.exact`), walked by
both quantities; the Monte-Carlo samplers one ordered list (``montecarlo.SAMPLERS``), walked by
``method="auto"``.

Each computation estimates its memory and time from the sizes before it starts and
refuses, with a one-line ValueError naming both, what would exceed the limits of
:mod:`.laws._limits` (``FEDVERIFY_MEMORY_GB`` or half the machine's memory;
``FEDVERIFY_EXACT_SECONDS`` or 60 s).
"""
from __future__ import annotations

from .laws.exact import exact_tau_avg, exact_tau_max, exact_tau_max_tail, exact_tau_t
from .montecarlo import Estimate, MonteCarloResult, check_monte_carlo, monte_carlo
from .paper_bounds import PaperBound, paper_tau_max_bound

__all__ = ["exact_tau_t", "exact_tau_avg", "exact_tau_max", "exact_tau_max_tail", "paper_tau_max_bound",
           "PaperBound", "monte_carlo", "check_monte_carlo", "MonteCarloResult", "Estimate"]
