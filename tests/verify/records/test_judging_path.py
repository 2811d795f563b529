"""One judging path for records and runs: the FedSUM names read from ``bounds.fedsum``, the
"tests no theorem" note written in one place, and τ computed once per trace within one check."""
import collections
import re
from pathlib import Path

import numpy as np
import pytest

import algorithms
import bounds.fedsum
from algorithms.problems import Quadratic
from participation import Trace, preset
from verify.checking import check
from verify.records import record_from_history

VERIFY = Path(__file__).resolve().parents[3] / "verify"
#: The judging path: record checks and the theorems' plans and judge.
JUDGING = [VERIFY / "records" / "checks.py", *sorted((VERIFY / "theorems").glob("*.py"))]


def _code(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_fedsum_names_are_read_from_bounds_fedsum():
    literal = re.compile(r"""\(\s*["']fedsum-b["']\s*,\s*["']fedsum["']\s*,\s*["']fedsum-cr["']\s*\)""")
    written = [p.name for p in JUDGING if literal.search(_code(p))]
    assert not written, f"the FedSUM variants are written out in {written}: read bounds.fedsum.ALGORITHMS"
    from verify.theorems import delay

    assert delay.fedsum.ALGORITHMS is bounds.fedsum.ALGORITHMS


def test_the_note_that_tests_no_theorem_is_written_once():
    from verify.theorems.delay import REFERENCE_ONLY

    holders = [p.name for p in JUDGING if "tests no theorem\"" in _code(p)]
    assert holders == ["delay.py"] and REFERENCE_ONLY.endswith("tests no theorem")


@pytest.fixture
def delay_calls(monkeypatch):
    """Counts ``delay_metrics`` calls per trace (by its mask) in every module of ``verify`` that
    holds it (the delay plan, the judge, whichever imports it)."""
    import sys

    import verify.records.checks  # noqa: F401
    import verify.theorems.delay
    import verify.theorems.runner  # noqa: F401
    from participation.delays import delay_metrics

    calls = collections.Counter()

    def counted(trace):
        mask = np.asarray(trace.mask if hasattr(trace, "mask") else trace, dtype=bool)
        calls[(mask.shape, mask.tobytes())] += 1
        return delay_metrics(trace)

    holders = [m for name, m in list(sys.modules.items())
               if name.split(".")[0] in ("verify", "participation") and getattr(m, "delay_metrics", None) is delay_metrics]
    assert verify.theorems.delay in holders
    for module in holders:
        monkeypatch.setattr(module, "delay_metrics", counted)
    return calls


@pytest.fixture(scope="module")
def quadratic():
    return Quadratic.random(6, 3, heterogeneity=1.0, noise_std=0.5, seed=0)


@pytest.mark.parametrize("theorem, source", [
    ("fedsum.theorem_4_1", "trace"),
    ("fedsum.corollary_4_1", "trace"),           # the one fixed trace standing for the expectation
    ("fedsum.corollary_4_1", "pattern"),         # fresh traces, one per seed
])
def test_check_computes_tau_once_per_trace(quadratic, delay_calls, theorem, source):
    pattern = preset("P2", n_clients=6, per_round=2)
    given = pattern.sample(20, seed=3) if source == "trace" else pattern
    res = check("fedsum", quadratic, given, theorem, seeds=3, rounds=20)
    assert delay_calls and set(delay_calls.values()) == {1}, list(delay_calls.values())
    assert sum(delay_calls.values()) == len(res.per_trace_tau)


def test_check_run_computes_tau_once_per_record(tmp_path, delay_calls):
    problem = Quadratic.random(4, 3, heterogeneity=1.0, noise_std=0.5, seed=1)
    trace = Trace(np.random.default_rng(2).random((15, 4)) < 0.5)
    steps = {"eta_l": 0.05, "eta_g": 1.0}
    alg = algorithms.get("fedavg", eta_l=0.05, eta_g=1.0, local_steps=2)
    paths = [record_from_history(tmp_path / f"r{seed}.jsonl", algorithms.run(alg, problem, trace, seed=seed), trace,
                                 algorithm="fedavg", local_steps=2, step_sizes=steps, seed=seed)
             for seed in (0, 1)]
    from verify import check_run

    res = check_run(paths, "fedsum.theorem_4_1", constants={"L": 10.0, "sigma2": 0.25, "delta_f": 5.0, "F0": 3.0})
    assert len(res.per_trace_tau) == 2
    # one trace, two records: τ once per record (each record's trace is its own)
    assert list(delay_calls.values()) == [2]


def test_the_F0_probe_evaluates_the_bound_as_the_bound_itself_is_evaluated(tmp_path, monkeypatch):
    """A record without F0: the probe that asks whether the bound depends on F0 changes F0 alone,
    every other input (the FedSUM variant included) as in the bound judged."""
    from verify import check_run
    from verify.records import checks as record_checks

    problem = Quadratic.random(4, 3, heterogeneity=1.0, noise_std=0.5, seed=1)
    trace = Trace(np.random.default_rng(2).random((15, 4)) < 0.5)
    alg = algorithms.get("fedsum-b", eta_l=0.05, eta_g=1.0, local_steps=2)
    paths = [record_from_history(tmp_path / f"r{seed}.jsonl", algorithms.run(alg, problem, trace, seed=seed), trace,
                                 algorithm="fedsum-b", local_steps=2, step_sizes={"eta_l": 0.05, "eta_g": 1.0},
                                 seed=seed) for seed in (0, 1)]
    calls = []
    original = record_checks.evaluate

    def recording(spec, **kwargs):
        calls.append({k: v for k, v in kwargs.items() if k != "constants"})
        return original(spec, **kwargs)

    monkeypatch.setattr(record_checks, "evaluate", recording)
    with pytest.raises(ValueError, match="F0"):
        check_run(paths, "fedsum.corollary_4_1", constants={"L": 1.0, "sigma2": 0.25, "delta_f": 5.0})
    assert len(calls) >= 2 and calls[-1] == calls[0] and calls[0].get("algorithm") == "fedsum-b"
