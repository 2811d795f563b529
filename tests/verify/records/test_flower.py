"""verify.records.flower: Flower runs recorded as fedverify run records, with an imposed trace.

The tests marked by the ``flower`` fixture need Flower (``flwr``) and are skipped without it;
the others run everywhere. Two slow tests run Flower's Simulation Runtime (Ray):
``test_the_readme_flower_example_runs_as_pasted`` (the README's ``run_app`` of examples/flower_app,
through ``flwr run``) and ``test_simulate_runs_an_app_defined_in_python_and_warns`` (the deprecated
``run_simulation`` path); the others drive the strategy through an in-process stand-in for
Flower's Grid that calls the ClientApp directly.
"""
import os
import random
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import algorithms
import participation
from algorithms.problems import Quadratic
from verify import CheckResult, RunRecorder, check_run, load_record
from verify.records import flower as vf

ROOT = Path(__file__).resolve().parents[3]
N, D, K, T, S = 6, 3, 2, 8, 2
ETA_L = 0.2
SKIP_REASON = 'Flower (flwr) is not installed; pip install "fedverify[flower]" runs these tests'


@pytest.fixture
def flower():
    return pytest.importorskip("flwr", reason=SKIP_REASON)


def _problem(noise_std=0.0):
    return Quadratic.random(N, D, noise_std=noise_std, seed=1)


def _trace(rounds=T, seed=3):
    return participation.preset("P1", n_clients=N, per_round=S).sample(rounds, seed=seed)


def _constants(problem):
    c = problem.constants()
    return {"L": c.L, "sigma2": c.sigma2, "delta_f": c.delta_f, "F0": c.F0, "source": "Quadratic.constants (exact)"}


def _recorder(path, problem, **kwargs):
    return RunRecorder(path, N, algorithm="fedavg", local_steps=K, step_sizes={"eta_g": 1.0, "eta_l": ETA_L}, seed=0,
                       constants=_constants(problem), **kwargs)


def _engine_path(problem, trace, seed=0):
    fedavg = algorithms.get("fedavg", eta_l=ETA_L, eta_g=1.0, local_steps=K)
    return np.stack([s.x.numpy() for s in algorithms.iterate(fedavg, problem, trace, seed=seed)])


def _path_recorder(problem):
    """``measure`` that also keeps every model it is shown (x_0, ..., x_T)."""
    seen, measure = [], vf.problem_measure(problem)

    def record(arrays):
        seen.append(vf.vector_of(arrays))
        return measure(arrays)

    return seen, record


# --- without Flower -------------------------------------------------------------------------

def test_importing_the_module_does_not_import_flower():
    code = ("import sys, verify.records.flower as f; assert f.flower_available() in (True, False); "
            "print(sorted(m for m in sys.modules if m == 'flwr' or m.startswith('flwr.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture
def no_flower(monkeypatch):
    """Flower made unimportable for the test, whether installed or not."""
    for name in [m for m in sys.modules if m == "flwr" or m.startswith("flwr.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "flwr", None)
    monkeypatch.delitem(vars(vf), "RecordingStrategy", raising=False)


def _one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_missing_flower_is_one_line_saying_how_to_install(no_flower):
    assert vf.flower_available() in (True, False)
    with pytest.raises(ModuleNotFoundError) as err:
        vf.require_flower()
    assert err.value.name == "flwr"
    assert _one_line(err) == 'Flower (flwr) is not installed: install with pip install "fedverify[flower]"'
    with pytest.raises(ImportError) as err:
        exec("from verify.records.flower import RecordingStrategy", {})
    assert 'pip install "fedverify[flower]"' in _one_line(err)
    for call in (lambda: vf.sgd_client_app(_problem(), ETA_L, K), lambda: vf.answer_partition_queries(object()),
                 lambda: vf.arrays_of(np.zeros(3)), lambda: vf.simulate(None, None, N),
                 lambda: vf.discover_partitions(None, N),
                 lambda: vf.run_app(ROOT / "examples" / "flower_app", num_supernodes=N)):
        with pytest.raises(ModuleNotFoundError) as err:
            call()
        assert 'pip install "fedverify[flower]"' in _one_line(err)


def test_what_needs_no_flower_works_without_it(no_flower):
    assert "RecordingStrategy" in dir(vf) and "RecordingStrategy" not in vf.__all__
    namespace = {}
    exec("from verify.records.flower import *", namespace)          # a star import needs no Flower
    assert {"simulate", "run_app", "AppRun", "FlowerRunError", "format_run_config"} <= set(namespace)


def test_the_extra_names_flower():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["flower"] == ["flwr[simulation]>=1.41,<2"]      # the simulation engine needs Ray


def test_partition_ids_must_be_each_of_0_to_n_minus_1_once():
    assert vf.check_partitions({11: 1, 10: 0, 12: 2.0}, 3) == {0: 10, 1: 11, 2: 12}
    with pytest.raises(ValueError, match="both have partition id 1"):
        vf.check_partitions({10: 1, 11: 1, 12: 0}, 3)
    with pytest.raises(ValueError, match="outside 0..2"):
        vf.check_partitions({10: 0, 11: 1, 12: 3}, 3)
    with pytest.raises(ValueError, match="no node has partition id 2"):
        vf.check_partitions({10: 0, 11: 1}, 3)
    with pytest.raises(ValueError, match="not an integer"):
        vf.check_partitions({10: 0.5}, 1)


def test_a_trace_or_pattern_gives_the_rows_of_the_run():
    pattern = participation.preset("P1", n_clients=N, per_round=S)
    full = pattern.sample(12, seed=5).mask
    assert np.array_equal(vf.resolve_trace(pattern, 4, start=8, seed=5), full[8:12])
    assert np.array_equal(vf.resolve_trace(participation.Trace(full), 5, start=2), full[2:7])
    assert np.array_equal(vf.resolve_trace(full.astype(int), 12), full)
    with pytest.raises(ValueError, match="has 12 rounds"):
        vf.resolve_trace(full, 5, start=10)
    with pytest.raises(ValueError, match="the run 5"):
        vf.resolve_trace(full, 3, n_clients=5)


class _Array:
    """Stands in for a Flower Array (an ArrayRecord is a mapping of names to these)."""

    def __init__(self, value):
        self.value = np.asarray(value)

    def numpy(self):
        return self.value


def test_problem_measure_gives_what_fedsum_measures():
    problem = _problem()
    x = np.array([0.3, -1.0, 2.0])
    got = vf.problem_measure(problem)({"a": _Array(x[:1]), "b": _Array(x[1:].reshape(2, 1))})
    xt = torch.as_tensor(x)
    assert got["grad_norm2"] == pytest.approx(float(problem.full_grad(xt).square().sum()), rel=1e-14)
    assert got["loss"] == pytest.approx(float(problem.loss(xt)), rel=1e-14)
    grads = [problem.client_grads(xt)[i].numpy() for i in range(N)]
    spreads = [float(np.sum((g - np.mean(grads, axis=0)) ** 2)) for g in grads]
    assert got["heterogeneity"] == pytest.approx(sum(spreads) / N, rel=1e-12)
    assert got["heterogeneity_max"] == pytest.approx(max(spreads), rel=1e-12)
    with pytest.raises(ValueError, match="2 entries"):
        vf.problem_measure(problem)({"a": _Array(x[:2])})


# --- with Flower, in process ----------------------------------------------------------------

class LocalGrid:
    """Flower's Grid, in process: random node ids and a random node ↔ partition assignment (as
    in a Flower run), each message handed to the ClientApp at once. ``drop`` holds (t, partition)
    whose training reply never comes; ``fail`` those whose ClientApp fails. A ClientApp that
    raises replies with an error, as in Flower."""

    def __init__(self, app, n=N, seed=0, drop=(), fail=()):
        from flwr.app import Context, RecordDict

        rng = random.Random(seed)
        self.nodes = [rng.getrandbits(63) for _ in range(n)]
        self.partition = dict(zip(self.nodes, rng.sample(range(n), n)))
        self.contexts = {node: Context(run_id=1, node_id=node, node_config={"partition-id": p, "num-partitions": n},
                                       state=RecordDict(), run_config={}) for node, p in self.partition.items()}
        self.app, self.drop, self.fail = app, set(drop), set(fail)
        self.trained = []                          # (t, partition) of every training message

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, *, timeout=None):
        from flwr.app import Error, Message

        replies = []
        for msg in messages:
            p = self.partition[msg.metadata.dst_node_id]
            if msg.metadata.message_type == "train":
                config = msg.content["config"]
                t = int(config[vf.ROUND_KEY]) if vf.ROUND_KEY in config else int(config["server-round"]) - 1
                self.trained.append((t, p))
                if (t, p) in self.drop:
                    continue
                if (t, p) in self.fail:
                    replies.append(Message(Error(code=2, reason="ClientApp raised\nValueError: boom"), reply_to=msg))
                    continue
            try:
                replies.append(self.app(msg, self.contexts[msg.metadata.dst_node_id]))
            except Exception as err:               # as Flower does: the reply carries the error
                replies.append(Message(Error(code=2, reason=f"{type(err).__name__}: {err}"), reply_to=msg))
        return replies


@pytest.fixture
def identity(flower):
    """Flower's process identity, which a Message needs (the simulation engine sets it)."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id)
    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0
    yield
    TaskIdentity._run_id, TaskIdentity._task_id, TaskIdentity._node_id = saved


def _fedavg(**kwargs):
    from flwr.serverapp.strategy import FedAvg

    return FedAvg(**{"fraction_evaluate": 0.0, **kwargs})


def _run_local(tmp_path, problem, trace, *, strategy=None, seed=0, grid_seed=0, rounds=None, **grid_kwargs):
    seen, measure = _path_recorder(problem)
    grid = LocalGrid(vf.sgd_client_app(problem, ETA_L, K, seed=seed), seed=grid_seed, **grid_kwargs)
    path = tmp_path / f"run-{grid_seed}.jsonl"
    rounds = rounds or (trace.n_rounds if trace is not None else T)
    with _recorder(path, problem) as rec:
        wrapped = vf.RecordingStrategy(strategy or _fedavg(), rec, trace=trace, measure=measure)
        wrapped.start(grid=grid, initial_arrays=vf.arrays_of(problem.x0), num_rounds=rounds)
    return load_record(path), np.stack(seen), wrapped, grid


@pytest.mark.parametrize("noise_std", [0.0, 0.3])
def test_an_imposed_trace_repeats_fedverifys_fedavg(tmp_path, identity, noise_std):
    problem, trace = _problem(noise_std), _trace()
    record, path, wrapped, grid = _run_local(tmp_path, problem, trace, seed=7)
    assert np.array_equal(record.mask, trace.mask) and np.array_equal(record.selected, trace.mask)
    assert sorted(grid.trained) == sorted((t, int(i)) for t in range(T) for i in np.flatnonzero(trace.mask[t]))
    assert np.abs(path - _engine_path(problem, trace, seed=7)).max() < 1e-10
    history = algorithms.run(algorithms.get("fedavg", eta_l=ETA_L, eta_g=1.0, local_steps=K), problem, trace, seed=7)
    np.testing.assert_allclose(record.metric("grad_norm2"), history.grad_norm2, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(record.metric("loss"), history.loss, rtol=1e-9)
    assert wrapped.final_metrics["grad_norm2"] == pytest.approx(
        float(problem.full_grad(torch.as_tensor(path[-1])).square().sum()), rel=1e-12)
    assert [r["round"] for r in wrapped.rounds] == list(range(T)) and len(wrapped.round_seconds) == T


@pytest.mark.parametrize("noise_std", [0.0, 0.3])
def test_flowers_fedavgm_repeats_fedverifys_fedavgm_and_is_judged_against_server_momentum(tmp_path, identity, noise_std):
    """FedAvgM(η', β) in Flower under an imposed uniform trace is fedverify's ``fedavgm`` (the
    mapping of verify.records.flower's docstring), and its record is judged against Server momentum Thm 4.6
    as ``check`` judges the engine's run."""
    from flwr.serverapp.strategy import FedAvgM

    from bounds.core import Constants
    from verify.checking import check

    problem, trace = _problem(noise_std), _trace(rounds=12)
    strategy = FedAvgM(fraction_evaluate=0.0, server_learning_rate=0.5, server_momentum=0.8)
    header = vf.record_header(strategy, eta_l=ETA_L, local_steps=K)
    notes = header.pop("notes")
    assert header == {"algorithm": "fedavgm", "step_sizes": {"eta_l": ETA_L, "eta_g": 0.5}, "hparams": {"beta": 0.8},
                      "local_steps": K}
    assert "FedGM(eta = 2.5 = eta_g/(1 - beta), beta = 0.8, nu = 1)" in notes
    header["notes"] = notes
    seen, measure = _path_recorder(problem)
    path = tmp_path / "fedavgm.jsonl"
    with RunRecorder(path, N, **header, seed=5, constants=_constants(problem),
                     availability={"model": "uniform", "m": S}) as rec:
        wrapped = vf.RecordingStrategy(strategy, rec, trace=trace, measure=measure)
        wrapped.start(grid=LocalGrid(vf.sgd_client_app(problem, ETA_L, K, seed=5)),
                      initial_arrays=vf.arrays_of(problem.x0), num_rounds=trace.n_rounds)
    fedavgm = algorithms.get("fedavgm", eta_l=ETA_L, eta_g=0.5, beta=0.8, local_steps=K)
    engine = np.stack([st.x.numpy() for st in algorithms.iterate(fedavgm, problem, trace, seed=5)])
    assert np.abs(np.stack(seen) - engine).max() < 1e-10
    judged = check_run(path, "momentum.theorem_4_6")
    c = problem.constants()
    direct = check(fedavgm, problem, trace, "momentum.theorem_4_6", seeds=[5], step_sizes="given",
                   constants=Constants(L=c.L, sigma2=c.sigma2, delta_f=c.delta_f, F0=c.F0, n_clients=N, local_steps=K,
                                       rounds=trace.n_rounds))
    assert judged.values == pytest.approx(direct.values, rel=1e-10)
    assert float(judged.bound.value) == pytest.approx(float(direct.bound.value), rel=1e-10)
    assert judged.verdict == direct.verdict and judged.algorithm == "fedavgm"


@pytest.mark.parametrize("lr, beta, name", [(0.5, 0.8, "fedavgm"), (1.5, 0.0, "fedavg")])
def test_flowers_server_step_repeats_fedverifys_through_empty_rounds(tmp_path, identity, lr, beta, name):
    """Rounds 0, 3 and 4 empty: Flower's momentum starts at the first aggregated round and skipped
    rounds leave x and v alone, as fedverify's engine does; FedAvgM with β = 0 is FedAvg with a
    server rate."""
    from flwr.serverapp.strategy import FedAvgM

    problem, mask = _problem(0.3), _trace().mask.copy()
    mask[[0, 3, 4]] = False
    strategy = FedAvgM(fraction_evaluate=0.0, server_learning_rate=lr, server_momentum=beta)
    assert vf.record_header(strategy, eta_l=ETA_L, local_steps=K)["algorithm"] == name
    trace = participation.Trace(mask)
    _, path, _, _ = _run_local(tmp_path, problem, trace, strategy=strategy, seed=2)
    hparams = {"beta": beta} if beta else {}
    algorithm = algorithms.get(name, eta_l=ETA_L, eta_g=lr, local_steps=K, **hparams)
    engine = np.stack([st.x.numpy() for st in algorithms.iterate(algorithm, problem, trace, seed=2)])
    assert np.abs(path - engine).max() < 1e-10 and not np.array_equal(path[-1], path[0])


def test_record_header_names_only_the_strategies_fedverify_runs(flower):
    from flwr.serverapp.strategy import FedAvg, FedAvgM, FedProx

    header = vf.record_header(FedAvgM(server_learning_rate=2.0), eta_l=0.1, local_steps=3)
    assert "num-examples" in header.pop("notes")
    assert header == {"algorithm": "fedavg", "step_sizes": {"eta_l": 0.1, "eta_g": 2.0}, "local_steps": 3}
    assert vf.record_header(FedAvg(), eta_l=0.1, local_steps=1)["algorithm"] == "fedavg"
    with pytest.raises(ValueError, match="FedProx"):
        vf.record_header(FedProx(), eta_l=0.1, local_steps=1)
    with pytest.raises(ValueError, match="eta_l"):
        vf.record_header(FedAvg(), eta_l=0.0, local_steps=1)


def test_different_node_ids_give_the_same_run(tmp_path, identity):
    problem, trace = _problem(), _trace()
    first, path1, *_ = _run_local(tmp_path, problem, trace, grid_seed=1)
    second, path2, *_ = _run_local(tmp_path, problem, trace, grid_seed=2)
    assert np.array_equal(first.mask, second.mask) and np.array_equal(path1, path2)


def test_an_empty_round_is_skipped_and_recorded(tmp_path, identity):
    problem = _problem()
    mask = _trace().mask.copy()
    mask[[0, 3, 4]] = False
    record, path, _, grid = _run_local(tmp_path, problem, participation.Trace(mask))
    assert np.array_equal(record.mask, mask) and record.n_rounds == T
    assert np.array_equal(path[1], path[0]) and np.array_equal(path[4], path[3]) and np.array_equal(path[5], path[4])
    assert not [t for t, _ in grid.trained if t in (0, 3, 4)]
    assert np.abs(path - _engine_path(problem, participation.Trace(mask))).max() < 1e-10


def test_the_strategys_minimums_never_make_an_imposed_round_wait(tmp_path, identity):
    """FedAvg asks for 5 training nodes and 9 connected ones; the trace asks for 2 of 6."""
    problem, trace = _problem(), _trace()
    state = random.getstate()
    strategy = _fedavg(min_train_nodes=5, min_available_nodes=9)
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("run", _run_local(tmp_path, problem, trace,
                                                                                 strategy=strategy)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "an imposed round waited for nodes"
    record = done["run"][0]
    assert np.array_equal(record.mask, trace.mask)
    assert (strategy.min_train_nodes, strategy.min_available_nodes) == (5, 9)
    assert random.getstate() == state, "an imposed run changed Python's global random"


def test_failed_and_missing_replies_are_selected_but_not_in_s_t(tmp_path, identity):
    problem, trace = _problem(), _trace()
    lost = (2, int(np.flatnonzero(trace.mask[2])[0]))
    broken = (5, int(np.flatnonzero(trace.mask[5])[1]))
    record, path, *_ = _run_local(tmp_path, problem, trace, drop=[lost], fail=[broken])
    expected = trace.mask.copy()
    expected[lost], expected[broken] = False, False
    assert np.array_equal(record.selected, trace.mask) and np.array_equal(record.mask, expected)
    # FedAvg averaged the replies that came: the engine run along S_t = replied is the same run
    assert np.abs(path - _engine_path(problem, participation.Trace(expected))).max() < 1e-10
    result = check_run(record, "fedsum.theorem_4_1")
    assert isinstance(result, CheckResult) and result.per_trace_tau[0][0] == participation.delay_metrics(
        participation.Trace(expected)).tau_max


def test_without_a_trace_it_records_flowers_own_sampling(tmp_path, identity):
    problem = _problem()
    random.seed(11)
    record, path, *_ = _run_local(tmp_path, problem, None, strategy=_fedavg(fraction_train=0.5, min_train_nodes=1))
    assert (record.selected.sum(axis=1) == N // 2).all() and np.array_equal(record.mask, record.selected)
    assert np.abs(path - _engine_path(problem, record.trace)).max() < 1e-10


def test_a_resumed_record_continues_the_trace(tmp_path, identity):
    problem, trace = _problem(), _trace(12)
    seen, measure = _path_recorder(problem)
    path = tmp_path / "resumed.jsonl"
    grid = LocalGrid(vf.sgd_client_app(problem, ETA_L, K))
    arrays = vf.arrays_of(problem.x0)
    for rounds in (5, 7):                                   # a run stopped after round 4, then resumed
        with _recorder(path, problem, resume=path.exists()) as rec:
            wrapped = vf.RecordingStrategy(_fedavg(), rec, trace=trace, measure=measure)
            arrays = wrapped.start(grid=grid, initial_arrays=arrays, num_rounds=rounds).arrays
    record = load_record(path)
    assert np.array_equal(record.mask, trace.mask)
    assert np.abs(vf.vector_of(arrays) - _engine_path(problem, trace)[-1]).max() < 1e-10


def test_a_clientapp_without_the_partition_answer_is_named(tmp_path, identity):
    from flwr.clientapp import ClientApp

    grid = LocalGrid(ClientApp())
    wrapped = vf.RecordingStrategy(_fedavg(), trace=_trace())
    with pytest.raises(RuntimeError, match="answer_partition_queries"):
        wrapped.start(grid=grid, initial_arrays=vf.arrays_of(np.zeros(D)), num_rounds=T)


def test_inconsistent_sizes_are_refused(tmp_path, flower):
    with pytest.raises(ValueError, match="clients"):
        vf.RecordingStrategy(_fedavg(), _recorder(tmp_path / "r.jsonl", _problem()), trace=np.ones((3, N + 1)))
    with pytest.raises(ValueError, match="unknown"):
        vf.RecordingStrategy(_fedavg())


# --- Flower's Simulation Runtime (Ray) ------------------------------------------------------

def test_simulate_warns_once_that_run_simulation_is_deprecated(flower, monkeypatch):
    """Each call issues one FutureWarning naming the supported path, ``run_app``."""
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")
    import flwr.simulation

    calls = []
    monkeypatch.setattr(flwr.simulation, "run_simulation", lambda **kwargs: calls.append(kwargs))
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert vf.simulate("server", "client", N, cpus=1) >= 0
        deprecation = [w for w in caught if issubclass(w.category, FutureWarning)]
        assert len(deprecation) == 1 and deprecation[0].filename == __file__
        message = str(deprecation[0].message)
        assert "deprecated flwr.simulation.run_simulation" in message and "verify.records.flower.run_app" in message
    assert [c["num_supernodes"] for c in calls] == [N, N] and calls[0]["server_app"] == "server"
    assert "run_app" in vf.simulate.__doc__ and "deprecated" in vf.simulate.__doc__


@pytest.mark.slow
@pytest.mark.longest
def test_the_readme_flower_example_runs_as_pasted(tmp_path):
    """The README's Flower example, extracted and run as a reader would paste it at the root of
    the source tree, in a fresh interpreter: ``run_app`` of examples/flower_app (``flwr run``, the
    path Flower supports) records Flower's FedAvg on the imposed trace (the participants it prints
    and the record's selected and replied are the trace's S_t), repeats fedverify's FedAvg to
    rounding, writes run.jsonl and prints the verdict its comment shows."""
    pytest.importorskip("flwr", reason=SKIP_REASON)
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    source = next(b for b in blocks if "verify.records.flower" in b)
    assert "run_app(" in source and "simulate" not in source
    shown = re.search(r"^# (holds\S* \(ref\): fedavg vs fedsum\.theorem_4_1: measured \S+)", source, re.M).group(1)
    participants = re.search(r"^# (\[\[.*\]\])$", source, re.M).group(1)
    shutil.copytree(ROOT / "examples" / "flower_app", tmp_path / "examples" / "flower_app")
    (tmp_path / "example.py").write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-W", "error::FutureWarning", "example.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert shown in done.stdout and participants in done.stdout.splitlines()
    record = load_record(tmp_path / "run.jsonl")
    problem = Quadratic.random(6, 3, noise_std=0.0, seed=1)                     # the App's task.py
    trace = participation.preset("P1", n_clients=6, per_round=2).sample(10, seed=3)
    assert np.array_equal(record.mask, trace.mask) and np.array_equal(record.selected, trace.mask)
    assert participants == str([np.flatnonzero(trace.mask[t]).tolist() for t in range(3)])
    history = algorithms.run(algorithms.get("fedavg", eta_l=0.0005, eta_g=1.0, local_steps=2), problem, trace, seed=5)
    np.testing.assert_allclose(record.metric("grad_norm2"), history.grad_norm2, rtol=1e-9, atol=1e-14)


@pytest.mark.slow
@pytest.mark.longest
def test_simulate_runs_an_app_defined_in_python_and_warns(tmp_path, monkeypatch):
    """``simulate`` (Flower's deprecated ``run_simulation``) still runs a ServerApp and a ClientApp
    defined as Python objects: a real simulation that follows the imposed trace and repeats
    fedverify's FedAvg to rounding, with the FutureWarning that names ``run_app``."""
    pytest.importorskip("flwr", reason=SKIP_REASON)
    pytest.importorskip("ray", reason="Flower's simulation engine needs Ray (pip install \"flwr[simulation]\")")
    from flwr.serverapp import ServerApp

    monkeypatch.chdir(tmp_path)
    problem, trace = Quadratic.random(6, 3, noise_std=0.0, seed=1), participation.preset(
        "P1", n_clients=6, per_round=2).sample(10, seed=3)
    server_app = ServerApp()

    @server_app.main()
    def main(grid, context):
        with _recorder(tmp_path / "run.jsonl", problem) as recorder:
            strategy = vf.RecordingStrategy(_fedavg(), recorder, trace=trace, measure=vf.problem_measure(problem))
            strategy.start(grid=grid, initial_arrays=vf.arrays_of(problem.x0), num_rounds=10)

    with pytest.warns(FutureWarning, match="verify.records.flower.run_app"):
        assert vf.simulate(server_app, vf.sgd_client_app(problem, ETA_L, K, seed=0), 6, cpus=1) > 0
    record = load_record(tmp_path / "run.jsonl")
    assert np.array_equal(record.mask, trace.mask) and np.array_equal(record.selected, trace.mask)
    history = algorithms.run(algorithms.get("fedavg", eta_l=ETA_L, eta_g=1.0, local_steps=K), problem, trace, seed=0)
    np.testing.assert_allclose(record.metric("grad_norm2"), history.grad_norm2, rtol=1e-9, atol=1e-14)
