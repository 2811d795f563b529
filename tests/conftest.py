import os
import sys

# One thread per process for everything the suite starts (subprocesses, notebook kernels):
# on a busy two-core machine, intra-op thread pools only contend, and a command that took
# 60 s alone took over 10 minutes.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import HealthCheck, settings

# CI profile: bounded and derandomised, so the suite is fast and reproducible.
settings.register_profile("ci", max_examples=40, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# torch is never imported here: it costs seconds, and the folders that need no torch
# (bounds/, participation/) are collected without it. Whoever imports torch (a test module,
# or a library call inside a test) gets one intra-op thread: OMP_NUM_THREADS above is its
# default, and the hook below pins it before every test once torch is loaded (the suite's
# tensors are tiny: intra-op threads only contend, badly on a busy machine).
_torch_pinned = False


def pytest_runtest_setup(item):
    global _torch_pinned
    if not _torch_pinned and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
        _torch_pinned = True
