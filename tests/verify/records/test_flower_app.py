"""The Flower App in examples/flower_app run as Flower means it to be run, ``flwr run`` (a local
SuperLink in simulation mode that the CLI starts), through ``verify.records.flower.run_app``: its three
runs (one per trace seed) are recorded to three records, an existing record is never overwritten
(the run goes to the next free name, with a warning in the log), each record follows its imposed
trace (selected = replied = S_t) and repeats fedverify's ``fedavgm``, and the three together are
judged "holds" against Server momentum Thm 4.6, the verdict the README shows; Flower's FedAvg
through the same App is judged as ``check`` judges the engine. The SuperLink ``run_app`` starts
is gone when it returns, and a failed run is one line with Flower's reason.

The fast tests here need no Flower: ``run_app``'s run config in Flower's ``--run-config``
syntax and its argument errors."""
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from verify.records import flower as vf

ROOT = Path(__file__).resolve().parents[3]
APP = ROOT / "examples" / "flower_app"
SKIP_REASON = 'Flower (flwr) is not installed; pip install "fedverify[flower]" runs these tests'


def _one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# --- without Flower: the run config and the arguments --------------------------------------

def test_the_run_config_is_written_in_flowers_syntax():
    written = vf.format_run_config({"strategy": "fedavg", "seeds": 1, "server-momentum": 0.8, "verbose": True,
                                    "quiet": False})
    assert written == "strategy='fedavg' seeds=1 server-momentum=0.8 verbose=true quiet=false"
    assert vf.format_run_config({"record": Path("/runs/run-{seed}.jsonl")}) == "record='/runs/run-{seed}.jsonl'"
    assert vf.format_run_config({"eta": 1e-5, "n": np.int64(-3), "x": np.float32(0.25), "b": np.bool_(True)}) \
        == "eta=1e-05 n=-3 x=0.25 b=true"
    assert vf.format_run_config({"path": "C:\\runs\\a b.jsonl"}) == "path='C:\\runs\\a b.jsonl'"   # literal: as is
    assert vf.format_run_config({"note": "it's C:\\x"}) == 'note="it\'s C:\\\\x"'                    # basic: escaped
    assert vf.format_run_config({"a.b": "nested", "empty": ""}) == "a.b='nested' empty=''"
    assert vf.format_run_config({}) == ""


def test_flower_reads_the_run_config_back_unchanged():
    pytest.importorskip("flwr", reason=SKIP_REASON)
    from flwr.common.config import parse_config_args

    config = {"record": "/tmp/a b/run-{seed}.jsonl", "seeds": 3, "lr": 0.5, "tiny": 1e-300, "big": 10 ** 18,
              "on": True, "off": False, "quote": "it's", "win": "C:\\dir\\r.jsonl", "mixed": "it's C:\\x",
              "eq": "a=b c=d", "empty": "", "inf": math.inf, "group.key": -2}
    assert parse_config_args([vf.format_run_config(config)]) == config


@pytest.mark.parametrize("config, named", [
    ({"a b": 1}, "'a b'"), ({"a=b": 1}, "'a=b'"), ({"": 1}, "''"), ({3: 1}, "3"), ({"a..b": 1}, "'a..b'"),
    ({"k": None}, "run_config['k'] is a NoneType"), ({"k": [1, 2]}, "run_config['k'] is a list"),
    ({"k": {"x": 1}}, "run_config['k'] is a dict"), ({"k": "a'b\"c"}, "holds both ' and \""),
    ({"k": "two\nlines"}, "control character"), ({"k": 2 ** 63}, "outside TOML's 64-bit integers"),
])
def test_a_run_config_flower_cannot_parse_is_one_line_naming_it(config, named):
    with pytest.raises(ValueError) as err:
        vf.format_run_config(config)
    assert named in _one_line(err)


def test_a_run_config_must_be_a_mapping():
    with pytest.raises(ValueError) as err:
        vf.format_run_config([("seeds", 1)])
    assert "run_config must be a dict" in _one_line(err)


@pytest.mark.parametrize("kwargs, named", [
    ({"num_supernodes": 0}, "num_supernodes must be an integer ≥ 1, got 0"),
    ({"num_supernodes": 2.5}, "num_supernodes must be an integer ≥ 1, got 2.5"),
    ({"num_supernodes": True}, "num_supernodes must be an integer ≥ 1, got True"),
    ({"timeout": 0}, "timeout must be a finite number > 0, got 0"),
    ({"timeout": -5}, "timeout must be a finite number > 0, got -5"),
    ({"timeout": math.nan}, "timeout must be a finite number > 0, got nan"),
    ({"cpus": 0}, "cpus must be an integer ≥ 1, got 0"),
    ({"client_cpus": 0.5}, "client_cpus must be an integer ≥ 1, got 0.5"),
    ({"cpus": 1, "client_cpus": 2}, "client_cpus = 2 is more than cpus = 1"),
    ({"run_config": {"bad key": 1}}, "run_config key 'bad key'"),
])
def test_bad_arguments_are_one_line_naming_the_value(kwargs, named):
    """Checked before Flower is looked for: the same errors with or without it."""
    with pytest.raises(ValueError) as err:
        vf.run_app(APP, **{"num_supernodes": 6, **kwargs})
    assert named in _one_line(err)


def test_a_directory_without_pyproject_is_not_an_app(tmp_path):
    with pytest.raises(ValueError) as err:
        vf.run_app(tmp_path, num_supernodes=2)
    assert _one_line(err) == f"app_dir {str(tmp_path)!r} has no pyproject.toml: it is not a Flower App directory"


def test_flowers_reason_is_the_line_that_ended_the_run():
    log = ("INFO :      Starting Flower Simulation\nERROR :     Simulation raised an exception\n"
           "Traceback (most recent call last):\n  File \"server_app.py\", line 52, in _strategy\n"
           "    raise ValueError(...)\nValueError: run config strategy must be 'fedavgm' or 'fedavg', got 'x'\n"
           "ERROR :     Exit Code: 700\n\nFor more information, visit: <https://flower.ai/docs/...>\n")
    assert vf._last_meaningful_line(log) == ("ValueError: run config strategy must be 'fedavgm' or 'fedavg', "
                                             "got 'x'")
    assert vf._last_meaningful_line("INFO : a\nERROR :     Exit Code: 700\nvisit: x\n") == "ERROR :     Exit Code: 700"
    assert vf._last_meaningful_line("╭────╮\n│ Error: no such app │\n╰────╯\n\n") == "Error: no such app"
    assert vf._last_meaningful_line("") == "it printed nothing"


# --- flwr run ------------------------------------------------------------------------------

def _requirements():
    pytest.importorskip("flwr", reason=SKIP_REASON)
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")


def _mentioning(text: str) -> list[str]:
    """The command lines of the processes whose command line or environment mentions ``text``
    (read from /proc, independently of verify.records.flower's own search)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in command or f"FLWR_HOME={text}".encode() in environ:
            found.append(command.replace(b"\0", b" ").decode(errors="replace"))
    return found


def _run(tmp_path, run_config: dict, **kwargs) -> vf.AppRun:
    """``run_app`` on a copy of the App: six SuperNodes, one CPU."""
    app = shutil.copytree(APP, tmp_path / "app")
    return vf.run_app(app, run_config=run_config, num_supernodes=6, cpus=1, client_cpus=1, timeout=600, **kwargs)


@pytest.mark.slow
@pytest.mark.longest
def test_flwr_run_of_the_example_app_is_recorded_and_judged(tmp_path):
    _requirements()
    import algorithms
    import participation
    from bounds.core import Constants
    from verify import check_run, load_record
    from verify.checking import check

    template = tmp_path / "run-{seed}.jsonl"
    (tmp_path / "run-1.jsonl").write_text("a record already there\n")       # never overwritten
    home = tmp_path / "flwr-home"
    run = _run(tmp_path, {"record": template}, flower_home=home)
    log = run.log
    assert run.seconds > 0 and run.command[1:3] == ("run", str((tmp_path / "app").resolve()))
    assert (home / "config.toml").is_file()                                  # the run's own Flower home
    if Path("/proc").is_dir():                                               # the SuperLink it started is gone
        assert not _mentioning(str(home.resolve())), _mentioning(str(home.resolve()))
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
    _run(tmp_path, {"record": path, "strategy": "fedavg", "seeds": 1})
    record = load_record(path)
    problem = algorithms.problems.Quadratic.random(6, 3, noise_std=0.0, seed=1)
    trace = participation.preset("P1", n_clients=6, per_round=2).sample(10, seed=3)
    fedavg = algorithms.get("fedavg", eta_l=0.0005, eta_g=1.0, local_steps=2)
    assert record.header["algorithm"] == "fedavg" and np.array_equal(record.mask, trace.mask)
    assert np.array_equal(record.selected, trace.mask)
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


@pytest.mark.slow
@pytest.mark.longest
def test_a_failed_flwr_run_is_one_line_with_flowers_reason(tmp_path):
    """The CLI exits with 0 when the ServerApp raises; ``run_app`` reads the run's status and
    raises with the exception that ended it, the whole log kept; its SuperLink is gone too."""
    _requirements()
    home = tmp_path / "flwr-home"
    with pytest.raises(vf.FlowerRunError) as err:
        _run(tmp_path, {"record": tmp_path / "never.jsonl", "strategy": "fedprox", "seeds": 1}, flower_home=home)
    assert isinstance(err.value, RuntimeError)
    assert _one_line(err) == ("the Flower run ended finished:failed: ValueError: run config strategy must be "
                              "'fedavgm' or 'fedavg', got 'fedprox'")
    assert "Traceback" in err.value.log and err.value.returncode == 0
    assert not (tmp_path / "never.jsonl").exists()
    if Path("/proc").is_dir():
        assert not _mentioning(str(home.resolve()))


def test_run_app_finds_the_flwr_command_beside_this_python():
    if not (Path(sys.executable).parent / "flwr").is_file():
        pytest.skip(SKIP_REASON)
    assert vf._flwr_executable() == Path(sys.executable).parent / "flwr"
