"""The names fedverify's ServerApp and ClientApp pieces agree on: the discovery query's action and
message type, the partition id's key in its reply, and the training config key of the record's round.
"""
from __future__ import annotations

#: The action of the discovery query; its message type is ``"query." + PARTITION_ACTION``.
PARTITION_ACTION = "fedverify_partition"
PARTITION_QUERY = f"query.{PARTITION_ACTION}"
#: The key of the partition id in the discovery reply's MetricRecord (Flower's own name for it).
PARTITION_KEY = "partition-id"
#: The training config key carrying the record's round t.
ROUND_KEY = "fedverify-round"
