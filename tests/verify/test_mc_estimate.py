"""The time `mc` and `delays` announce for a Monte-Carlo run is that of the chunks and replicates
``monte_carlo`` will draw. Checked against a clock that charges each call what a sampler costs
(its tables once, a fixed part per chunk and a part per replicate), not against wall-clock time:
counting a chunk's fixed part once per replicate announced P3's 0.15 s at 8 s."""
import math

import pytest

import participation.expected as expected
from participation.expected.montecarlo import _plan
from participation.patterns import preset
from verify.cli.commands import _mc_seconds

TABLES, PER_CHUNK, PER_REPLICATE = 0.02, 3e-3, 1.5e-4


class _Result:
    def __init__(self, method):
        self.method = method


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only by what the fake ``monte_carlo`` charges."""
    now = [0.0]
    built = set()
    monkeypatch.setattr("time.perf_counter", lambda: now[0])

    def fake(pattern, rounds, reps, seed, progress=False, method="auto"):
        sampler, _, size = _plan(pattern, rounds, reps, method, None, None)
        if sampler.method == "trace":          # whole traces; a deterministic pattern's one serves every replicate
            now[0] += (1 if pattern.deterministic else reps) * rounds * pattern.n_clients * 1e-8
        else:
            if rounds not in built:
                built.add(rounds)
                now[0] += TABLES
            now[0] += math.ceil(reps / size) * PER_CHUNK + reps * PER_REPLICATE
        return _Result(sampler.method)

    monkeypatch.setattr(expected, "monte_carlo", fake)
    return now


@pytest.mark.parametrize("rounds, reps", [(2000, 1000), (20000, 1000), (200, 100000), (2000, 1)])
def test_the_estimate_counts_chunks_and_replicates(clock, rounds, reps):
    pattern = preset("P3")
    sampler, _, size = _plan(pattern, rounds, reps, "auto", None, None)
    assert sampler.method != "trace"
    expected_seconds = math.ceil(reps / size) * PER_CHUNK + reps * PER_REPLICATE
    assert _mc_seconds(pattern, rounds, reps) == pytest.approx(expected_seconds, rel=1e-6)


@pytest.mark.parametrize("name, drawn", [("P1", 50), ("case3", 1)])
def test_the_estimate_of_whole_traces_counts_the_traces_drawn(clock, name, drawn):
    pattern = preset(name, n_clients=1000, per_round=200)
    rounds, reps = 20000, 50
    assert _mc_seconds(pattern, rounds, reps, "trace") == pytest.approx(drawn * rounds * 1000 * 1e-8, rel=1e-6)
