import os
import sys

# One thread per process for everything the suite starts (subprocesses, notebook kernels):
# on a busy two-core machine, intra-op thread pools only contend.
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


# Every test leaves this process's Ctrl-C and SIGTERM as it found them: handlers and the
# signal mask. A child process inherits both, and Python started with SIGINT blocked or
# ignored never raises KeyboardInterrupt, so one leaked block would make a later test's
# "Ctrl-C ends the command in one line" pass or fail by the order the tests ran in.
_SIGNALS = ("SIGINT", "SIGTERM")


def pytest_runtest_call(item):
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    numbers = [getattr(signal, name) for name in _SIGNALS]
    handlers = {n: signal.getsignal(n) for n in numbers}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if hasattr(signal, "pthread_sigmask") else None
    item._signals_found = (handlers, mask)


def pytest_runtest_teardown(item):
    import signal

    found = getattr(item, "_signals_found", None)
    if found is None:
        return
    handlers, mask = found
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for number, handler in handlers.items():
        if handler is not None and signal.getsignal(number) is not handler:
            signal.signal(number, handler)


# CI installs Flower (make flower) and sets FEDVERIFY_REQUIRE_FLOWER=1: a test skipped there for
# lack of Flower or Ray is a failure, so the integration cannot rot behind a skip.
_FLOWER_SKIPS = ("'flwr'", "'ray'", "Flower (flwr) is not installed", "needs Ray")


def pytest_runtest_makereport(item, call):
    if call.when not in ("setup", "call") or not os.environ.get("FEDVERIFY_REQUIRE_FLOWER"):
        return None
    from _pytest.outcomes import Skipped

    if call.excinfo is not None and call.excinfo.errisinstance(Skipped):
        reason = str(call.excinfo.value)
        if any(s in reason for s in _FLOWER_SKIPS):
            from _pytest.reports import TestReport

            report = TestReport.from_item_and_call(item, call)
            report.outcome = "failed"
            report.longrepr = f"skipped for lack of Flower although FEDVERIFY_REQUIRE_FLOWER is set: {reason}"
            return report
    return None


def pytest_collection_modifyitems(config, items):
    """The longest tests first, then the other slow ones, then the rest (stable, so each group
    keeps its order): a long test starts early and the short ones fill in around it, instead of
    one worker running a long test while the other has finished. What a test asserts does not
    depend on the order."""
    items.sort(key=lambda item: (item.get_closest_marker("longest") is None, item.get_closest_marker("slow") is None))
