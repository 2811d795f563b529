"""Monte-Carlo on whole traces too large to hold: generated and consumed a window of rounds
at a time, with the same replicates as whole traces and memory O(N + one window)."""
from __future__ import annotations

import numpy as np
import pytest

from participation.expected import montecarlo as mc
from participation.patterns import Sine, preset


@pytest.mark.parametrize("pattern", [preset("P2", n_clients=40), preset("P3", n_clients=40),
                                     Sine(40, 0.3, amplitude=0.4, offset=0.6, period=20.0), preset("H8", n_clients=40)],
                         ids=["P2", "P3", "sine", "H8"])
def test_windows_give_the_replicates_of_whole_traces(monkeypatch, pattern):
    whole = mc.monte_carlo(pattern, 1100, 6, seed=4, method="trace", keep_samples=True, progress=False)
    monkeypatch.setattr(mc, "CHUNK_CELLS", 300 * 40)        # windows of one block of 256 rounds
    assert mc.stream_window(40) == 256
    streamed = mc.monte_carlo(pattern, 1100, 6, seed=4, method="trace", keep_samples=True, progress=False,
                              chunk_size=4)
    assert np.array_equal(whole.samples["tau_max"], streamed.samples["tau_max"])
    assert np.allclose(whole.samples["tau_avg"], streamed.samples["tau_avg"], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_a_trace_larger_than_the_memory_limit_still_runs(monkeypatch):
    """N = 2000, T = 20,000: 40 M cells, whose whole mask and packed copies are refused under a
    0.05 GB limit; in windows of 2^21 cells the same replicate runs."""
    monkeypatch.setenv("FEDVERIFY_MEMORY_GB", "0.05")
    pattern = preset("P2", n_clients=2000)
    with monkeypatch.context() as whole:
        whole.setattr(mc, "CHUNK_CELLS", 10**12)
        with pytest.raises(ValueError, match="memory limit"):
            mc.monte_carlo(pattern, 20_000, 1, seed=0, method="trace", progress=False)
    monkeypatch.setattr(mc, "CHUNK_CELLS", 1 << 21)
    result = mc.monte_carlo(pattern, 20_000, 1, seed=0, method="trace", progress=False, keep_samples=True)
    tau_max, tau_avg = result.samples["tau_max"][0], result.samples["tau_avg"][0]
    assert 0 < tau_avg <= tau_max < 20_000


def test_streamed_replicates_show_progress_a_window_at_a_time(monkeypatch):
    """A few replicates over a long horizon: the bar counts rounds, window by window, so it moves
    (and gives the time left) inside a chunk; the numbers do not depend on it."""
    import tqdm.auto

    pattern = preset("P2", n_clients=40)
    quiet = mc.monte_carlo(pattern, 1100, 3, seed=4, method="trace", keep_samples=True, progress=False)
    monkeypatch.setattr(mc, "CHUNK_CELLS", 300 * 40)        # windows of 256 rounds, one replicate a chunk
    updates, totals = [], []

    class Bar:
        def __init__(self, *args, total=None, **kwargs):
            totals.append(total)

        def update(self, n):
            updates.append(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    shown = mc.monte_carlo(pattern, 1100, 3, seed=4, method="trace", keep_samples=True, chunk_size=1)
    assert totals == [3 * 1100] and sum(updates) == 3 * 1100 and len(updates) == 3 * 5   # 4 windows of 256, one of 76
    assert np.array_equal(shown.samples["tau_max"], quiet.samples["tau_max"])
    assert np.allclose(shown.samples["tau_avg"], quiet.samples["tau_avg"], rtol=0, atol=1e-12)
