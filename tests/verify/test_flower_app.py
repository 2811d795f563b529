"""The Flower App in examples/flower_app run as Flower means it to be run, ``flwr run`` (a local
SuperLink in simulation mode that the CLI starts), not through the deprecated
``run_simulation``: the record its ServerApp writes follows the imposed trace, repeats fedverify's
``fedavgm`` and is judged against Server momentum Thm 4.6 as ``check`` judges the engine's run."""
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


@pytest.mark.slow
@pytest.mark.longest
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="stopping the CLI's SuperLink reads /proc")
def test_flwr_run_of_the_example_app_is_recorded_and_judged(tmp_path):
    pytest.importorskip("flwr", reason=SKIP_REASON)
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")
    import algorithms
    import participation
    from bounds.core import Constants
    from verify import check_run, load_record
    from verify.checking import check

    app = shutil.copytree(APP, tmp_path / "app")
    home = tmp_path / "flwr-home"                   # Flower writes its default config.toml here
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "FLWR_TELEMETRY_ENABLED": "0", "RAY_USAGE_STATS_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()), "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    record_path = tmp_path / "run.jsonl"
    try:
        done = subprocess.run([str(bin_dir / "flwr"), "run", str(app), "local", "--stream",
                               "--run-config", f"record='{record_path}'",
                               "--federation-config", "num-supernodes=6 client-resources-num-cpus=1 init-args-num-cpus=1"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    finally:
        _stop_processes_mentioning(str(home))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert record_path.exists(), (done.stdout + done.stderr)[-3000:]

    record = load_record(record_path)
    problem = algorithms.problems.Quadratic.random(6, 3, noise_std=0.0, seed=1)        # the app's task.py
    trace = participation.preset("P1", n_clients=6, per_round=2).sample(10, seed=3)   # its pyproject's run config
    assert np.array_equal(record.mask, trace.mask) and np.array_equal(record.selected, trace.mask)
    assert record.header["algorithm"] == "fedavgm" and record.header["availability"] == {"model": "uniform", "m": 2}
    fedavgm = algorithms.get("fedavgm", eta_l=0.2, eta_g=0.5, beta=0.8, local_steps=2)
    history = algorithms.run(fedavgm, problem, trace, seed=5)
    np.testing.assert_allclose(record.metric("grad_norm2"), history.grad_norm2, rtol=1e-9, atol=1e-14)

    judged = check_run(record_path, "momentum.theorem_4_6")
    c = problem.constants()
    direct = check(fedavgm, problem, trace, "momentum.theorem_4_6", seeds=[5], step_sizes="given",
                   constants=Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=6, local_steps=2,
                                       rounds=10))
    assert judged.values == pytest.approx(direct.values, rel=1e-10)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-10)
    assert judged.verdict == direct.verdict
