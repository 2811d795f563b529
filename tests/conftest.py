import os

from hypothesis import HealthCheck, settings

# CI profile: bounded and derandomised, so the suite is fast and reproducible.
settings.register_profile("ci", max_examples=40, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


try:  # the suite's tensors are tiny: intra-op threads only contend (badly on a busy machine)
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
