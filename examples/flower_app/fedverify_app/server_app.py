"""The ServerApp: Flower's FedAvgM wrapped in ``verify.flower.RecordingStrategy``.

S_t is imposed: m of the N clients uniformly without replacement each round (fedverify's preset
P1 with ``trace-seed``), so the header declares ``availability = {"model": "uniform", "m": m}``
and the record is judged against Server momentum Thm 4.6 (Sun et al., AAAI 2024,
arXiv:2312.12670). ``record_header`` writes FedAvgM(η', β) as fedverify's ``fedavgm``.
"""
import logging
from pathlib import Path

from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import FedAvgM

from participation import preset
from verify import RunRecorder
from verify.flower import RecordingStrategy, arrays_of, problem_measure, record_header

from fedverify_app.task import ETA_L, LOCAL_STEPS, N_CLIENTS, NOISE_SEED, constants, problem

app = ServerApp()


@app.main()
def main(grid, context):
    config = context.run_config
    rounds, m = int(config["num-server-rounds"]), int(config["per-round"])
    trace = preset("P1", n_clients=N_CLIENTS, per_round=m).sample(rounds, seed=int(config["trace-seed"]))
    strategy = FedAvgM(fraction_evaluate=0.0, server_learning_rate=float(config["server-learning-rate"]),
                       server_momentum=float(config["server-momentum"]))
    path = Path(str(config["record"])).expanduser().resolve()
    logging.getLogger("flwr").info("fedverify: recording to %s", path)
    header = record_header(strategy, eta_l=ETA_L, local_steps=LOCAL_STEPS)
    with RunRecorder(path, N_CLIENTS, **header, seed=NOISE_SEED, constants=constants(),
                     availability={"model": "uniform", "m": m}) as recorder:
        recording = RecordingStrategy(strategy, recorder, trace=trace, measure=problem_measure(problem))
        recording.start(grid=grid, initial_arrays=arrays_of(problem.x0), num_rounds=rounds)
