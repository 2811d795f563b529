"""Sizes that cannot fit are refused before the work, in one line naming the need and the limit;
long work says how long it will take before it starts.

Every command runs in this process (``verify.cli.main``) with ``FEDVERIFY_MEMORY_GB`` set, and
the sizes are chosen so that nothing large is allocated even where a refusal were missing: a
"huge" trace only declares its clients (its mask is allocated as zeros and never touched), and
where a command would go on to long work, that work is replaced by a stub once the line that
must come before it has been checked. No test measures wall-clock time.
"""
from __future__ import annotations

import json

import pytest

from verify.sweep import runner as sweep

from .test_input_validation import assert_refused, cli

ENV_MEMORY = "FEDVERIFY_MEMORY_GB"


@pytest.fixture
def limit(monkeypatch):
    """Set the memory limit (gigabytes) for the test."""
    def set_limit(gigabytes: float) -> None:
        monkeypatch.setenv(ENV_MEMORY, str(gigabytes))
    return set_limit


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _interrupt(*args, **kwargs):
    """Stands in for long work: the command ends as on Ctrl-C (exit code 130)."""
    raise KeyboardInterrupt


# --------------------------------------------------------------------------- mc, delays


def test_mc_announces_a_pattern_too_large_to_time_quickly_before_timing_it(limit, monkeypatch):
    """`mc P3 --set n_clients=10000000` timed its run for a minute before saying anything."""
    from verify.cli import commands

    limit(3)
    monkeypatch.setattr(commands, "TIMING_CELLS", 1000)      # N = 2000 stands for N = 10^7
    monkeypatch.setattr(commands, "_mc_seconds", _interrupt)
    code, _, err = cli(["mc", "P3", "--set", "n_clients=2000", "-T", "100", "--reps", "10"])
    assert code == 130, err
    first = err.splitlines()[0]
    assert first == ("fedverify: P3: 10 traces of 100 rounds × 2000 clients; timing them first, which at more "
                     "than 1,000 clients takes a while itself"), err


def test_mc_refuses_markov_runs_that_cannot_fit_before_drawing_them(limit):
    """`mc cafed-temporal --set n_clients=10000000` ended in a generic "out of memory"."""
    limit(0.05)
    err = assert_refused(["mc", "cafed-temporal", "--set", "n_clients=10000"],
                         "the absence runs of 10000 Markov chains over 2000 rounds (method 'gaps': ",
                         "run pairs a replicate) needs about", "the memory limit is 51.2 MiB")
    assert "out of memory" not in err


def test_delays_refuses_replicates_that_cannot_fit_before_announcing_their_time(limit):
    """`delays --reps 99999999999999` announced about 1706991 days, then "out of memory"."""
    limit(3)
    assert_refused(["delays", "--reps", "99999999999999"],
                   "99999999999999 replicates' τ_max and τ_avg needs about 5.82e+03 TiB; the memory limit is 3 GiB")


def test_mc_refuses_replicates_that_cannot_fit(limit):
    limit(3)
    assert_refused(["mc", "P2", "--reps", "99999999999999"], "99999999999999 replicates' τ_max and τ_avg needs about")


# --------------------------------------------------------------------------- delays --trace


def _declared_trace(folder, n_clients: int):
    """A JSON trace of one round declaring ``n_clients`` clients, of which one takes part."""
    path = folder / "wide.json"
    path.write_text(json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": n_clients, "active": [[0]]}))
    return path


def test_delays_refuses_a_trace_report_that_cannot_fit(workdir, limit):
    """A trace declaring 2^31 clients was loaded (2 GiB, under the limit) and its report then
    ran out of memory or ran for minutes; the report's own need is checked after loading."""
    limit(0.05)
    path = _declared_trace(workdir, 2**24)
    assert_refused(["delays", "--trace", str(path)],
                   "the report on wide.json (1 round × 16777216 clients) needs about 112 MiB; the memory limit is "
                   "51.2 MiB")


def test_delays_announces_a_long_trace_report_before_it(workdir, limit, monkeypatch):
    from verify.cli.commands import delays

    limit(2)
    path = _declared_trace(workdir, 2**27)
    monkeypatch.setattr(delays, "trace_report", lambda trace, label: ["the report"])
    code, out, err = cli(["delays", "--trace", str(path)])
    assert code == 0 and out.strip() == "the report", err
    assert err == "fedverify: wide.json: the report on 1 round × 134217728 clients, about 34 s\n"


def test_a_small_trace_report_is_not_announced(workdir, limit):
    limit(2)
    path = _declared_trace(workdir, 100)
    code, out, err = cli(["delays", "--trace", str(path)])
    assert code == 0 and err == "" and "N=100 clients" in out


# --------------------------------------------------------------------------- experiment


EXPERIMENT = ["experiment", "fedsum", "--dataset", "digits", "-N", "4", "--limit", "40", "--algorithms", "fedavg",
              "--patterns", "P1", "-o", "out"]


def test_experiment_refuses_rounds_that_cannot_fit_before_building_anything(workdir, limit, monkeypatch):
    """`experiment fedsum -T 1000000000` built the problem and timed runs before failing."""
    from verify.studies import experiment

    limit(3)
    monkeypatch.setattr(experiment, "build_problem", _interrupt)
    assert_refused(["experiment", "fedsum", "-T", "1000000000"],
                   "experiment at T=1000000000, N=100: the traces of 3 patterns and one run's history needs about "
                   "339 GiB; the memory limit is 3 GiB")
    assert not (workdir / "out").exists()


@pytest.mark.slow
def test_experiment_with_many_local_steps_says_how_long_before_it_starts(workdir, limit, monkeypatch):
    """`experiment fedsum -K 100000000` printed nothing for over a minute: its time estimate ran
    rounds of 10^8 local steps. The estimate now times at most TIMED_STEPS steps and scales up."""
    from verify.studies import experiment

    limit(3)
    real = experiment.fedsum_experiment
    asked = []

    def only_short_runs(problem, rounds, **options):
        asked.append(options["local_steps"])
        if options["local_steps"] > experiment.TIMED_STEPS:
            raise KeyboardInterrupt            # the experiment itself: announced before, not run here
        return real(problem, rounds, **options)

    monkeypatch.setattr(experiment, "fedsum_experiment", only_short_runs)
    code, _, err = cli([*EXPERIMENT, "--rounds", "1", "-K", "100000000", "--long"])    # announced at hours
    assert code == 130, err
    lines = err.splitlines()
    assert lines[0].startswith("fedverify: experiment: 1 runs of 1 rounds on digits (N=4), about "), err
    assert lines[-1] == "fedverify: interrupted"
    assert asked == [experiment.TIMED_STEPS] * 3 + [100_000_000]


# --------------------------------------------------------------------------- sweep cells


_CHECK = {"algorithms": "fedavg", "patterns": "P1", "n_clients": 10, "rounds": 10, "runs": 2}
_MONTE_CARLO = {"patterns": "P1", "n_clients": 10, "rounds": 10, "reps": 10}


@pytest.mark.parametrize("kind, key, value, message", [
    ("check", "rounds", 10**12, "check cells with rounds = 1000000000000, n_clients = 10: one run's trace and history "
                                "needs about 67.3 TiB"),
    ("check", "n_clients", 10**7, "check cells with problem = 'quadratic', n_clients = 10000000: the problem needs "
                                  "about 47.7 GiB"),
    ("check", "runs", 10**8, "check cells with runs = 100000000: the noise seeds' results needs about 11.9 GiB"),
    ("monte_carlo", "reps", 10**12, "monte_carlo cells with reps = 1000000000000: 1000000000000 replicates' τ_max "
                                    "and τ_avg needs about 58.2 TiB"),
    ("monte_carlo", "rounds", 10**12, "monte_carlo cells with pattern = 'P1', n_clients = 10, rounds = 1000000000000, "
                                      "reps = 10: Monte-Carlo over 1000000000000 rounds × 10 clients"),
])
def test_sweep_refuses_cells_that_cannot_fit_before_running_any(workdir, limit, kind, key, value, message):
    limit(3)
    spec = {kind: {**(_CHECK if kind == "check" else _MONTE_CARLO), key: value}}
    with pytest.raises(ValueError) as err:
        sweep.expand(spec)
    assert message in str(err.value) and "the memory limit is 3 GiB" in str(err.value)
    assert "\n" not in str(err.value)


def test_sweep_names_the_table_of_the_cells_it_refuses(workdir, limit):
    limit(3)
    spec = {"check": [_CHECK, {**_CHECK, "runs": 10**8}]}
    with pytest.raises(ValueError, match=r"^check\[1\] cells with runs = 100000000: "):
        sweep.expand(spec)


def test_the_sweep_command_refuses_such_a_cell_in_one_line_and_writes_nothing(workdir, limit):
    limit(3)
    (workdir / "spec.json").write_text(json.dumps({"check": {**_CHECK, "rounds": 10**12}}))
    assert_refused(["sweep", "spec.json", "-o", "out", "--no-progress"],
                   "check cells with rounds = 1000000000000, n_clients = 10: one run's trace and history")
    assert not (workdir / "out").exists()


def test_a_trace_file_shorter_than_the_rounds_is_counted_at_its_own_length(workdir, limit):
    """A check cell runs a shorter trace file for its own length, so huge rounds are not refused."""
    from participation import Trace

    limit(3)
    Trace.from_sets([[0, 1]] * 5, 10).save(workdir / "short.json")
    cells = sweep.expand({"check": {**_CHECK, "patterns": "short.json", "rounds": 10**12}})
    assert len(cells) == 1 and cells[0].config["rounds"] == 10**12


def test_sizes_that_fit_pass_the_sweep_check(workdir, limit):
    limit(3)
    assert len(sweep.expand({"check": _CHECK, "monte_carlo": _MONTE_CARLO})) == 2
