"""check-run's text shows its inputs: the constants the bound used with their source, and the step
sizes as the record wrote them beside those the theorem reads (FedAvgM's η' = 0.5 with β = 0.8 is
Server momentum's η = 2.5)."""
import numpy as np

import algorithms
from algorithms.problems import Quadratic
from participation import patterns
from verify.cli import main
from verify.records import RunRecorder


def _record(path, seed):
    problem = Quadratic.random(4, 3, noise_std=0.0, seed=1)
    trace = patterns.Uniform(4, 4).sample(12, seed=seed)
    fedavgm = algorithms.get("fedavgm", eta_l=0.001, eta_g=0.5, beta=0.8, local_steps=2)
    history = algorithms.run(fedavgm, problem, trace, seed=seed, observe=True)
    c = problem.constants()
    with RunRecorder(path, 4, algorithm="fedavgm", local_steps=2, step_sizes={"eta_l": 0.001, "eta_g": 0.5},
                     hparams={"beta": 0.8}, seed=seed, availability={"model": "full"},
                     constants={"L": c.L, "sigma2": 0.0, "delta_f": c.delta_f, "F0": c.F0, "source": "exact"}) as rec:
        for t in range(12):
            rec.record_round(t, np.arange(4), np.arange(4), grad_norm2=float(history.grad_norm2[t]),
                             heterogeneity=float(history.observed["heterogeneity"][t]))


def test_check_run_prints_its_constants_and_the_step_sizes_as_recorded(tmp_path, capsys):
    _record(tmp_path / "r.jsonl", 0)
    assert main(["check-run", str(tmp_path / "r.jsonl"), "--theorem", "momentum.theorem_4_1", "--no-worst-case"]) == 0
    out = capsys.readouterr().out
    assert "constants: L=" in out and "(from the records' header; source: exact)" in out
    assert "step sizes as recorded: eta_l=0.001, eta_g=0.5; the theorem reads eta_g=2.5" in out
