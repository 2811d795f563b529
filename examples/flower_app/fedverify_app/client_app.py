"""The ClientApp: node i runs K steps of plain local SGD on client i of the problem and answers
fedverify's partition query (``verify.records.flower.sgd_client_app``)."""
from verify.records.flower import sgd_client_app

from fedverify_app.task import ETA_L, LOCAL_STEPS, NOISE_SEED, problem

app = sgd_client_app(problem, ETA_L, LOCAL_STEPS, seed=NOISE_SEED)
