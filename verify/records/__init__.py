"""Run records and what makes or reads them.

* :mod:`~verify.records.fields`: the record itself (format ``fedverify-run``, JSON Lines): its
  constants and field tables, and the checks of a header and of a round.
* :mod:`~verify.records.reading`: ``load_record`` reads a record back, checked field by field.
* :mod:`~verify.records.writing`: ``RunRecorder`` writes one round at a time,
  ``record_from_history`` the record of an engine run, ``amend_header`` adds to a header. The
  public names of these three modules are also this package's.
* :mod:`~verify.records.consistency`: what a record says about itself must agree (its replies
  with its participation model, its constants with its own numbers, records judged together
  with one setting).
* :mod:`~verify.records.checks`: ``check_run``, records judged against a theorem by the plan and
  judge that ``check`` uses for fedverify's own runs.
* :mod:`~verify.records.model_measures`: what a record needs, measured on a PyTorch model.
* :mod:`~verify.records.flower`: Flower runs recorded (a strategy, a client, ``flwr run``).
"""
from .fields import AVAILABILITY, CONSTANTS, FORMAT, PER_CLIENT, PER_ROUND, READS, SCHEMA_PATH, VERSION
from .reading import RunRecord, load_record, read_header
from .writing import RunRecorder, algorithm_fields, amend_header, availability_of, record_from_history

__all__ = ["RunRecord", "RunRecorder", "load_record", "read_header", "FORMAT", "VERSION", "READS", "SCHEMA_PATH",
           "PER_CLIENT", "PER_ROUND", "CONSTANTS", "AVAILABILITY", "record_from_history", "availability_of",
           "algorithm_fields", "amend_header"]
