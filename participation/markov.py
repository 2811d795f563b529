"""Spectral and mixing quantities of Markov availability chains (CA-Fed, App. B2 and F).

CA-Fed (Rodio et al., IEEE/ACM ToN 2023) models the set of available clients as a
stationary, irreducible, aperiodic Markov chain with transition matrix P and stationary
law ρ (Assumption 1, §III-A). Its bounds depend on P only
through the SLEM λ̄₂(P), the rate λ(P) = (λ̄₂(P) + 1)/2 and the constants C_P, T_P of the
geometric-mixing inequality (5). This module computes those quantities:

* for one general finite chain given as a row-stochastic matrix (``stationary``,
  ``eigenvalues``, ``slem``, ``cafed_lambda``, ``cp_tp``, ``mixing_time``, ...);
* for the two-state client chain of the experiments, parametrised by (π, λ) (``two_state``);
* for the joint chain of independent clients, P = ⊗_k P_k, without ever forming the
  2^N-state matrix (``product_chain`` / ``ProductChain``);
* and estimates (π_k, λ_k) from a participation trace (``estimate``).

Conventions: in a two-state chain state 0 is "inactive" and state 1 is "active". Product
states are ordered as in ``numpy.kron(P_1, P_2, ..., P_N)``: client 1 is the most
significant digit. Matrices are validated once per call; every violation is a ValueError
that names the offending value.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .trace import as_mask
from .validation import integer

__all__ = [
    "two_state",
    "transition_counts",
    "two_state_from_rates",
    "rates_to_pi_lam",
    "stationary",
    "eigenvalues",
    "signed_lambda2",
    "slem",
    "spectral_gap",
    "absolute_spectral_gap",
    "relaxation_time",
    "cafed_lambda",
    "mixing_time",
    "cp_tp",
    "mixing_lag",
    "ProductChain",
    "product_chain",
    "AvailabilityEstimate",
    "estimate",
]

#: Row sums of a transition matrix must equal 1 within this tolerance.
ROW_SUM_TOL = 1e-10
#: Entries above -NEG_TOL are treated as rounding noise around 0 and clipped.
NEG_TOL = 1e-12
#: ``mixing_time`` gives up beyond this many steps.
MIXING_CAP = 10**7
#: ``ProductChain.matrix()`` / ``.stationary()`` refuse chains with more states.
MAX_EXPLICIT_STATES = 4096
#: Imaginary parts below this are treated as zero by ``eigenvalues``.
IMAG_TOL = 1e-10
#: An eigenvalue modulus within this of 1 (besides the Perron root) means a periodic chain.
PERIODIC_TOL = 1e-12


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------
def _first_bad(bad: np.ndarray, values: np.ndarray) -> tuple[tuple[int, ...], float]:
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return where, values[where]


def _finite_non_negative(array: np.ndarray, name: str) -> np.ndarray:
    """Reject non-finite or negative entries (beyond rounding) and clip the rounding away."""
    if not np.isfinite(array).all():
        where, value = _first_bad(~np.isfinite(array), array)
        raise ValueError(f"{name}{list(where)} = {value} is not finite")
    if (array < -NEG_TOL).any():
        where, value = _first_bad(array < -NEG_TOL, array)
        raise ValueError(f"{name}{list(where)} = {value} is negative; transition probabilities must be >= 0")
    return np.clip(array, 0.0, None)


def _as_chain(P, name: str = "P") -> np.ndarray:
    """Validate a finite irreducible row-stochastic matrix and return it as float64.

    Square, finite, entries ≥ 0 (noise above -1e-12 is clipped to 0), every row summing
    to 1 within ``ROW_SUM_TOL``, and one communicating class (irreducible, Assumption 1).
    """
    try:
        array = np.array(P, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real square matrix, got {P!r}") from None
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {array.shape}")
    array = _finite_non_negative(array, name)
    sums = array.sum(axis=1)
    off = np.abs(sums - 1.0) > ROW_SUM_TOL
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ValueError(f"row {row} of {name} sums to {float(sums[row])!r}; every row must sum to 1 within {ROW_SUM_TOL}")
    if array.shape[0] > 1:
        n_classes, _ = connected_components(csr_matrix(array > 0), directed=True, connection="strong")
        if n_classes != 1:
            raise ValueError(
                f"{name} is reducible ({n_classes} communicating classes); Assumption 1 needs an irreducible chain"
            )
    return array


def _check_aperiodic(modulus: float, name: str = "P") -> None:
    if modulus >= 1.0 - PERIODIC_TOL:
        raise ValueError(
            f"{name} is periodic (an eigenvalue other than 1 has modulus {modulus!r}); "
            "Assumption 1 needs an aperiodic chain"
        )


def _real_scalar_array(value, name: str) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or array of real numbers, got {value!r}") from None
    return array


def _report(array: np.ndarray, bad: np.ndarray):
    """The first offending value, as a Python scalar for the error message."""
    value = array[bad].flat[0] if array.ndim else array[()]
    return float(value)


# --------------------------------------------------------------------------------------
# two-state chains
# --------------------------------------------------------------------------------------
def lambda_lower_bound(pi) -> np.ndarray:
    """Smallest λ keeping (236) stochastic: max(1 − 1/π, 1 − 1/(1 − π)) (≥ −1)."""
    pi = np.asarray(pi, dtype=float)
    with np.errstate(divide="ignore"):
        return np.maximum(1.0 - 1.0 / pi, 1.0 - 1.0 / (1.0 - pi))


def two_state(pi, lam) -> np.ndarray:
    """Transition matrix of CA-Fed's two-state client chain from its (π, λ).

    CA-Fed eq. (236) (App. F3)::

        P = [[1 − (1−λ)π,   (1−λ)π    ],
             [(1−λ)(1−π),   λ + (1−λ)π]]

    with state 0 = inactive and state 1 = active. π is the stationary probability of
    being active, ρ = [1 − π, π] (eq. (237)), and λ = p₀ + p₁ − 1 is the second
    eigenvalue (eq. (238)), also the lag-one autocorrelation of the activity.

    Admissible values: π ∈ (0, 1); the entries lie in [0, 1] iff
    λ ≥ max(1 − 1/π, 1 − 1/(1 − π)); irreducibility and aperiodicity (Assumption 1)
    add −1 < λ < 1. Anything else is a ValueError naming the value and the range.

    Scalars give a (2, 2) array; ``pi`` and ``lam`` broadcast against each other, and an
    input of shape S gives shape S + (2, 2) (e.g. (n,) → (n, 2, 2)).
    """
    pi, lam = _broadcast_pair(pi, lam, "pi", "lam")
    bad = ~((pi > 0) & (pi < 1))
    if bad.any():
        raise ValueError(f"pi must lie in the open interval (0, 1), got {_report(pi, bad)}")
    lower = np.maximum(lambda_lower_bound(pi), -1.0)
    bad = ~((lam >= lower - 1e-12) & (lam > -1.0) & (lam < 1.0))
    if bad.any():
        i = np.argwhere(bad)[0] if bad.ndim else ()
        p, l, lo = pi[tuple(i)], lam[tuple(i)], lower[tuple(i)]
        closed = "[" if lo > -1 else "("
        raise ValueError(
            f"lam = {float(l)} is outside the admissible range {closed}{float(lo):.6g}, 1) for pi = {float(p)} "
            "(entries of (236) in [0, 1] need lam >= max(1 - 1/pi, 1 - 1/(1 - pi)); "
            "irreducible and aperiodic need -1 < lam < 1)"
        )
    # switching rates P(inactive -> active) and P(active -> inactive); p1 = λ + (1−λ)π = 1 − b
    return np.clip(_from_rates((1.0 - lam) * pi, (1.0 - lam) * (1.0 - pi)), 0.0, 1.0)


def _broadcast_pair(x, y, x_name: str, y_name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = _real_scalar_array(x, x_name), _real_scalar_array(y, y_name)
    try:
        return tuple(np.broadcast_arrays(x, y))
    except ValueError:
        raise ValueError(f"{x_name} (shape {x.shape}) and {y_name} (shape {y.shape}) do not broadcast") from None


def _from_rates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P = [[1 − a, a], [b, 1 − b]], stacked over the broadcast shape of a and b."""
    P = np.empty(a.shape + (2, 2))
    P[..., 0, 0] = 1.0 - a
    P[..., 0, 1] = a
    P[..., 1, 0] = b
    P[..., 1, 1] = 1.0 - b
    return P


def _check_rates(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = _broadcast_pair(a, b, "a", "b")
    for name, v in (("a", a), ("b", b)):
        bad = ~((v > 0) & (v <= 1))
        if bad.any():
            raise ValueError(f"{name} must lie in (0, 1], got {_report(v, bad)}")
    both = (a == 1) & (b == 1)
    if both.any():
        raise ValueError("a = b = 1 gives the periodic chain [[0, 1], [1, 0]] (lam = -1); Assumption 1 needs aperiodicity")
    return a, b


def two_state_from_rates(a, b) -> np.ndarray:
    """Two-state transition matrix from its switching rates.

    ``a`` = P(inactive → active) = 1 − p₀ and ``b`` = P(active → inactive) = 1 − p₁
    (the off-diagonal entries of CA-Fed eq. (236)), so P = [[1 − a, a], [b, 1 − b]]. Both
    must lie in (0, 1] and not both equal 1 (that chain is periodic). Broadcasts like
    ``two_state``.
    """
    return _from_rates(*_check_rates(a, b))


def rates_to_pi_lam(a, b) -> tuple:
    """(π, λ) of the two-state chain with switching rates ``a`` (0→1) and ``b`` (1→0).

    π = a / (a + b) from CA-Fed eq. (237) (with 1 − p₀ = a, 1 − p₁ = b) and
    λ = p₀ + p₁ − 1 = 1 − a − b from eq. (238).
    Scalars in give floats out; arrays broadcast.
    """
    a, b = _check_rates(a, b)
    pi = a / (a + b)
    lam = 1.0 - a - b
    if pi.ndim == 0:
        return float(pi), float(lam)
    return pi, lam


# --------------------------------------------------------------------------------------
# general finite chains
# --------------------------------------------------------------------------------------
def _stationary(P: np.ndarray) -> np.ndarray:
    M = P.shape[0]
    if M == 1:
        return np.ones(1)
    A = np.vstack([P.T - np.eye(M), np.ones((1, M))])
    rhs = np.zeros(M + 1)
    rhs[-1] = 1.0
    rho = np.linalg.lstsq(A, rhs, rcond=None)[0]
    rho = np.clip(rho.real, 0.0, None)
    return rho / rho.sum()


def stationary(P) -> np.ndarray:
    """Stationary distribution ρ of an irreducible finite chain: ρᵀP = ρᵀ, Σρ = 1.

    CA-Fed Assumption 1 (ρ is the left eigenvector of the eigenvalue 1, App. F1). Solved as
    the least-squares system [Pᵀ − I; 1ᵀ] ρ = [0; 1], which is consistent with a unique
    solution for an irreducible P. The result is real, non-negative and sums to 1. Raises
    ValueError unless P is square, non-negative, has rows summing to 1 within 1e-10 and is
    irreducible.
    """
    return _stationary(_as_chain(P))


def _eigenvalues(P: np.ndarray) -> np.ndarray:
    w = np.linalg.eigvals(P)
    one = int(np.argmin(np.abs(w - 1.0)))
    rest = np.delete(w, one)
    order = np.lexsort((-rest.imag, -np.abs(rest), -rest.real))
    w = np.concatenate([w[one : one + 1], rest[order]])
    if np.all(np.abs(w.imag) <= IMAG_TOL):
        return np.ascontiguousarray(w.real)
    return w


def eigenvalues(P) -> np.ndarray:
    """All eigenvalues of an irreducible transition matrix, Perron root first.

    Order: the simple eigenvalue 1 first, then by decreasing real part, ties by
    decreasing modulus (then decreasing imaginary part) — CA-Fed's ordering
    1 = λ₁ > λ₂ ≥ … ≥ λ_M (eq. (228), App. F1) extended
    to complex spectra. The dtype is real unless some imaginary part exceeds 1e-10.
    """
    return _eigenvalues(_as_chain(P))


def _slem(P: np.ndarray) -> float:
    w = _eigenvalues(P)
    return float(np.abs(w[1:]).max()) if w.size > 1 else 0.0


def _signed_lambda2(P: np.ndarray) -> float:
    w = _eigenvalues(P)
    if w.size < 2:
        raise ValueError("a one-state chain has no second eigenvalue")
    if np.iscomplexobj(w):
        z = w[np.argmax(np.abs(w.imag))]
        raise ValueError(
            f"P has the non-real eigenvalue {_fmt(z)}; the signed second eigenvalue is defined for "
            "real spectra only (use slem for the modulus)"
        )
    return float(w[1])


def signed_lambda2(P) -> float:
    """Second-largest eigenvalue λ₂(P), signed, for a chain with real spectrum.

    λ₂ of CA-Fed eq. (228). For a two-state
    chain it is p₀ + p₁ − 1 = λ (eq. (238)). It may be negative, so it is not
    the SLEM (see ``slem``). Reversible chains (two-state chains and their products) have
    real spectra; a non-real spectrum is a ValueError.
    """
    return _signed_lambda2(_as_chain(P))


def slem(P) -> float:
    """Second largest eigenvalue modulus λ̄₂(P) = max_{i ≥ 2} |λ_i(P)|.

    CA-Fed eq. (229) (App. F1): λ̄₂(P) = max{|λ₂(P)|, |λ_M(P)|}; for a possibly
    non-reversible P "the second largest module of the eigenvalues" (§III-A, before eq. (5)),
    i.e. the largest modulus over all eigenvalues other than the single eigenvalue 1, complex
    ones included. A one-state chain has 0.
    """
    return _slem(_as_chain(P))


def spectral_gap(P) -> float:
    """Spectral gap 1 − λ₂(P) with the signed λ₂ of ``signed_lambda2`` (real spectra only)."""
    return 1.0 - signed_lambda2(P)


def absolute_spectral_gap(P) -> float:
    """Absolute spectral gap γ = 1 − λ̄₂(P) (CA-Fed App. F1, after eq. (229))."""
    return 1.0 - slem(P)


def relaxation_time(P) -> float:
    """Relaxation time t_rel = 1/γ = 1/(1 − λ̄₂(P)) (CA-Fed App. F1, after eq. (229)).

    A periodic chain (γ = 0) is a ValueError.
    """
    s = slem(P)
    _check_aperiodic(s)
    return 1.0 / (1.0 - s)


def cafed_lambda(P) -> float:
    """CA-Fed's rate λ(P) = (λ̄₂(P) + 1)/2 ∈ [1/2, 1).

    CA-Fed eq. (229) (also §III-A, after eq. (5)). It is the rate in the geometric-mixing
    inequality (5); footnote 3 notes any value in (λ̄₂(P), 1) would do, with other C_P, T_P.
    A periodic chain is a ValueError.
    """
    s = slem(P)
    _check_aperiodic(s)
    return (1.0 + s) / 2.0


def _tv_distance(Pt: np.ndarray, rho: np.ndarray) -> float:
    return float(0.5 * np.abs(Pt - rho).sum(axis=1).max())


def mixing_time(P, eps: float = 0.25) -> int:
    """Exact mixing time t_mix(ε) = min{t ≥ 0 : d(t) ≤ ε}, d(t) = max_a ‖P^t(a, ·) − ρ‖_TV.

    Definitions as recalled in CA-Fed App. F1 (after eq. (229)).
    Computed, not bounded: d(t) is non-increasing in t, so P^(2^k) is formed by repeated
    squaring until d ≤ ε and the exact crossing is then found by binary descent over the
    stored powers (O(log t) matrix products). For a two-state chain d(t) = |λ|^t·max(π, 1 − π).
    ``eps`` must lie in (0, 1). Raises ValueError if d(t) > ε for every t ≤ 10^7
    (e.g. a periodic or extremely slow chain).
    """
    P = _as_chain(P)
    eps = float(eps)
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must lie in (0, 1), got {eps}")
    rho = _stationary(P)
    if _tv_distance(np.eye(P.shape[0]), rho) <= eps:
        return 0
    powers = [P]  # powers[k] = P^(2^k)
    t = 1
    while _tv_distance(powers[-1], rho) > eps:
        if t >= MIXING_CAP:
            raise ValueError(f"d(t) stays above eps = {eps} for all t <= {MIXING_CAP}; the chain mixes too slowly or is periodic")
        powers.append(powers[-1] @ powers[-1])
        t *= 2
    if t == 1:
        return 1
    s, Q = t // 2, powers[-2]  # d(s) > eps, d(2s) <= eps
    for k in range(len(powers) - 3, -1, -1):
        candidate = Q @ powers[k]
        if _tv_distance(candidate, rho) > eps:
            Q, s = candidate, s + (1 << k)
    if s + 1 > MIXING_CAP:
        raise ValueError(f"t_mix({eps}) = {s + 1} exceeds the cap of {MIXING_CAP} steps")
    return s + 1


def _fmt(z) -> str:
    z = complex(z)
    return f"{z.real:.6g}" if abs(z.imag) <= IMAG_TOL else f"{z:.6g}"


def _log_cp_factor(P: np.ndarray, name: str = "P") -> float:
    """log(‖U‖_F ‖U⁻¹‖_F) with unit-2-norm right eigenvectors; ValueError if defective."""
    M = P.shape[0]
    if M == 1:
        return 0.0
    w, U = np.linalg.eig(P)
    # Defectiveness: a cluster of (numerically) equal eigenvalues must have as many
    # independent eigenvectors as its size.
    scale = max(1.0, float(np.abs(P).max()))
    seen = np.zeros(M, dtype=bool)
    for i in range(M):
        if seen[i]:
            continue
        cluster = np.abs(w - w[i]) <= 1e-6
        seen |= cluster
        size = int(cluster.sum())
        if size > 1:
            mu = w[cluster].mean()
            sv = np.linalg.svd(P - mu * np.eye(M), compute_uv=False)
            geometric = int((sv <= 1e-7 * scale).sum())
            if geometric < size:
                raise ValueError(
                    f"{name} is defective (not diagonalisable): eigenvalue {_fmt(mu)} has algebraic "
                    f"multiplicity {size} but only {geometric} independent eigenvector(s); C_P of (156) then needs "
                    "the Jordan form, which is not implemented"
                )
    cond = np.linalg.cond(U)
    if not np.isfinite(cond) or cond > 1e12:
        raise ValueError(
            f"{name} is numerically defective (not diagonalisable): its eigenvector matrix has condition number {cond:.3g}"
        )
    Uinv = np.linalg.inv(U)
    return float(np.log(np.linalg.norm(U, "fro")) + np.log(np.linalg.norm(Uinv, "fro")))


def cp_tp(P) -> tuple[float, int]:
    """CA-Fed's constants (C_P, T_P) of the geometric-mixing inequality (5), diagonalisable P.

    CA-Fed Lemma 16 (App. B2), eqs. (156)–(157):
    with the Jordan form P = U J U⁻¹ and block sizes n_i (block 1 is the eigenvalue 1),

        C_P = (Σ_{i≥2} n_i²)^{1/2} ‖U‖_F ‖U⁻¹‖_F,    T_P from (157),

    so that max_{i,j} |[P^t]_{ij} − ρ_j| ≤ C_P λ(P)^t for t ≥ T_P (eq. (5)).
    For a diagonalisable P every n_i = 1, hence C_P = √(M − 1)·‖U‖_F‖U⁻¹‖_F and T_P = 0.
    U is only defined up to column scaling; here its columns are the unit-2-norm right
    eigenvectors returned by ``numpy.linalg.eig`` (with repeated eigenvalues the basis of
    each eigenspace, hence C_P, is not unique). A defective (non-diagonalisable) P is a
    ValueError, since the garbled (157) cannot be evaluated reliably. Returns (C_P, 0).
    """
    P = _as_chain(P)
    M = P.shape[0]
    if M == 1:
        return 0.0, 0
    log_norms = _log_cp_factor(P)
    return float(math.sqrt(M - 1) * math.exp(log_norms)), 0


def mixing_lag(t, C_P=None, H=None, lam_P=None, T_P: int = 0, *, log_C_P=None):
    """CA-Fed's mixing lag 𝒥_t = min{max{⌈ln(2 C_P H t)/ln(1/λ(P))⌉, T_P}, t}.

    CA-Fed Definition 1 (App. B2), eq. (132). Evaluated in log
    space, ln(2 C_P H t) = ln 2 + ln C_P + ln H + ln t, so an astronomically large C_P can
    be passed as ``log_C_P`` (e.g. ``ProductChain.log_cp()``) instead of ``C_P``; give
    exactly one of them. ``t`` ≥ 1 is an integer or an integer array; H > 0;
    ``lam_P`` ∈ (0, 1) is λ(P) (e.g. ``cafed_lambda``); T_P ≥ 0 is an integer.

    The printed definition is followed literally: when 2 C_P H t ≤ 1 and T_P = 0 the
    result is 0 (the paper calls 𝒥_t "positive"; no clamp to 1 is applied). The cap
    𝒥_t ≤ t means (158), C_P λ(P)^{𝒥_t} ≤ 1/(2Ht), holds only where the cap is inactive.
    A ratio within 1e-9 (relative) of an integer is rounded to it before the ceiling.
    Returns an int for scalar t, an int64 array otherwise.
    """
    if (C_P is None) == (log_C_P is None):
        raise ValueError("give exactly one of C_P and log_C_P")
    if H is None or lam_P is None:
        raise ValueError("mixing_lag needs H and lam_P")
    if log_C_P is None:
        if isinstance(C_P, numbers.Integral) and not isinstance(C_P, bool):
            if C_P <= 0:
                raise ValueError(f"C_P must be > 0, got {C_P}")
            log_c = math.log(C_P)  # exact for huge Python ints
        else:
            c = float(C_P)
            if not (c > 0 and math.isfinite(c)):
                raise ValueError(f"C_P must be a finite number > 0, got {C_P} (pass log_C_P for huge values)")
            log_c = math.log(c)
    else:
        log_c = float(log_C_P)
        if math.isnan(log_c) or log_c == math.inf:
            raise ValueError(f"log_C_P must be a real number below +inf, got {log_C_P}")
    H = float(H)
    if not (H > 0 and math.isfinite(H)):
        raise ValueError(f"H must be a finite number > 0, got {H}")
    lam_P = float(lam_P)
    if not 0.0 < lam_P < 1.0:
        raise ValueError(f"lam_P must lie in (0, 1), got {lam_P}")
    integer(T_P, "T_P", 0)
    t_arr = np.asarray(t)
    if not (np.issubdtype(t_arr.dtype, np.integer) or (np.issubdtype(t_arr.dtype, np.floating) and np.all(t_arr == np.round(t_arr)))):
        raise ValueError(f"t must be an integer round index >= 1, got {t!r}")
    if (t_arr < 1).any():
        raise ValueError(f"t must be >= 1 (Definition 1 is for rounds t >= 1), got {_report(t_arr, t_arr < 1)}")
    t_int = t_arr.astype(np.int64)
    ratio = (math.log(2.0) + log_c + math.log(H) + np.log(t_int.astype(float))) / -math.log(lam_P)
    nearest = np.round(ratio)
    ratio = np.where(np.abs(ratio - nearest) <= 1e-9 * np.maximum(1.0, np.abs(ratio)), nearest, ratio)
    lag = np.ceil(ratio)
    lag = np.maximum(lag, T_P)
    lag = np.minimum(lag, t_int).astype(np.int64)
    return int(lag) if lag.ndim == 0 else lag


# --------------------------------------------------------------------------------------
# product chain of independent clients
# --------------------------------------------------------------------------------------
def _validate_two_state_stack(Ps: np.ndarray) -> np.ndarray:
    """Vectorised version of ``_as_chain`` + aperiodicity for an (n, 2, 2) stack."""
    Ps = _finite_non_negative(Ps, "Ps")
    sums = Ps.sum(axis=2)
    off = np.abs(sums - 1.0) > ROW_SUM_TOL
    if off.any():
        k, r = (int(i) for i in np.argwhere(off)[0])
        raise ValueError(f"row {r} of Ps[{k}] sums to {float(sums[k, r])!r}; every row must sum to 1 within {ROW_SUM_TOL}")
    reducible = (Ps[:, 0, 1] == 0) | (Ps[:, 1, 0] == 0)
    if reducible.any():
        k = int(np.flatnonzero(reducible)[0])
        raise ValueError(f"Ps[{k}] = {Ps[k].tolist()} is reducible; Assumption 1 needs irreducible chains")
    periodic = (Ps[:, 0, 0] == 0) & (Ps[:, 1, 1] == 0)
    if periodic.any():
        k = int(np.flatnonzero(periodic)[0])
        raise ValueError(f"Ps[{k}] = {Ps[k].tolist()} is periodic; Assumption 1 needs aperiodic chains")
    return Ps


class ProductChain:
    """Joint availability chain of independent clients, P = ⊗_k P_k, kept in factored form.

    CA-Fed App. F2: the product chain has transition matrix P = ⊗_k P_k (Definition 2,
    eq. (230)), stationary law ρ = ⊗_k π^{(k)} (Proposition 3), spectrum
    {∏_k λ_{i_k}(P_k)} (Proposition 5; eq. (235)) and λ̄₂(P) = max_k λ̄₂(P_k),
    λ(P) = max_k λ(P_k) (Proposition 6, eq. (234)). Nothing here forms the M = ∏_k M_k states
    unless ``matrix()`` or ``stationary()`` is asked for on a small chain.

    Every factor must be an irreducible, aperiodic row-stochastic matrix. Build it with
    ``product_chain(Ps)``.
    """

    __slots__ = ("_factors", "_two_state", "_eig_cache", "_marginals", "_log_norms")

    def __init__(self, Ps):
        if isinstance(Ps, np.ndarray) and Ps.ndim == 3:
            stack = np.array(Ps, dtype=float)
            factors = None
        else:
            try:
                factors = [np.asarray(P, dtype=float) for P in Ps]
            except (TypeError, ValueError):
                raise ValueError("Ps must be a sequence of square matrices or an (n, m, m) array") from None
            if len(factors) == 0:
                raise ValueError("a product chain needs at least one factor, got none")
            stack = np.stack(factors) if all(f.shape == (2, 2) for f in factors) else None
        if stack is not None:
            if stack.shape[0] < 1 or stack.shape[1] != stack.shape[2]:
                raise ValueError(f"Ps must have shape (n, m, m) with n >= 1, got {stack.shape}")
        if stack is not None and stack.shape[1:] == (2, 2):
            stack = _validate_two_state_stack(stack)
            self._two_state = True
            self._factors = stack
        else:
            if factors is None:
                factors = list(stack)
            checked = []
            for k, P in enumerate(factors):
                P = _as_chain(P, name=f"Ps[{k}]")
                _check_aperiodic(_slem(P), name=f"Ps[{k}]")
                checked.append(P)
            self._two_state = False
            self._factors = tuple(checked)
        if self._two_state:
            self._factors.flags.writeable = False
        else:
            for P in self._factors:
                P.flags.writeable = False
        self._eig_cache = None
        self._marginals = None
        self._log_norms = None

    # --- structure ---------------------------------------------------------------------
    @property
    def factors(self):
        """The per-client matrices: an (n, 2, 2) array for two-state factors, else a tuple."""
        return self._factors

    @property
    def n_clients(self) -> int:
        return len(self._factors)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(P.shape[0]) for P in self._factors)

    @property
    def n_states(self) -> int:
        """M = ∏_k M_k as an exact Python int (2^N for N two-state clients)."""
        return math.prod(self.sizes)

    @property
    def marginals(self):
        """Per-client stationary laws π^{(k)} (Proposition 3).

        An (n, m) array when all factors have m states (for two-state clients row k is
        [1 − π_k, π_k], eq. (237)); a tuple of 1-D arrays otherwise.
        """
        if self._marginals is None:
            if self._two_state:
                a, b = self._factors[:, 0, 1], self._factors[:, 1, 0]
                m = np.stack([b / (a + b), a / (a + b)], axis=1)
            else:
                laws = [_stationary(P) for P in self._factors]
                m = np.stack(laws) if len(set(self.sizes)) == 1 else tuple(laws)
            for arr in (m,) if isinstance(m, np.ndarray) else m:
                arr.flags.writeable = False
            self._marginals = m
        return self._marginals

    def _eigs(self) -> list[np.ndarray]:
        """Per-factor spectra with the Perron root first (``eigenvalues`` order)."""
        if self._eig_cache is None:
            if self._two_state:
                lam = self._factors[:, 0, 0] + self._factors[:, 1, 1] - 1.0
                self._eig_cache = [np.array([1.0, l]) for l in lam]
            else:
                self._eig_cache = [_eigenvalues(P) for P in self._factors]
        return self._eig_cache

    # --- spectra -------------------------------------------------------------------------
    def factor_slems(self) -> np.ndarray:
        """λ̄₂(P_k) for every client (|λ_k| for two-state clients)."""
        if self._two_state:
            return np.abs(self._factors[:, 0, 0] + self._factors[:, 1, 1] - 1.0)
        return np.array([float(np.abs(w[1:]).max()) if w.size > 1 else 0.0 for w in self._eigs()])

    def slem(self) -> float:
        """λ̄₂(P) = max_k λ̄₂(P_k) (Proposition 6, eq. (234))."""
        return float(self.factor_slems().max())

    def cafed_lambda(self) -> float:
        """λ(P) = (λ̄₂(P) + 1)/2 = max_k λ(P_k) (eqs. (229), (234))."""
        return (1.0 + self.slem()) / 2.0

    def signed_lambda2(self) -> float:
        """Largest real eigenvalue of P other than the Perron root 1, signed.

        By Proposition 5 the spectrum is {∏_k λ_{i_k}(P_k)}; the answer is the largest
        such product over all choices except "eigenvalue 1 in every factor". It is not
        max_k λ₂(P_k) in general: two clients with λ = −0.9 give the eigenvalue +0.81.
        Computed by a scan over the clients that keeps the largest and smallest product
        containing at least one non-trivial factor (a product is monotone in each
        factor). Every factor must have a real spectrum.
        """
        hi = lo = None
        for k, w in enumerate(self._eigs()):
            if np.iscomplexobj(w):
                raise ValueError(f"factor {k} has a non-real spectrum; the signed second eigenvalue needs real spectra")
            w = np.concatenate([[1.0], w[1:]])
            cands = [w[1:]]
            if hi is not None:
                cands += [hi * w, lo * w]
            cands = np.concatenate(cands)
            if cands.size:
                hi, lo = float(cands.max()), float(cands.min())
        if hi is None:
            raise ValueError("a one-state chain has no second eigenvalue")
        return hi

    def spectral_gap(self) -> float:
        """1 − λ₂(P) with the signed λ₂ of ``signed_lambda2``."""
        return 1.0 - self.signed_lambda2()

    def absolute_spectral_gap(self) -> float:
        """γ = 1 − λ̄₂(P) (CA-Fed App. F1)."""
        return 1.0 - self.slem()

    # --- mixing constants ------------------------------------------------------------------
    def factor_log_norms(self) -> np.ndarray:
        """log(‖U_k‖_F ‖U_k⁻¹‖_F) per client, unit-2-norm eigenvector columns.

        Two-state closed form: U = [[1, π], [1, −(1−π)]] with normalised columns gives
        ‖U‖_F ‖U⁻¹‖_F = 2√2·√(π² + (1 − π)²), whatever λ is.
        """
        if self._log_norms is None:
            if self._two_state:
                pi = self.marginals[:, 1]
                v = 1.5 * math.log(2.0) + 0.5 * np.log(pi**2 + (1.0 - pi) ** 2)
            else:
                v = np.array([_log_cp_factor(P, name=f"Ps[{k}]") for k, P in enumerate(self._factors)])
            v.flags.writeable = False
            self._log_norms = v
        return self._log_norms

    def log_cp(self) -> float:
        """ln C_P of the product chain with Kronecker-structured eigenvectors U = ⊗_k U_k.

        From CA-Fed Lemma 16, eq. (156), with
        P = ⊗_k P_k diagonalisable (every Jordan block of size 1, so T_P = 0):

            ln C_P = ½ ln(M − 1) + Σ_k ln(‖U_k‖_F ‖U_k⁻¹‖_F),

        using ‖⊗U_k‖_F = ∏‖U_k‖_F and (⊗U_k)⁻¹ = ⊗U_k⁻¹. Each U_k has unit-2-norm
        columns, so each column of ⊗U_k has unit norm too. ln(M − 1) is taken on the exact
        integer M, so N = 100 two-state clients pose no overflow. A one-state chain gives
        −inf (C_P = 0). A defective factor is a ValueError.
        """
        M = self.n_states
        if M == 1:
            return -math.inf
        return 0.5 * math.log(M - 1) + float(self.factor_log_norms().sum())

    def tp(self) -> int:
        """T_P = 0: a product of diagonalisable factors is diagonalisable (eq. (157))."""
        self.factor_log_norms()  # raises for a defective factor
        return 0

    # --- explicit forms (small chains only) ------------------------------------------------
    def _check_small(self) -> None:
        M = self.n_states
        if M > MAX_EXPLICIT_STATES:
            raise ValueError(
                f"the explicit product chain would have {M} states (more than {MAX_EXPLICIT_STATES}); "
                "use the factored methods instead"
            )

    def matrix(self) -> np.ndarray:
        """The explicit P = P_1 ⊗ … ⊗ P_N (eq. (230)); only for at most 4096 states."""
        self._check_small()
        out = np.ones((1, 1))
        for P in self._factors:
            out = np.kron(out, P)
        return out

    def stationary(self) -> np.ndarray:
        """ρ = π^{(1)} ⊗ … ⊗ π^{(N)} (Proposition 3); only for at most 4096 states."""
        self._check_small()
        m = self.marginals
        out = np.ones(1)
        for law in m:
            out = np.kron(out, law)
        return out

    def __len__(self) -> int:
        return self.n_clients

    def __repr__(self) -> str:
        return f"ProductChain(n_clients={self.n_clients}, n_states={self.n_states}, slem={self.slem():.4g})"


def product_chain(Ps) -> ProductChain:
    """The joint chain of independent clients with per-client matrices ``Ps``.

    ``Ps`` is a sequence of square matrices or an (n, m, m) array, e.g.
    ``product_chain(two_state(pi, lam))`` for arrays ``pi``, ``lam`` of shape (n,).
    See ``ProductChain`` (CA-Fed App. F2).
    """
    return ProductChain(Ps)


# --------------------------------------------------------------------------------------
# estimation from a trace
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AvailabilityEstimate:
    """Per-client estimates of (π_k, λ_k) with standard errors.

    ``pi``, ``lam``, ``pi_stderr``, ``lam_stderr`` have shape (n_clients,);
    ``transitions[k, i, j]`` = N_ij, the number of rounds s ≥ 1 with client k in state i at
    s − 1 and in state j at s (raw counts, without pseudo-counts). Iterating yields
    ``(pi, lam)``, so ``pi_hat, lam_hat = estimate(trace)`` works.
    """

    pi: np.ndarray
    lam: np.ndarray
    pi_stderr: np.ndarray
    lam_stderr: np.ndarray
    transitions: np.ndarray

    def __iter__(self):
        yield self.pi
        yield self.lam


def transition_counts(mask: np.ndarray) -> np.ndarray:
    """counts[..., i, x, y] = N_xy, the number of rounds t < T − 1 in which client i is in state
    x and in state y at t + 1 (0 absent, 1 present), for a boolean (…, T, N) mask: vectorised
    over clients and any leading axes (int64)."""
    prev, nxt = mask[..., :-1, :], mask[..., 1:, :]
    n1 = np.count_nonzero(prev, axis=-2).astype(np.int64)
    n0 = (mask.shape[-2] - 1) - n1
    n11 = np.count_nonzero(prev & nxt, axis=-2).astype(np.int64)
    n01 = np.count_nonzero(nxt, axis=-2).astype(np.int64) - n11
    return np.stack([np.stack([n0 - n01, n01], axis=-1), np.stack([n1 - n11, n11], axis=-1)], axis=-2)


def estimate(trace, prior: float = 0.0) -> AvailabilityEstimate:
    """Estimate every client's (π, λ) from a trace, each client a stationary two-state chain.

    CA-Fed §IV-B estimates π_k by
    counting active rounds and λ_k from a transition matrix estimated by counting state
    transitions. Concretely, with N_ij the transition counts (see
    ``AvailabilityEstimate``), n_i = N_i0 + N_i1 and a pseudo-count a = ``prior`` ≥ 0
    added to every N_ij (a symmetric Beta(a, a) prior on each row)::

        p̂_ii = (N_ii + a) / (n_i + 2a),    λ̂ = p̂_00 + p̂_11 − 1   (eq. (238)),
        π̂ = (number of active rounds) / T.

    The transition probabilities are conditional on the current state; dividing the joint
    counts by the total time instead is biased and is not done. ``prior`` affects λ̂ only.

    Standard errors (asymptotic, with plug-in estimates; T = number of rounds):

    * λ̂ — delta method on two independent binomial rows,
      Var λ̂ ≈ p̂_11(1 − p̂_11)/n_1 + p̂_00(1 − p̂_00)/n_0 (n_i + 2a with a prior);
    * π̂ — Markov-corrected variance of a sample mean of a two-state chain,
      Var π̂ ≈ π(1 − π)(1 + λ) / ((1 − λ) T).

    A client never seen leaving state i (n_i = 0) has p̂_ii undefined: with ``prior`` = 0
    its λ̂, both standard errors (π̂'s depends on λ̂) are nan; a positive prior makes
    them finite. ``trace`` is a ``Trace`` or a 0/1 array of shape (rounds, n_clients). The
    counting is vectorised over clients.
    """
    mask = as_mask(trace, what="trace")
    try:
        a = float(prior)
    except (TypeError, ValueError):
        raise ValueError(f"prior must be a finite number >= 0, got {prior!r}") from None
    if not (a >= 0 and math.isfinite(a)):
        raise ValueError(f"prior must be a finite number >= 0, got {prior!r}")
    T, n = mask.shape
    transitions = transition_counts(mask)
    (n00, n01), (n10, n11) = (transitions[:, 0, 0], transitions[:, 0, 1]), (transitions[:, 1, 0], transitions[:, 1, 1])
    n0, n1 = n00 + n01, n10 + n11
    with np.errstate(divide="ignore", invalid="ignore"):
        d0, d1 = n0 + 2.0 * a, n1 + 2.0 * a
        p00 = (n00 + a) / d0
        p11 = (n11 + a) / d1
        lam = p00 + p11 - 1.0
        lam_var = p11 * (1.0 - p11) / d1 + p00 * (1.0 - p00) / d0
        pi = np.count_nonzero(mask, axis=0) / T
        pi_var = pi * (1.0 - pi) * (1.0 + lam) / ((1.0 - lam) * T)
    out = dict(
        pi=pi, lam=lam, pi_stderr=np.sqrt(pi_var), lam_stderr=np.sqrt(lam_var), transitions=transitions
    )
    for v in out.values():
        v.flags.writeable = False
    return AvailabilityEstimate(**out)
