"""Run-record headers of the participation patterns: every pattern writes its own ``availability``
header (``record_header``) and its class reads it back (``from_record_header``), through the one
table ``participation.patterns.HEADER_MODELS``; ``verify.records.availability_of`` and
``verify.theorems.from_records.availability_pattern`` only ask the pattern and the table.

Models: uniform and full (FedSUM Section 2.1 Case 1; Server momentum footnote 4), cyclic and
reshuffled (FedSUM Section 2.1 Cases 3 and 4), markov (CA-Fed Assumption 1), bernoulli (FedSUM
Section 2.1 Case 2; LOGIT Section 3.3).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from participation import Trace
from participation.patterns import (
    HEADER_MODELS, Bernoulli, Cyclic, Markov, Pattern, ReshuffledCyclic, Sine, Uniform, header_fields,
    pattern_from_header, register_header,
)
from verify.records.consistency import check_availability
from verify.records import AVAILABILITY, SCHEMA_PATH, RunRecord, RunRecorder, availability_of, load_record
from verify.theorems.from_records import availability_pattern

N, T = 6, 40
PI = [0.2, 0.35, 0.5, 0.6, 0.75, 0.9]
LAM = [-0.2, 0.0, 0.1, 0.4, 0.6, 0.8]
P = [0.1, 0.25, 0.5, 0.6, 0.85, 1.0]

#: (pattern, the exact header it writes, keys in order).
PATTERNS = [
    (Uniform(N, 2), {"model": "uniform", "m": 2}),
    (Uniform(N, N), {"model": "full"}),
    (Cyclic(N, 4), {"model": "cyclic", "m": 4}),
    (ReshuffledCyclic(N, 3), {"model": "reshuffled", "m": 3}),
    (Markov(np.array(PI), np.array(LAM)), {"model": "markov", "pi": PI, "lam": LAM}),
    (Markov(0.4, 0.5, n_clients=N), {"model": "markov", "pi": [0.4] * N, "lam": [0.5] * N}),
    (Bernoulli(np.array(P)), {"model": "bernoulli", "p": P}),
    (Bernoulli(0.3, n_clients=N), {"model": "bernoulli", "p": [0.3] * N}),
]
IDS = [header["model"] + f"-{i}" for i, (_, header) in enumerate(PATTERNS)]


def _parameters(pattern) -> dict:
    return {f.name: getattr(pattern, f.name) for f in dataclasses.fields(pattern)}


def _assert_same_pattern(got, expected):
    assert type(got) is type(expected)
    mine, theirs = _parameters(got), _parameters(expected)
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        if value is None or isinstance(value, (int, str)):
            assert mine[name] == value, name
        else:
            np.testing.assert_array_equal(np.broadcast_to(mine[name], (got.n_clients,)),
                                          np.broadcast_to(value, (expected.n_clients,)), err_msg=name)
    np.testing.assert_array_equal(got.sample_batch(T, 3, seed=11), expected.sample_batch(T, 3, seed=11))


@pytest.mark.parametrize("pattern, header", PATTERNS, ids=IDS)
def test_a_pattern_writes_its_header_exactly(pattern, header):
    written = pattern.record_header()
    assert list(written.items()) == list(header.items())
    assert availability_of(pattern) == header
    assert list(availability_of(pattern)) == list(header)


@pytest.mark.parametrize("pattern, header", PATTERNS, ids=IDS)
def test_a_header_read_back_through_json_is_the_same_pattern(pattern, header):
    read = json.loads(json.dumps(pattern.record_header()))
    again = pattern_from_header(read, pattern.n_clients)
    _assert_same_pattern(again, pattern if header["model"] != "bernoulli" else Bernoulli(np.array(read["p"])))
    assert again.record_header() == pattern.record_header()


@pytest.mark.parametrize("pattern, header", PATTERNS, ids=IDS)
def test_a_header_written_and_loaded_from_a_record_gives_the_pattern(tmp_path, pattern, header):
    mask = pattern.sample(T, seed=3).mask
    path = tmp_path / "run.jsonl"
    with RunRecorder(path, N, availability=availability_of(pattern)) as rec:
        for t in range(T):
            ids = np.flatnonzero(mask[t])
            rec.record_round(t, ids, ids)
    record = load_record(path)
    assert record.header["availability"] == header
    check_availability(record)
    got, note = availability_pattern(record, "any.theorem")
    if header["model"] == "full":
        assert (got, note) == (None, None)
    else:
        assert note is None
        np.testing.assert_array_equal(got.sample_batch(T, 2, seed=5), pattern.sample_batch(T, 2, seed=5))


def test_the_table_holds_every_header_a_pattern_writes_with_its_fields():
    for pattern, header in PATTERNS:
        model = header["model"]
        assert HEADER_MODELS[model] is type(pattern)
        assert header_fields(model) == tuple(k for k in header if k != "model")
    assert set(HEADER_MODELS) == {"full", "uniform", "cyclic", "reshuffled", "markov", "bernoulli"}
    assert {header["model"] for _, header in PATTERNS} == set(HEADER_MODELS)


@pytest.mark.parametrize("source", [
    Bernoulli(np.full((T, N), 0.5)), Bernoulli(lambda t: 0.5, n_clients=N), Sine.p3(n_clients=N, per_round=2),
    Trace(np.eye(N, dtype=bool)),
], ids=["bernoulli-per-round", "bernoulli-callable", "sine", "trace"])
def test_a_source_no_header_model_describes_has_none(source):
    assert availability_of(source) is None


def test_a_trace_where_everyone_always_takes_part_is_full():
    assert availability_of(Trace(np.ones((T, N), dtype=bool))) == {"model": "full"}


@pytest.mark.parametrize("model", ["nope", None, 3])
def test_an_unknown_model_is_refused_naming_it(model):
    with pytest.raises(ValueError, match=f"unknown participation model {model!r}") as info:
        pattern_from_header({"model": model, "m": 2}, N)
    assert "\n" not in str(info.value)


def _record(availability, vectors=None) -> RunRecord:
    mask = Cyclic(N, 2).sample(T, seed=0).mask
    header = {"format": "fedverify-run", "version": 2, "n_clients": N}
    if availability is not None:
        header["availability"] = availability
    return RunRecord(header=header, mask=mask, selected=mask, path=Path("rec.jsonl"), vectors=vectors or {})


def test_availability_pattern_refuses_a_model_the_table_does_not_know():
    with pytest.raises(ValueError, match="unknown participation model 'spiral'"):
        availability_pattern(_record({"model": "spiral"}), "any.theorem")


@pytest.mark.parametrize("availability, pattern, note", [
    (None, None, None), ({"model": "full"}, None, None), ({"model": "estimate"}, None, "estimate"),
    ({"model": "any", "m": 2}, None, "any arrival rule with m = 2 arrivals a round (the header's availability)"),
])
def test_models_without_a_pattern_give_none_and_a_note(availability, pattern, note):
    assert availability_pattern(_record(availability), "any.theorem") == (pattern, note)


@pytest.mark.parametrize("availability", [None, {"model": "bernoulli", "p": [0.5] * N}])
def test_the_recorded_per_round_probabilities_give_bernoulli_per_round(availability):
    p = np.random.default_rng(2).uniform(0.1, 0.9, (T, N))
    got, note = availability_pattern(_record(availability, {"probabilities": p}), "logit.theorem_1")
    assert note == "p_n^t: the recorded per-round probabilities"
    np.testing.assert_array_equal(got.p, p)


def test_null_recorded_probabilities_are_refused_naming_the_client_and_round():
    p = np.full((T, N), 0.5)
    p[7, 4] = np.nan
    with pytest.raises(ValueError, match="probabilities is null for client 4 in round 7"):
        availability_pattern(_record(None, {"probabilities": p}), "logit.theorem_1")


def test_the_schema_names_the_models_of_the_table():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    names = set()
    for case in schema["$defs"]["header"]["properties"]["availability"]["oneOf"]:
        model = case["properties"]["model"]
        names |= set(model.get("enum", [model.get("const")]))
        assert set(case.get("required", ())) <= set(case["properties"])
    assert names == set(AVAILABILITY) == set(HEADER_MODELS) | {"any", "estimate"}
    for name in names:
        fields = {key for case in schema["$defs"]["header"]["properties"]["availability"]["oneOf"]
                  if name in case["properties"]["model"].get("enum", [case["properties"]["model"].get("const")])
                  for key in case.get("required", ())}
        assert fields == set(AVAILABILITY[name]), name


@pytest.mark.parametrize("pattern, header", PATTERNS, ids=IDS)
def test_every_written_header_is_valid_for_the_schema(pattern, header):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate({"format": "fedverify-run", "version": 2, "n_clients": N,
                         "availability": pattern.record_header()}, schema)


@dataclass(frozen=True)
class EveryKth(Pattern):
    """A test-local pattern: client i takes part in round t when (i + t) is a multiple of k."""

    n_clients: int
    k: int
    deterministic = True
    HEADER_FIELDS = {"every-kth": ("k",)}

    def record_header(self) -> dict:
        return {"model": "every-kth", "k": int(self.k)}

    @classmethod
    def from_record_header(cls, header, n_clients):
        return cls(n_clients, int(header["k"]))

    def _generate(self, root, replicates, start, stop):
        one = (np.arange(start, stop)[:, None] + np.arange(self.n_clients)[None, :]) % self.k == 0
        return np.broadcast_to(one, (len(replicates),) + one.shape).copy()


@pytest.fixture
def every_kth():
    register_header(EveryKth)
    try:
        yield EveryKth
    finally:
        del HEADER_MODELS["every-kth"]


def _write(path, pattern):
    mask = pattern.sample(T, seed=1).mask
    with RunRecorder(path, pattern.n_clients, algorithm="fedavg", local_steps=1,
                     availability=availability_of(pattern)) as rec:
        for t in range(T):
            ids = np.flatnonzero(mask[t])
            rec.record_round(t, ids, ids, grad_norm2=1.0 / (t + 1), loss=1.0)
    return mask


def test_a_new_pattern_is_only_its_class(tmp_path):
    pattern = EveryKth(N, 3)
    with pytest.raises(ValueError, match="availability.model must be one of .*got 'every-kth'"):
        _write(tmp_path / "unregistered.jsonl", pattern)
    register_header(EveryKth)
    try:
        assert "every-kth" in AVAILABILITY and AVAILABILITY["every-kth"] == ("k",)
        mask = _write(tmp_path / "run.jsonl", pattern)
        record = load_record(tmp_path / "run.jsonl")
        assert record.header["availability"] == {"model": "every-kth", "k": 3}
        np.testing.assert_array_equal(record.mask, mask)
        check_availability(record)
        got, note = availability_pattern(record, "any.theorem")
        assert note is None and got == pattern
        np.testing.assert_array_equal(got.sample_batch(T, 2, seed=9), pattern.sample_batch(T, 2, seed=9))
    finally:
        del HEADER_MODELS["every-kth"]
    assert "every-kth" not in AVAILABILITY


def test_a_header_a_new_pattern_needs_is_refused_when_missing(tmp_path, every_kth):
    with pytest.raises(ValueError, match="availability 'every-kth' needs 'k'"):
        RunRecorder(tmp_path / "run.jsonl", N, availability={"model": "every-kth"})


def test_a_new_model_with_m_is_held_to_m_clients_a_round():
    @dataclass(frozen=True)
    class Blocks(Cyclic):
        HEADER_FIELDS = {"blocks": ("m",)}

        def record_header(self) -> dict:
            return {"model": "blocks", "m": int(self.per_round)}

    register_header(Blocks)
    try:
        mask = Cyclic(N, 2).sample(T, seed=0).mask
        record = RunRecord(header={"format": "fedverify-run", "version": 2, "n_clients": N,
                                   "availability": {"model": "blocks", "m": 3}},
                           mask=mask, selected=mask, path=Path("blocks.jsonl"))
        with pytest.raises(ValueError, match="availability 'blocks' gives 3 client\\(s\\) in round 0, but it has 2"):
            check_availability(record)
    finally:
        del HEADER_MODELS["blocks"]


def test_a_model_name_another_class_holds_is_refused():
    @dataclass(frozen=True)
    class Impostor(Cyclic):
        HEADER_FIELDS = {"uniform": ("m",)}

    with pytest.raises(ValueError, match="header model 'uniform' is Uniform's, not Impostor's"):
        register_header(Impostor)
    assert HEADER_MODELS["uniform"] is Uniform
