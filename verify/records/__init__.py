"""Run records and what makes or reads them.

* :mod:`~verify.records.format`: the record itself (format ``fedverify-run``, JSON Lines):
  ``RunRecorder`` writes one round at a time, ``load_record`` reads one back, checked field by
  field; its names are also this package's.
* :mod:`~verify.records.consistency`: what a record says about itself must agree (its replies
  with its participation model, its constants with its own numbers, records judged together
  with one setting).
* :mod:`~verify.records.checks`: ``check_run``, records judged against a theorem by the plan and
  judge that ``check`` uses for fedverify's own runs.
* :mod:`~verify.records.model_measures`: what a record needs, measured on a PyTorch model.
* :mod:`~verify.records.flower`: Flower runs recorded (a strategy, a client, ``flwr run``).
"""
from .format import (AVAILABILITY, CONSTANTS, FORMAT, PER_CLIENT, PER_ROUND, READS, SCHEMA_PATH, VERSION, RunRecord,
                     RunRecorder, algorithm_fields, amend_header, availability_of, load_record, read_header,
                     record_from_history)

__all__ = ["RunRecord", "RunRecorder", "load_record", "read_header", "FORMAT", "VERSION", "READS", "SCHEMA_PATH",
           "PER_CLIENT", "PER_ROUND", "CONSTANTS", "AVAILABILITY", "record_from_history", "availability_of",
           "algorithm_fields", "amend_header"]
