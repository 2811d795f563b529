"""The ClientApp side: the answer to fedverify's discovery query registered on a ``ClientApp``, and
:func:`sgd_client_app`, a ready ``ClientApp`` of plain local SGD on a fedverify problem.
"""
from __future__ import annotations

from .conversions import arrays_like, vector_of
from .dependency import require_flower
from .message_keys import PARTITION_ACTION, PARTITION_KEY, ROUND_KEY


def answer_partition_queries(app):
    """Register on a Flower ``ClientApp`` (Message API) the answer to fedverify's discovery
    query: a MetricRecord ``{"partition-id": context.node_config["partition-id"]}``. Returns ``app``."""
    require_flower()
    from flwr.app import Message, MetricRecord, RecordDict

    @app.query(PARTITION_ACTION)
    def _fedverify_partition(msg, context):
        if PARTITION_KEY not in context.node_config:
            raise ValueError("this SuperNode has no partition-id in its node config: start it with "
                             "--node-config \"partition-id=<i> num-partitions=<N>\"")
        partition = int(context.node_config[PARTITION_KEY])
        return Message(RecordDict({"fedverify": MetricRecord({PARTITION_KEY: partition})}), reply_to=msg)

    return app


def sgd_client_app(problem, eta_l: float, local_steps: int, seed=0, *, weight_key: str = "num-examples"):
    """A Flower ``ClientApp`` in which the node of partition i trains ``problem``'s client i.

    Train: from the received model x (the message's ArrayRecord, any layout of ``problem.dim``
    numbers), K = ``local_steps`` steps y ← y − η_l g_i(y), g_i the problem's stochastic
    gradient with the noise of ``algorithms.NoiseStream(seed)`` at (round t, step k, client i), t
    read from the config (``"fedverify-round"``, else Flower's ``"server-round"`` − 1); replies y in x's
    layout and ``{weight_key: 1}``. Evaluate: replies ``{"loss": f_i(x), weight_key: 1}``.
    Query: answers fedverify's discovery query (:func:`answer_partition_queries`).
    """
    require_flower()
    import torch
    from flwr.app import Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from algorithms.base import positive_rate, step_count
    from algorithms.noise import NoiseStream

    eta_l = positive_rate(eta_l, "eta_l")
    local_steps = step_count(local_steps, "local_steps")
    noise = NoiseStream(seed)
    app = answer_partition_queries(ClientApp())

    def model(msg):
        records = list(msg.content.array_records.values())
        if len(records) != 1:
            raise ValueError(f"expected one ArrayRecord (the model), got {len(records)}")
        x = torch.as_tensor(vector_of(records[0]), dtype=problem.dtype, device=problem.device)
        if x.shape != (problem.dim,):
            raise ValueError(f"the model has {x.numel()} entries, the problem {problem.dim}")
        return records[0], x

    def client_of(context):
        client = int(context.node_config[PARTITION_KEY])
        if not 0 <= client < problem.n_clients:
            raise ValueError(f"partition id {client} is outside the problem's 0..{problem.n_clients - 1}")
        return client

    @app.train()
    def train(msg, context):
        client = client_of(context)
        arrays, x = model(msg)
        config = next(iter(msg.content.config_records.values()), {})
        t = int(config[ROUND_KEY]) if ROUND_KEY in config else int(config.get("server-round", 1)) - 1
        clients = torch.tensor([client], device=problem.device)
        y = x.unsqueeze(0)
        for k in range(local_steps):
            y = y - eta_l * problem.stochastic_grads(y, clients, noise.draws(t, k, clients))
        reply = RecordDict({"arrays": arrays_like(arrays, y[0].detach().cpu().numpy()),
                            "metrics": MetricRecord({weight_key: 1})})
        return Message(reply, reply_to=msg)

    @app.evaluate()
    def evaluate(msg, context):
        client = client_of(context)
        _, x = model(msg)
        loss = float(problem.client_losses(x)[client]) if hasattr(problem, "client_losses") else float("nan")
        return Message(RecordDict({"metrics": MetricRecord({"loss": loss, weight_key: 1})}), reply_to=msg)

    return app
