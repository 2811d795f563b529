"""What the ServerApp and the ClientApp share: the problem and the clients' local SGD.

A quadratic problem with exact constants (so that the record's header can carry L, σ², Δ_f and
F_0 measured in closed form), N = 6 clients, dimension 3, noise-free gradients.
"""
from algorithms.problems import Quadratic

N_CLIENTS = 6
ETA_L = 0.2          # local step size η_l
LOCAL_STEPS = 2      # K
NOISE_SEED = 5       # the clients' gradient noise streams, algorithms.NoiseStream(NOISE_SEED)

problem = Quadratic.random(N_CLIENTS, 3, noise_std=0.0, seed=1)


def constants() -> dict:
    """The problem's constants for the record's header, in closed form."""
    c = problem.constants()
    return {"L": c.L, "sigma2": c.sigma2, "delta_f": c.delta_f, "F0": c.F0, "source": "Quadratic.constants (exact)"}
