"""Tests of participation.markov against independent computations and CA-Fed's vectors.

Every closed form is checked against something computed another way: explicit matrices
and numpy eigendecompositions, brute-force matrix powers, Monte-Carlo traces.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from participation.markov import (
    AvailabilityEstimate,
    ProductChain,
    absolute_spectral_gap,
    cafed_lambda,
    cp_tp,
    eigenvalues,
    estimate,
    mixing_lag,
    mixing_time,
    product_chain,
    rates_to_pi_lam,
    relaxation_time,
    signed_lambda2,
    slem,
    spectral_gap,
    stationary,
    two_state,
    two_state_from_rates,
)
from participation.trace import Trace

# CA-Fed §8-style verification vectors: (pi, lam) -> P, lambda(P), C_P
VECTORS = [
    ((0.1, 0.9), [[0.99, 0.01], [0.09, 0.91]], 0.95, 2.5612),
    ((0.9, 0.0), [[0.1, 0.9], [0.1, 0.9]], 0.5, 2.5612),
    ((0.5, 0.5), [[0.75, 0.25], [0.25, 0.75]], 0.75, 2.0),
    ((0.1, -0.05), [[0.895, 0.105], [0.945, 0.055]], 0.525, 2.5612),
]
PRODUCT3 = ([0.1, 0.9, 0.5], [0.9, 0.01, -0.3])


# --------------------------------------------------------------------------------------
# independent helpers (no use of the module under test)
# --------------------------------------------------------------------------------------
def lower_lam(pi: float) -> float:
    return max(1 - 1 / pi, 1 - 1 / (1 - pi))


@st.composite
def pi_lam(draw, lam_max=0.97):
    pi = draw(st.floats(0.03, 0.97))
    u = draw(st.floats(0.0, 1.0))
    lo = max(lower_lam(pi), -lam_max)
    return pi, lo + u * (lam_max - lo)


@st.composite
def chains(draw, min_size=1, max_size=6):
    """Random irreducible aperiodic stochastic matrices, some with zero entries."""
    m = draw(st.integers(min_size, max_size))
    w = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=m * m, max_size=m * m))).reshape(m, m)
    keep = np.array(draw(st.lists(st.booleans(), min_size=m * m, max_size=m * m))).reshape(m, m)
    w = w * keep
    w[np.arange(m), (np.arange(m) + 1) % m] += 0.2  # a cycle: irreducible
    w[0, 0] += 0.1  # a self-loop: aperiodic
    return w / w.sum(axis=1, keepdims=True)


def numpy_stationary(P):
    w, V = np.linalg.eig(P.T)
    v = V[:, np.argmin(np.abs(w - 1))].real
    return v / v.sum()


def tv_distances(P, rho, t_max):
    out, Pt = [], np.eye(P.shape[0])
    for _ in range(t_max + 1):
        out.append(0.5 * np.abs(Pt - rho).sum(axis=1).max())
        Pt = Pt @ P
    return np.array(out)


def kron_all(mats):
    out = np.ones((1, 1))
    for A in mats:
        out = np.kron(out, np.atleast_2d(A))
    return out


def explicit_two_state(pi, lam):
    pi, lam = np.asarray(pi, float), np.asarray(lam, float)
    a, b = (1 - lam) * pi, (1 - lam) * (1 - pi)
    return np.stack([np.stack([1 - a, a], -1), np.stack([b, 1 - b], -1)], -2)


def simulate(pi, lam, rounds, rng):
    """Stationary two-state chains, one column per client; plain loop over time."""
    pi, lam = np.asarray(pi, float), np.asarray(lam, float)
    up, down = (1 - lam) * pi, (1 - lam) * (1 - pi)
    out = np.empty((rounds, pi.size), dtype=bool)
    x = rng.random(pi.size) < pi
    out[0] = x
    for t in range(1, rounds):
        u = rng.random(pi.size)
        x = np.where(x, u >= down, u < up)
        out[t] = x
    return out


# --------------------------------------------------------------------------------------
# two-state chains
# --------------------------------------------------------------------------------------
@given(pi_lam())
def test_two_state_matches_237_238(pl):
    pi, lam = pl
    P = two_state(pi, lam)
    assert P.shape == (2, 2)
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1, atol=1e-14)
    p0, p1 = P[0, 0], P[1, 1]
    # (237): stationary law from the diagonal entries; (238): second eigenvalue
    np.testing.assert_allclose([(1 - p1) / (2 - p0 - p1), (1 - p0) / (2 - p0 - p1)], [1 - pi, pi], atol=1e-12)
    assert p0 + p1 - 1 == pytest.approx(lam, abs=1e-12)
    np.testing.assert_allclose(stationary(P), numpy_stationary(P), atol=1e-10)
    np.testing.assert_allclose(eigenvalues(P), [1.0, lam], atol=1e-12)
    assert signed_lambda2(P) == pytest.approx(lam, abs=1e-12)
    assert slem(P) == pytest.approx(abs(lam), abs=1e-12)
    assert cafed_lambda(P) == pytest.approx((1 + abs(lam)) / 2, abs=1e-12)
    assert spectral_gap(P) == pytest.approx(1 - lam, abs=1e-12)
    assert absolute_spectral_gap(P) == pytest.approx(1 - abs(lam), abs=1e-12)
    assert relaxation_time(P) == pytest.approx(1 / (1 - abs(lam)), rel=1e-10)
    C, T = cp_tp(P)
    assert T == 0
    assert C == pytest.approx(2 * math.sqrt(2) * math.sqrt(pi**2 + (1 - pi) ** 2), rel=1e-9)


@pytest.mark.parametrize("pl, P, lam_P, C", VECTORS)
def test_two_state_verification_vectors(pl, P, lam_P, C):
    Pm = two_state(*pl)
    np.testing.assert_allclose(Pm, P, atol=1e-12)
    assert cafed_lambda(Pm) == pytest.approx(lam_P, abs=1e-12)
    assert cp_tp(Pm)[0] == pytest.approx(C, abs=5e-5)
    assert 1 / ((1 - pl[1]) * pl[0]) == pytest.approx(1 / Pm[0, 1])  # mean inactive run


def test_two_state_vectorised_and_broadcast():
    pi = np.array([0.1, 0.5, 0.9, 0.3])
    lam = np.array([0.9, -0.5, 0.0, 0.2])
    Ps = two_state(pi, lam)
    assert Ps.shape == (4, 2, 2)
    for k in range(4):
        np.testing.assert_array_equal(Ps[k], two_state(pi[k], lam[k]))
    np.testing.assert_allclose(Ps, explicit_two_state(pi, lam), atol=1e-15)
    assert two_state(pi, 0.3).shape == (4, 2, 2)
    assert two_state(np.full((2, 3), 0.4), 0.1).shape == (2, 3, 2, 2)


@pytest.mark.parametrize("pi", [0.1, 0.3, 0.5, 0.8])
def test_two_state_lower_boundary_is_admissible(pi):
    lo = max(lower_lam(pi), -1 + 1e-9)
    P = two_state(pi, lo)
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1, atol=1e-14)
    assert signed_lambda2(P) == pytest.approx(lo, abs=1e-9)


@pytest.mark.parametrize(
    "pi, lam, text",
    [
        (0.0, 0.5, "pi must lie in the open interval \\(0, 1\\), got 0.0"),
        (1.0, 0.5, "got 1.0"),
        (1.2, 0.5, "got 1.2"),
        (float("nan"), 0.5, "got nan"),
        (0.5, 1.0, "lam = 1.0"),
        (0.5, -1.0, "lam = -1.0"),
        (0.1, -0.2, r"lam = -0.2 .*\[-0.111111, 1\)"),
        (0.9, -0.12, r"lam = -0.12 .*\[-0.111111, 1\)"),
        ([0.2, 0.4], [0.1, 1.5], "lam = 1.5"),
    ],
)
def test_two_state_rejects(pi, lam, text):
    with pytest.raises(ValueError, match=text):
        two_state(pi, lam)


@given(st.floats(0.01, 1.0), st.floats(0.01, 1.0))
def test_rates_round_trip(a, b):
    assume(not (a == 1 and b == 1))
    P = two_state_from_rates(a, b)
    np.testing.assert_allclose(P, [[1 - a, a], [b, 1 - b]])
    pi, lam = rates_to_pi_lam(a, b)
    np.testing.assert_allclose(two_state(pi, lam), P, atol=1e-12)
    np.testing.assert_allclose(stationary(P), [1 - pi, pi], atol=1e-12)
    assert signed_lambda2(P) == pytest.approx(lam, abs=1e-12)


def test_rates_vectorised_and_rejects():
    a, b = np.array([0.1, 0.5]), np.array([0.2, 1.0])
    assert two_state_from_rates(a, b).shape == (2, 2, 2)
    pi, lam = rates_to_pi_lam(a, b)
    np.testing.assert_allclose(pi, a / (a + b))
    np.testing.assert_allclose(lam, 1 - a - b)
    for bad, text in [((0.0, 0.5), "a must lie in \\(0, 1\\], got 0.0"), ((0.5, 1.3), "b must .*got 1.3"), ((1.0, 1.0), "periodic")]:
        with pytest.raises(ValueError, match=text):
            two_state_from_rates(*bad)
        with pytest.raises(ValueError, match=text):
            rates_to_pi_lam(*bad)


# --------------------------------------------------------------------------------------
# general chains
# --------------------------------------------------------------------------------------
@given(chains())
def test_stationary_matches_numpy_eig(P):
    rho = stationary(P)
    assert rho.dtype == float and np.all(rho >= 0)
    assert rho.sum() == pytest.approx(1, abs=1e-12)
    np.testing.assert_allclose(rho, numpy_stationary(P), atol=1e-9)
    np.testing.assert_allclose(rho @ P, rho, atol=1e-10)


@given(chains())
def test_eigenvalues_order_and_slem(P):
    w = eigenvalues(P)
    ref = np.linalg.eigvals(P)
    assert w.size == ref.size
    # same multiset: every computed eigenvalue matched by a reference one
    for z in w:
        assert np.min(np.abs(ref - z)) < 1e-7
    assert abs(w[0] - 1) < 1e-9
    assert np.all(np.diff(w[1:].real) <= 1e-12)
    if not np.iscomplexobj(w):
        assert np.all(np.abs(ref.imag) <= 1e-10)
    rest = np.delete(ref, np.argmin(np.abs(ref - 1)))
    expected = np.abs(rest).max() if rest.size else 0.0
    assert slem(P) == pytest.approx(expected, abs=1e-9)
    assert cafed_lambda(P) == pytest.approx((1 + expected) / 2, abs=1e-9)
    assert absolute_spectral_gap(P) == pytest.approx(1 - expected, abs=1e-9)
    if rest.size and np.all(np.abs(ref.imag) <= 1e-10):
        assert signed_lambda2(P) == pytest.approx(rest.real.max(), abs=1e-9)


def test_non_reversible_chain_complex_spectrum():
    C = np.roll(np.eye(3), 1, axis=1)  # 3-cycle
    P = 0.5 * np.eye(3) + 0.5 * C  # lazy, non-reversible
    w = eigenvalues(P)
    assert np.iscomplexobj(w)
    z = 0.5 + 0.5 * np.exp(2j * np.pi / 3)
    np.testing.assert_allclose(w, [1, z, np.conj(z)], atol=1e-12)
    assert slem(P) == pytest.approx(abs(z)) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-real eigenvalue"):
        signed_lambda2(P)
    with pytest.raises(ValueError, match="non-real"):
        spectral_gap(P)
    np.testing.assert_allclose(stationary(P), [1 / 3] * 3)


def test_periodic_chain():
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert slem(P) == pytest.approx(1.0)
    for f in (cafed_lambda, relaxation_time):
        with pytest.raises(ValueError, match="periodic"):
            f(P)
    with pytest.raises(ValueError, match="10000000"):
        mixing_time(P)


def test_one_state_chain():
    P = np.array([[1.0]])
    assert slem(P) == 0.0
    assert cafed_lambda(P) == 0.5
    assert mixing_time(P) == 0
    assert cp_tp(P) == (0.0, 0)
    np.testing.assert_array_equal(stationary(P), [1.0])
    with pytest.raises(ValueError, match="no second eigenvalue"):
        signed_lambda2(P)


@pytest.mark.parametrize(
    "P, text",
    [
        ([[0.5, 0.5, 0.0]], "square"),
        ([[1.2, -0.2], [0.5, 0.5]], r"P\[0, 1\] = -0.2 is negative"),
        ([[0.5, 0.6], [0.5, 0.5]], "row 0 of P sums to 1.1"),
        ([[0.5, 0.5], [0.5, 0.5 + 1e-9]], "row 1 of P sums to 1.000000001"),
        ([[float("nan"), 1.0], [0.5, 0.5]], "nan is not finite"),
        ([[1.0, 0.0], [0.0, 1.0]], "reducible \\(2 communicating classes\\)"),
        ([[1.0, 0.0], [0.5, 0.5]], "reducible"),
    ],
)
def test_general_chain_rejects(P, text):
    for f in (stationary, eigenvalues, slem, signed_lambda2, cafed_lambda, cp_tp, mixing_time):
        with pytest.raises(ValueError, match=text):
            f(P)


# --------------------------------------------------------------------------------------
# C_P and the geometric-mixing inequality (5)
# --------------------------------------------------------------------------------------
def assert_inequality_5(P, rho, C, lam_P, t_max=199):
    Pt = np.eye(P.shape[0])
    for t in range(t_max + 1):
        assert np.abs(Pt - rho).max() <= C * lam_P**t * (1 + 1e-9) + 1e-14, t
        Pt = Pt @ P


@pytest.mark.parametrize("pl, P, lam_P, C", VECTORS)
def test_inequality_5_two_state_vectors(pl, P, lam_P, C):
    pi, lam = pl
    P = two_state(pi, lam)
    C_P, T_P = cp_tp(P)
    rho = np.array([1 - pi, pi])
    assert_inequality_5(P, rho, C_P, cafed_lambda(P))
    # exact t-step deviation |lam|^t max(pi, 1 - pi), tighter than (5)
    Pt = np.eye(2)
    for t in range(60):
        assert np.abs(Pt - rho).max() == pytest.approx(abs(lam) ** t * max(pi, 1 - pi), abs=1e-13)
        Pt = Pt @ P


def test_product_vector_34_7123():
    chain = product_chain(two_state(*PRODUCT3))
    assert math.exp(chain.log_cp()) == pytest.approx(34.7123, abs=5e-4)
    closed = math.sqrt(7) * np.prod([2 * math.sqrt(2) * math.sqrt(p**2 + (1 - p) ** 2) for p in PRODUCT3[0]])
    assert math.exp(chain.log_cp()) == pytest.approx(closed, rel=1e-12)
    P = chain.matrix()
    moduli = np.sort(np.abs(np.linalg.eigvals(P)))[::-1]
    np.testing.assert_allclose(moduli, [1, 0.9, 0.3, 0.27, 0.01, 0.009, 0.003, 0.0027], atol=1e-12)
    assert chain.slem() == pytest.approx(0.9)
    rho = chain.stationary()
    np.testing.assert_allclose(rho @ P, rho, atol=1e-14)
    np.testing.assert_allclose(rho, numpy_stationary(P), atol=1e-12)
    assert_inequality_5(P, rho, math.exp(chain.log_cp()), chain.cafed_lambda())
    assert chain.tp() == 0


@given(chains(min_size=2, max_size=5))
def test_cp_tp_general_chain_satisfies_5(P):
    try:
        C, T = cp_tp(P)
    except ValueError as err:  # numerically defective draws are allowed to be refused
        assert "defective" in str(err)
        return
    assert T == 0
    w, U = np.linalg.eig(P)
    U = U / np.linalg.norm(U, axis=0)
    assume(np.linalg.cond(U) < 1e8)
    ref = math.sqrt(P.shape[0] - 1) * np.linalg.norm(U) * np.linalg.norm(np.linalg.inv(U))
    assert C == pytest.approx(ref, rel=1e-6)
    assert_inequality_5(P, numpy_stationary(P), C, cafed_lambda(P), t_max=60)


def test_cp_tp_rejects_defective():
    # P = 1 rho^T + c u v^T with u, v orthogonal to 1 and to each other: a nilpotent part,
    # so eigenvalue 0 has a 2x2 Jordan block.
    u, v = np.array([1.0, -1.0, 0.0]), np.array([1.0, 1.0, -2.0])
    P = np.full((3, 3), 1 / 3) + 0.1 * np.outer(u, v)
    assert np.all(P >= 0)
    assert np.linalg.matrix_rank(P) == 2  # eigenvalue 0 twice but one eigenvector
    with pytest.raises(ValueError, match="defective"):
        cp_tp(P)
    with pytest.raises(ValueError, match="defective"):
        product_chain([P, two_state(0.3, 0.2)]).log_cp()


# --------------------------------------------------------------------------------------
# product chains vs the explicit Kronecker product
# --------------------------------------------------------------------------------------
@pytest.mark.slow
@given(st.lists(pi_lam(), min_size=2, max_size=8))
def test_product_chain_spectrum_vs_kronecker(params):
    pi, lam = (np.array(v) for v in zip(*params))
    chain = product_chain(two_state(pi, lam))
    N = len(params)
    assert chain.n_states == 2**N and isinstance(chain.n_states, int)
    P = kron_all(explicit_two_state(pi, lam))
    np.testing.assert_allclose(chain.matrix(), P, atol=1e-15)
    rho = kron_all([np.array([1 - p, p])[None] for p in pi]).ravel()
    np.testing.assert_allclose(chain.stationary(), rho, atol=1e-15)
    np.testing.assert_allclose(chain.marginals, np.stack([1 - pi, pi], 1), atol=1e-15)
    # SLEM from a numerical eigendecomposition of the explicit product
    w = np.linalg.eigvals(P)
    rest = np.delete(w, np.argmin(np.abs(w - 1)))
    assert chain.slem() == pytest.approx(np.abs(rest).max(), abs=1e-8)
    assert chain.cafed_lambda() == pytest.approx(np.max((1 + np.abs(lam)) / 2), abs=1e-12)  # Prop. 6
    # signed lambda_2 from the symmetrised (reversible) product, an independent route
    d = np.sqrt(rho)
    S = d[:, None] * P / d[None, :]
    ws = np.sort(np.linalg.eigvalsh((S + S.T) / 2))[::-1]
    assert chain.signed_lambda2() == pytest.approx(ws[1], abs=1e-8)
    assert chain.spectral_gap() == pytest.approx(1 - ws[1], abs=1e-8)


@given(st.lists(pi_lam(), min_size=2, max_size=6))
def test_product_log_cp_vs_explicit_kronecker_eigenvectors(params):
    pi, lam = (np.array(v) for v in zip(*params))
    chain = product_chain(two_state(pi, lam))
    Us = []
    for P in explicit_two_state(pi, lam):
        _, U = np.linalg.eig(P)
        Us.append(U / np.linalg.norm(U, axis=0))
    U = kron_all(Us)
    M = U.shape[0]
    ref = 0.5 * math.log(M - 1) + math.log(np.linalg.norm(U)) + math.log(np.linalg.norm(np.linalg.inv(U)))
    assert chain.log_cp() == pytest.approx(ref, abs=1e-8)
    np.testing.assert_allclose(np.linalg.norm(U, axis=0), 1.0)  # unit columns survive the Kronecker product


def test_product_log_cp_matches_cp_tp_when_spectrum_is_simple():
    # distinct per-client eigenvalues whose products are all distinct: eigenvectors unique
    pi, lam = [0.1, 0.6, 0.35, 0.8], [0.9, -0.3, 0.5, 0.2]
    chain = product_chain(two_state(pi, lam))
    w = np.linalg.eigvals(chain.matrix())
    assert np.min(np.diff(np.sort(w.real))) > 1e-3
    assert chain.log_cp() == pytest.approx(math.log(cp_tp(chain.matrix())[0]), abs=1e-9)


def test_product_repeated_eigenvalues_cp_is_convention_dependent_but_valid():
    # identical lambdas (as in CA-Fed's experiments) make eigenvalues repeat; the Kronecker
    # eigenbasis and numpy's basis give different C_P, and both satisfy (5).
    chain = product_chain(two_state([0.1, 0.3, 0.6], 0.9))
    P, rho = chain.matrix(), chain.stationary()
    C_kron = math.exp(chain.log_cp())
    assert_inequality_5(P, rho, C_kron, chain.cafed_lambda())
    assert_inequality_5(P, rho, cp_tp(P)[0], cafed_lambda(P))


def test_product_log_cp_large_n():
    pi = np.repeat([0.1, 0.9], 50)
    chain = product_chain(two_state(pi, 0.9))
    assert chain.n_states == 2**100
    expected = 0.5 * math.log(2**100 - 1) + 100 * math.log(2 * math.sqrt(2) * math.sqrt(0.82))
    assert chain.log_cp() == pytest.approx(expected, rel=1e-12)
    assert chain.log_cp() == pytest.approx(128.7, abs=0.05)
    assert chain.cafed_lambda() == pytest.approx(0.95)
    with pytest.raises(ValueError, match=str(2**100)):
        chain.matrix()


def test_product_explicit_size_limit():
    chain = product_chain(two_state(np.full(13, 0.4), 0.2))
    for f in (chain.matrix, chain.stationary):
        with pytest.raises(ValueError, match="would have 8192 states"):
            f()
    assert product_chain(two_state(np.full(5, 0.4), 0.2)).matrix().shape == (32, 32)


def test_product_signed_lambda2_negative_pairs():
    # two clients with lam = -0.9 give the product eigenvalue +0.81 > max_k lam_k
    chain = product_chain(two_state([0.5, 0.5, 0.3], [-0.9, -0.9, 0.1]))
    assert chain.signed_lambda2() == pytest.approx(0.81)
    ws = np.sort(np.linalg.eigvals(chain.matrix()).real)[::-1]
    assert chain.signed_lambda2() == pytest.approx(ws[1])
    assert chain.slem() == pytest.approx(0.9)


@given(chains(min_size=2, max_size=4), chains(min_size=1, max_size=3), pi_lam())
def test_product_general_factors_vs_kronecker(P1, P2, pl):
    P3 = two_state(*pl)
    chain = product_chain([P1, P2, P3])
    P = kron_all([P1, P2, P3])
    assert chain.n_states == P.shape[0]
    np.testing.assert_allclose(chain.matrix(), P, atol=1e-15)
    rho = chain.stationary()
    np.testing.assert_allclose(rho, numpy_stationary(P), atol=1e-8)
    w = np.linalg.eigvals(P)
    rest = np.delete(w, np.argmin(np.abs(w - 1)))
    assert chain.slem() == pytest.approx(np.abs(rest).max(), abs=1e-7)
    assert isinstance(chain.marginals, tuple) or chain.marginals.shape[0] == 3


@pytest.mark.parametrize(
    "Ps, text",
    [
        ([[[0.0, 1.0], [1.0, 0.0]]], "periodic"),
        ([[[1.0, 0.0], [0.3, 0.7]]], "reducible"),
        ([[[0.5, 0.6], [0.3, 0.7]]], r"row 0 of Ps\[0\] sums to 1.1"),
        ([[[0.5, 0.5], [0.3, 0.7]], [[1.5, -0.5], [0.3, 0.7]]], r"Ps\[1, 0, 1\] = -0.5"),
        ([np.eye(3)], "reducible"),
        ([], "at least one factor"),
    ],
)
def test_product_chain_rejects(Ps, text):
    with pytest.raises(ValueError, match=text):
        ProductChain(Ps if not (Ps and np.ndim(Ps) == 3) else np.array(Ps))


# --------------------------------------------------------------------------------------
# mixing time
# --------------------------------------------------------------------------------------
@pytest.mark.slow
@given(chains(min_size=2, max_size=5), st.floats(0.02, 0.6))
def test_mixing_time_vs_brute_force(P, eps):
    rho = numpy_stationary(P)
    d = tv_distances(P, rho, 3000)
    hit = np.flatnonzero(d <= eps)
    assume(hit.size)
    assume(np.min(np.abs(d[: hit[0] + 1] - eps)) > 1e-9)
    assert mixing_time(P, eps) == hit[0]


@given(pi_lam(lam_max=0.995), st.floats(0.01, 0.9))
def test_mixing_time_two_state_closed_form(pl, eps):
    pi, lam = pl
    m = max(pi, 1 - pi)
    t = 0
    while abs(lam) ** t * m > eps:  # d(t) = |lam|^t max(pi, 1 - pi)
        t += 1
    assume(abs(abs(lam) ** t * m - eps) > 1e-9 and (t == 0 or abs(abs(lam) ** (t - 1) * m - eps) > 1e-9))
    assert mixing_time(two_state(pi, lam), eps) == t


def test_mixing_time_long_and_bounds():
    pi, lam = 0.3, 0.9999
    P = two_state(pi, lam)
    t = mixing_time(P, 0.1)
    expected = math.ceil(math.log(0.1 / 0.7) / math.log(lam))
    assert t == expected
    # Levin-Peres bounds recalled by CA-Fed (App. F1)
    t_rel = relaxation_time(P)
    assert (t_rel - 1) * math.log(1 / 0.2) <= t <= math.log(1 / (0.1 * 0.3)) * t_rel
    with pytest.raises(ValueError, match="10000000"):
        mixing_time(two_state(0.5, 1 - 1e-9))
    for eps in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match=f"eps must lie in \\(0, 1\\), got {eps}"):
            mixing_time(P, eps)


# --------------------------------------------------------------------------------------
# mixing lag J_t
# --------------------------------------------------------------------------------------
def test_mixing_lag_hand_values():
    C, H, lam = 2.5612, 1.0, 0.95
    # ln(2*2.5612*1000)/ln(1/0.95) = 166.5 -> 167
    assert mixing_lag(1000, C, H, lam) == 167
    assert mixing_lag(10, C, H, lam) == 10  # capped at t
    assert mixing_lag(1000, C, H, lam, T_P=200) == 200
    assert mixing_lag(1000, log_C_P=math.log(C), H=H, lam_P=lam) == 167
    assert mixing_lag(1, 0.1, 1.0, 0.5) == 0  # 2 C_P H t < 1: printed definition gives 0
    # exact integer ratio: ln(2*0.5*1*8)/ln 2 = 3 exactly
    assert mixing_lag(8, 0.5, 1.0, 0.5) == 3


def test_mixing_lag_huge_cp_in_log_space():
    log_c = 128.7
    assert mixing_lag(200, None, 1.0, 0.95, log_C_P=log_c) == 200
    t = 10**6
    expected = math.ceil((math.log(2) + log_c + math.log(t)) / math.log(1 / 0.95))
    assert mixing_lag(t, None, 1.0, 0.95, log_C_P=log_c) == expected
    # an exact huge integer C_P and its log agree
    assert mixing_lag(10**9, 2**400, 1.0, 0.9) == mixing_lag(10**9, H=1.0, lam_P=0.9, log_C_P=400 * math.log(2))
    ts = np.array([1, 10, 100, 10**4, 10**7])
    np.testing.assert_array_equal(
        mixing_lag(ts, None, 2.0, 0.9, log_C_P=5.0), [mixing_lag(int(s), None, 2.0, 0.9, log_C_P=5.0) for s in ts]
    )


@given(
    st.integers(1, 10**6), st.floats(-5, 200), st.floats(1e-3, 1e3), st.floats(0.5, 0.999), st.integers(0, 50)
)
def test_mixing_lag_properties(t, log_c, H, lam, T_P):
    J = mixing_lag(t, None, H, lam, T_P, log_C_P=log_c)
    assert min(T_P, t) <= J <= t
    ratio = (math.log(2 * H * t) + log_c) / math.log(1 / lam)
    assume(abs(ratio - round(ratio)) > 1e-6)
    if T_P < J < t:  # uncapped: (158) holds and J is the smallest such integer
        assert log_c + J * math.log(lam) <= -math.log(2 * H * t) + 1e-9
        assert log_c + (J - 1) * math.log(lam) > -math.log(2 * H * t)


@pytest.mark.parametrize(
    "args, kwargs, text",
    [
        ((0, 2.0, 1.0, 0.9), {}, "t must be >= 1.*got 0"),
        ((5, 2.0, 1.0, 1.0), {}, "lam_P must lie in \\(0, 1\\), got 1.0"),
        ((5, -2.0, 1.0, 0.9), {}, "C_P must be a finite number > 0, got -2.0"),
        ((5, 2.0, 0.0, 0.9), {}, "H must be a finite number > 0, got 0.0"),
        ((5, 2.0, 1.0, 0.9, -1), {}, "T_P must be an integer ≥ 0, got -1"),
        ((5, 2.0, 1.0, 0.9), {"log_C_P": 1.0}, "exactly one"),
        ((5, None, 1.0, 0.9), {}, "exactly one"),
        ((2.5, 2.0, 1.0, 0.9), {}, "t must be an integer"),
    ],
)
def test_mixing_lag_rejects(args, kwargs, text):
    with pytest.raises(ValueError, match=text):
        mixing_lag(*args, **kwargs)


# --------------------------------------------------------------------------------------
# estimating (pi, lambda) from traces
# --------------------------------------------------------------------------------------
PI20 = np.linspace(0.2, 0.8, 20)
LAM20 = np.linspace(-0.1, 0.85, 20)[np.random.default_rng(7).permutation(20)]


@pytest.fixture(scope="module")
def long_trace():
    return simulate(PI20, LAM20, 200_000, np.random.default_rng(2023))


@pytest.mark.slow
def test_estimate_long_trace_within_4_stderr(long_trace):
    est = estimate(long_trace)
    assert isinstance(est, AvailabilityEstimate)
    pi_hat, lam_hat = est
    assert np.all(np.abs(pi_hat - PI20) <= 4 * est.pi_stderr)
    assert np.all(np.abs(lam_hat - LAM20) <= 4 * est.lam_stderr)
    assert np.all(est.lam_stderr < 0.01) and np.all(est.pi_stderr < 0.01)
    assert est.transitions.shape == (20, 2, 2)
    np.testing.assert_array_equal(est.transitions.sum(axis=(1, 2)), 200_000 - 1)
    # the same trace as a Trace object gives the same numbers
    est2 = estimate(Trace(long_trace[:5000]))
    np.testing.assert_array_equal(est2.lam, estimate(long_trace[:5000]).lam)


def test_estimate_stderr_matches_replicate_spread():
    reps, rounds = 200, 4000
    pi = np.tile(PI20, reps)
    lam = np.tile(LAM20, reps)
    traces = simulate(pi, lam, rounds, np.random.default_rng(99))  # column r*20 + k = client k, replicate r
    est = estimate(traces)
    lam_hat = est.lam.reshape(reps, 20)
    pi_hat = est.pi.reshape(reps, 20)
    for hat, se in ((lam_hat, est.lam_stderr.reshape(reps, 20)), (pi_hat, est.pi_stderr.reshape(reps, 20))):
        ratio = hat.std(axis=0, ddof=1) / np.sqrt(np.mean(se**2, axis=0))
        assert np.all((ratio > 0.8) & (ratio < 1.2)), ratio
    # and the estimators are unbiased to within their replicate standard error
    assert np.all(np.abs(lam_hat.mean(0) - LAM20) < 4 * lam_hat.std(0) / np.sqrt(reps) + 2e-3)
    assert np.all(np.abs(pi_hat.mean(0) - PI20) < 4 * pi_hat.std(0) / np.sqrt(reps))


@given(st.integers(1, 40), st.integers(1, 5), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.5, 3.0]))
def test_estimate_counts_vs_python_loop(rounds, n, seed, prior):
    mask = np.random.default_rng(seed).random((rounds, n)) < 0.5
    est = estimate(mask.astype(int), prior=prior)
    for k in range(n):
        N = np.zeros((2, 2), dtype=int)
        for s in range(1, rounds):
            N[int(mask[s - 1, k]), int(mask[s, k])] += 1
        np.testing.assert_array_equal(est.transitions[k], N)
        assert est.pi[k] == pytest.approx(mask[:, k].mean())
        n0, n1 = N[0].sum() + 2 * prior, N[1].sum() + 2 * prior
        if n0 > 0 and n1 > 0:
            p00, p11 = (N[0, 0] + prior) / n0, (N[1, 1] + prior) / n1
            assert est.lam[k] == pytest.approx(p00 + p11 - 1)
            assert est.lam_stderr[k] == pytest.approx(math.sqrt(p00 * (1 - p00) / n0 + p11 * (1 - p11) / n1))
        else:
            assert np.isnan(est.lam[k]) and np.isnan(est.lam_stderr[k]) and np.isnan(est.pi_stderr[k])


def test_estimate_missing_state_and_prior():
    mask = np.zeros((10, 2), dtype=bool)
    mask[:, 1] = True  # client 1 always active
    mask[3:6, 0] = True
    with np.errstate(all="raise"):
        est = estimate(mask)
    assert np.isnan(est.lam[1]) and np.isnan(est.lam_stderr[1]) and np.isnan(est.pi_stderr[1])
    assert est.pi[1] == 1.0 and np.isfinite(est.lam[0])
    smoothed = estimate(mask, prior=1.0)
    assert np.all(np.isfinite(smoothed.lam)) and np.all(np.isfinite(smoothed.lam_stderr))
    # client 1: N11 = 9, n1 = 9 -> p11 = 10/11; n0 = 0 -> p00 = 1/2
    assert smoothed.lam[1] == pytest.approx(10 / 11 + 1 / 2 - 1)
    np.testing.assert_array_equal(smoothed.pi, est.pi)  # the prior touches lambda only


@pytest.mark.parametrize(
    "trace, prior, text",
    [
        (np.zeros((5, 2), int), -1.0, "prior must be a finite number >= 0, got -1.0"),
        (np.zeros((5, 2), int), float("nan"), "got nan"),
        (np.array([[0, 2], [1, 1]]), 0.0, "found 2"),
        (np.zeros(5, int), 0.0, "shape"),
    ],
)
def test_estimate_rejects(trace, prior, text):
    with pytest.raises(ValueError, match=text):
        estimate(trace, prior=prior)


def test_transition_counts_are_the_counts_of_the_definition_over_any_leading_axes():
    """N_xy counted one (replicate, client, round) at a time, against the vectorised counts of a
    (reps, T, N) batch; ``estimate`` reports the same counts for each mask."""
    from participation.markov import estimate, transition_counts

    rng = np.random.default_rng(7)
    batch = rng.random((3, 25, 4)) < np.array([0.1, 0.5, 0.9, 1.0])
    batch[1, :, 0] = False                      # a client never present
    counts = transition_counts(batch)
    assert counts.shape == (3, 4, 2, 2) and counts.dtype == np.int64
    for r in range(3):
        for i in range(4):
            loop = np.zeros((2, 2), dtype=np.int64)
            for t in range(24):
                loop[int(batch[r, t, i]), int(batch[r, t + 1, i])] += 1
            assert np.array_equal(counts[r, i], loop), (r, i)
        assert np.array_equal(estimate(batch[r]).transitions, counts[r])
