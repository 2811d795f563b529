"""What the ServerApp and the ClientApp share: the problem and the clients' local SGD.

A quadratic problem with exact constants (so that the record's header can carry L, σ², Δ_f and
F_0 measured in closed form), N = 6 clients, dimension 3, noise-free gradients. The local step
size is one Server momentum Thm 4.6 admits for this problem with the run config's FedAvgM
(η' = 0.5, β = 0.8, so η = η'/(1 − β) = 2.5), K = 2, T = 10 and m = 2: η_l ≤ 1/(8KL) and the
two sampling caps of the theorem (Sun et al., AAAI 2024, arXiv:2312.12670) hold at 0.0005 and
fail at 0.001 (``fedverify bound momentum.theorem_4_6`` shows them).
"""
from algorithms.problems import Quadratic

N_CLIENTS = 6
ETA_L = 0.0005       # local step size η_l
LOCAL_STEPS = 2      # K
NOISE_SEED = 5       # the clients' gradient noise streams, algorithms.NoiseStream(NOISE_SEED)

problem = Quadratic.random(N_CLIENTS, 3, noise_std=0.0, seed=1)


def constants() -> dict:
    """The problem's constants for the record's header, in closed form."""
    c = problem.constants()
    return {"L": c.L, "sigma2": c.sigma2, "delta_f": c.delta_f, "F0": c.F0, "source": "Quadratic.constants (exact)"}
