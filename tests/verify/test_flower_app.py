"""The Flower App in examples/flower_app run as Flower means it to be run, ``flwr run`` (a local
SuperLink in simulation mode that the CLI starts), not through the deprecated
``run_simulation``: its three runs (one per trace seed) are recorded to three records, an existing
record is never overwritten (the run goes to the next free name, with a warning in the log), each
record follows its imposed trace and repeats fedverify's ``fedavgm``, and the three together are
judged "holds" against Server momentum Thm 4.6, the verdict the README shows."""
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower_app"
SKIP_REASON = 'Flower (flwr) is not installed; pip install "fedverify[flower]" runs these tests'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_processes_mentioning(text: str) -> None:
    """SIGTERM to every process whose command line mentions ``text`` (the SuperLink the CLI left
    running, which logs under this test's own Flower home)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in command:
            try:
                os.kill(int(entry.name), signal.SIGTERM)
            except OSError:
                pass


def _flwr_run(tmp_path, run_config: str) -> str:
    """``flwr run`` of a copy of the App with its own Flower home and ports; the run's log."""
    app = shutil.copytree(APP, tmp_path / "app")
    home = tmp_path / "flwr-home"                   # Flower writes its default config.toml here
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "FLWR_TELEMETRY_ENABLED": "0", "RAY_USAGE_STATS_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()), "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([str(bin_dir / "flwr"), "run", str(app), "local", "--stream", "--run-config", run_config,
                               "--federation-config", "num-supernodes=6 client-resources-num-cpus=1 init-args-num-cpus=1"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    finally:
        _stop_processes_mentioning(str(home))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    return log


def _requirements():
    pytest.importorskip("flwr", reason=SKIP_REASON)
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")


@pytest.mark.slow
@pytest.mark.longest
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="stopping the CLI's SuperLink reads /proc")
def test_flwr_run_of_the_example_app_is_recorded_and_judged(tmp_path):
    _requirements()
    import algorithms
    import participation
    from bounds.core import Constants
    from verify import check_run, load_record
    from verify.checking import check

    template = tmp_path / "run-{seed}.jsonl"
    (tmp_path / "run-1.jsonl").write_text("a record already there\n")       # never overwritten
    log = _flwr_run(tmp_path, f"record='{template}'")
    paths = [tmp_path / "run-0.jsonl", tmp_path / "run-1-2.jsonl", tmp_path / "run-2.jsonl"]
    assert all(p.exists() for p in paths), log[-3000:]
    assert (tmp_path / "run-1.jsonl").read_text() == "a record already there\n"
    assert "run-1.jsonl exists; recording this run to" in log

    problem = algorithms.problems.Quadratic.random(6, 3, noise_std=0.0, seed=1)        # the app's task.py
    fedavgm = algorithms.get("fedavgm", eta_l=0.0005, eta_g=0.5, beta=0.8, local_steps=2)
    traces = []
    for s, path in enumerate(paths):
        record = load_record(path)
        trace = participation.preset("P1", n_clients=6, per_round=2).sample(10, seed=3 + s)   # trace-seed + s
        assert np.array_equal(record.mask, trace.mask) and np.array_equal(record.selected, trace.mask)
        assert record.header["algorithm"] == "fedavgm" and record.header["availability"] == {"model": "uniform", "m": 2}
        history = algorithms.run(fedavgm, problem, trace, seed=5)
        np.testing.assert_allclose(record.metric("grad_norm2"), history.grad_norm2, rtol=1e-9, atol=1e-14)
        traces.append(trace)

    judged = check_run([str(p) for p in paths], "momentum.theorem_4_6")
    assert judged.verdict == "holds"
    c = problem.constants()
    constants = Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=6, local_steps=2, rounds=10)
    direct = [check(fedavgm, problem, trace, "momentum.theorem_4_6", seeds=[5], step_sizes="given",
                    constants=constants) for trace in traces]
    assert judged.values == pytest.approx([d.values[0] for d in direct], rel=1e-10)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme.split("fedverify check-run run-*.jsonl --theorem momentum.theorem_4_6\n", 1)[1].split("\n", 1)[0]
    assert shown.startswith("# ") and str(judged).startswith(shown[2:].split(" vs bound")[0])


@pytest.mark.slow
@pytest.mark.longest
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="stopping the CLI's SuperLink reads /proc")
def test_flwr_run_of_flowers_fedavg_is_recorded_and_judged_as_check_judges_the_engine(tmp_path):
    """Flower's FedAvg through ``flwr run`` (the supported path): the record repeats fedverify's
    ``fedavg`` (η_g = 1, equal weights recorded) and is judged against FedSUM Thm 4.1 as ``check``
    judges the engine's run on the same trace."""
    _requirements()
    import algorithms
    import participation
    from bounds.core import Constants
    from verify import check_run, load_record
    from verify.checking import check

    path = tmp_path / "fedavg.jsonl"
    _flwr_run(tmp_path, f"record='{path}' strategy='fedavg' seeds=1")
    record = load_record(path)
    problem = algorithms.problems.Quadratic.random(6, 3, noise_std=0.0, seed=1)
    trace = participation.preset("P1", n_clients=6, per_round=2).sample(10, seed=3)
    fedavg = algorithms.get("fedavg", eta_l=0.0005, eta_g=1.0, local_steps=2)
    assert record.header["algorithm"] == "fedavg" and np.array_equal(record.mask, trace.mask)
    np.testing.assert_allclose(record.metric("grad_norm2"), algorithms.run(fedavg, problem, trace).grad_norm2,
                               rtol=1e-9, atol=1e-14)
    weights = record.vectors["example_weights"]
    assert np.allclose(weights[record.mask], 0.5) and np.isnan(weights[~record.mask]).all()
    judged = check_run(str(path), "fedsum.theorem_4_1")
    c = problem.constants()
    direct = check(fedavg, problem, trace, "fedsum.theorem_4_1", seeds=[0], step_sizes="given",
                   constants=Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=6,
                                       local_steps=2, rounds=10))
    assert judged.values == pytest.approx(direct.values, rel=1e-10) and judged.verdict == direct.verdict
