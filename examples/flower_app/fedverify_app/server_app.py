"""The ServerApp: Flower's FedAvgM (or FedAvg, run config ``strategy``) wrapped in
``verify.records.flower.RecordingStrategy``, one recorded run per trace seed.

S_t is imposed: m of the N clients uniformly without replacement each round (fedverify's preset
P1), so the header declares ``availability = {"model": "uniform", "m": m}`` and the records are
judged against Server momentum Thm 4.6 (Sun et al., AAAI 2024, arXiv:2312.12670), a bound in
expectation over the participation: the App runs ``seeds`` runs, each from the same start with a
fresh FedAvgM and the trace of seed ``trace-seed + s``, and writes each to its own record
(``record`` with ``{seed}`` replaced by s). A record that exists already is never overwritten
or appended to: the run is written to the next free name (``run-0.jsonl`` → ``run-0-2.jsonl``),
and a warning in the run's log says so. ``record_header`` writes FedAvgM(η', β) as fedverify's
``fedavgm``.
"""
import logging
from pathlib import Path

from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import FedAvg, FedAvgM

from participation import preset
from verify import RunRecorder
from verify.records.flower import RecordingStrategy, arrays_of, problem_measure, record_header

from fedverify_app.task import ETA_L, LOCAL_STEPS, N_CLIENTS, NOISE_SEED, constants, problem

app = ServerApp()
log = logging.getLogger("flwr")


def record_path(template: str, seed: int, seeds: int) -> Path:
    """The record of seed ``seed``: ``template`` with ``{seed}`` replaced (``-{seed}`` added before
    the suffix when it has none and there are several seeds), moved to the next free name when
    that file exists."""
    text = template if "{seed}" in template or seeds == 1 else str(Path(template).with_suffix("")) + "-{seed}.jsonl"
    path = Path(text.replace("{seed}", str(seed))).expanduser().resolve()
    free, n = path, 2
    while free.exists():
        free, n = path.with_name(f"{path.stem}-{n}{path.suffix}"), n + 1
    if free != path:
        log.warning("fedverify: %s exists; recording this run to %s instead", path, free)
    return free


def _strategy(config):
    """Flower's FedAvgM at the run config's η', β (``strategy = "fedavgm"``), or Flower's FedAvg
    (``strategy = "fedavg"``: fedverify's ``fedavg`` with η_g = 1, judged against FedSUM's theorems
    for reference)."""
    kind = str(config["strategy"])
    if kind == "fedavg":
        return FedAvg(fraction_evaluate=0.0)
    if kind != "fedavgm":
        raise ValueError(f"run config strategy must be 'fedavgm' or 'fedavg', got {kind!r}")
    return FedAvgM(fraction_evaluate=0.0, server_learning_rate=float(config["server-learning-rate"]),
                   server_momentum=float(config["server-momentum"]))


@app.main()
def main(grid, context):
    config = context.run_config
    rounds, m, seeds = int(config["num-server-rounds"]), int(config["per-round"]), int(config["seeds"])
    for s in range(seeds):
        trace = preset("P1", n_clients=N_CLIENTS, per_round=m).sample(rounds, seed=int(config["trace-seed"]) + s)
        strategy = _strategy(config)
        path = record_path(str(config["record"]), s, seeds)
        log.info("fedverify: recording seed %d to %s", s, path)
        header = record_header(strategy, eta_l=ETA_L, local_steps=LOCAL_STEPS)
        with RunRecorder(path, N_CLIENTS, **header, seed=NOISE_SEED, constants=constants(),
                         availability={"model": "uniform", "m": m}) as recorder:
            recording = RecordingStrategy(strategy, recorder, trace=trace, measure=problem_measure(problem))
            recording.start(grid=grid, initial_arrays=arrays_of(problem.x0), num_rounds=rounds)
