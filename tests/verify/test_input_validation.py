"""Hostile inputs: every loader and every command, fed random, truncated, garbled and
wrongly typed files and values, and files that declare huge sizes.

The rule checked: a loader raises ValueError (one line) and nothing else; a command prints
one line on stderr and exits with code 2, and no exception escapes ``verify.cli.main``.
Memory and time are bounded by construction: every file here is a few kilobytes at most, a
"huge" one only declares a huge size (refused from its header), and the numbers given to the
commands are either invalid or so large that the memory check refuses them up front. The
hypothesis tests run under the suite's CI profile (derandomised) with few examples.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from participation import Trace
from participation.events import load_events

ENV_MEMORY = "FEDVERIFY_MEMORY_GB"
SMALL = settings(settings.get_profile("ci"), max_examples=30,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@contextlib.contextmanager
def memory_limit_gb(value: str):
    """FEDVERIFY_MEMORY_GB set for the block (monkeypatch is per test, not per example)."""
    old = os.environ.get(ENV_MEMORY)
    os.environ[ENV_MEMORY] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[ENV_MEMORY]
        else:
            os.environ[ENV_MEMORY] = old


def refused(call, *args, one_line: bool = True, **kwargs) -> str | None:
    """Run a loader: a ValueError (one line) is a refusal; any other exception fails the test."""
    try:
        call(*args, **kwargs)
    except ValueError as err:
        message = str(err)
        assert message and ("\n" not in message or not one_line), message
        assert len(message) < 2000, f"a {len(message)}-character message"
        return message
    return None


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def _write(folder: Path, name: str, payload: bytes) -> Path:
    path = folder / name
    path.write_bytes(payload)
    return path


# --------------------------------------------------------------------------- trace files
def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _good_trace_bytes(suffix: str) -> bytes:
    mask = np.random.default_rng(3).random((9, 11)) < 0.4
    buffer = io.BytesIO()
    if suffix == ".npz":
        np.savez_compressed(buffer, format=np.array("fedverify-trace"), version=np.array(1),
                            shape=np.array(mask.shape, dtype=np.int64), bits=np.packbits(mask, axis=1))
        return buffer.getvalue()
    if suffix == ".csv":
        return "\n".join(",".join(str(int(v)) for v in row) for row in mask).encode() + b"\n"
    return json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": 11,
                       "active": [np.flatnonzero(r).tolist() for r in mask]}).encode()


@st.composite
def damaged(draw, good: bytes):
    """``good`` truncated, with bytes overwritten, or with bytes inserted."""
    data = bytearray(good)
    how = draw(st.sampled_from(["truncate", "flip", "insert"]))
    if how == "truncate":
        return bytes(data[:draw(st.integers(0, len(data)))])
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data) - 1))
        value = draw(st.integers(0, 255))
        if how == "flip":
            data[at] = value
        else:
            data.insert(at, value)
    return bytes(data)


def trace_payloads(suffix: str):
    return st.one_of(st.binary(max_size=600), damaged(_good_trace_bytes(suffix)))


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".json"])
def test_trace_loader_on_random_and_damaged_files(scratch, suffix):
    @SMALL
    @given(payload=trace_payloads(suffix), n_clients=st.sampled_from([None, 11, 3]))
    def check(payload, n_clients):
        path = _write(scratch, f"fuzz{suffix}", payload)
        refused(Trace.load, path, n_clients=n_clients)

    check()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@pytest.mark.slow
@SMALL
@given(doc=st.fixed_dictionaries({"format": st.sampled_from(["fedverify-trace", "other", 1]),
                                  "version": st.one_of(st.just(1), JSON_VALUES),
                                  "n_clients": st.one_of(st.integers(-3, 12), JSON_VALUES),
                                  "active": JSON_VALUES | st.lists(st.lists(JSON_VALUES, max_size=3), max_size=4)}))
def test_json_trace_with_wrong_types(scratch, doc):
    path = _write(scratch, "typed.json", json.dumps(doc).encode())
    message = refused(Trace.load, path)
    if doc["version"] != 1 or isinstance(doc["version"], bool):
        assert message is not None


@SMALL
@given(rounds=st.integers(1, 3), n_clients=st.integers(2**21, 2**80), form=st.sampled_from(["doc", "bare"]))
def test_json_declaring_a_huge_trace_is_refused(scratch, rounds, n_clients, form):
    """A few bytes declaring up to 2^80 clients: refused from the declared size (1 MiB limit)."""
    active = [[0]] * rounds
    doc = active if form == "bare" else {"format": "fedverify-trace", "version": 1, "n_clients": n_clients,
                                         "active": active}
    path = _write(scratch, "huge.json", json.dumps(doc).encode())
    with memory_limit_gb(str(1 / 1024)):
        message = refused(Trace.load, path, n_clients=n_clients if form == "bare" else None)
    assert message is not None and ("needs about" in message or "exceeds the limit" in message)


def _npy_header(shape, descr="|u1") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


@SMALL
@given(shape=st.lists(st.integers(0, 2**31), min_size=0, max_size=3), descr=st.sampled_from(["|u1", "|b1", "<i8", "<f8"]),
       name=st.sampled_from(["mask", "bits", "arr_0"]), body=st.binary(max_size=64))
def test_npz_members_declaring_any_shape(scratch, shape, descr, name, body):
    """A member header may declare any shape; the body holds a few bytes at most."""
    path = scratch / "declared.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        if name == "bits":
            for key, value in (("format", np.array("fedverify-trace")), ("version", np.array(1)),
                               ("shape", np.array(shape[:2] or [1, 1], dtype=np.int64))):
                archive.writestr(f"{key}.npy", _npz_member(value))
        archive.writestr(f"{name}.npy", _npy_header(shape, descr) + body)
    with memory_limit_gb(str(1 / 1024)):
        message = refused(Trace.load, path)
    if int(np.prod(shape, dtype=object)) * np.dtype(descr).itemsize > 2**20:
        assert message is not None


def _npz_member(value) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, value)
    return buffer.getvalue()


@SMALL
@given(arrays=st.dictionaries(st.sampled_from(["mask", "format", "version", "shape", "bits", "x"]),
                              st.sampled_from([np.zeros((2, 3), bool), np.ones((2, 3), np.int8), np.array([[2, 0]]),
                                               np.zeros((2, 3)), np.array("fedverify-trace"), np.array(1),
                                               np.array([2, 3]), np.array([2**62, 2**62]), np.zeros((2, 1), np.uint8),
                                               np.array(["a", "b"]), np.zeros(0), np.zeros((0, 3), bool)]),
                              max_size=5))
def test_npz_archives_with_wrong_types(scratch, arrays):
    path = _write(scratch, "typed.npz", _npz(**arrays) if arrays else b"")
    refused(Trace.load, path)


@SMALL
@given(lines=st.integers(2**16, 2**30), width=st.integers(1, 2**20))
def test_csv_too_large_for_the_limit_is_refused_from_its_counts(scratch, lines, width):
    """The CSV declares nothing, so its size is counted: a file of 2^16 short lines (or one
    long first row) against a limit of 64 KiB is refused before the mask is built."""
    first = ("0," * (min(width, 4096) - 1) + "1\n").encode()
    path = _write(scratch, "counted.csv", first + b"1\n" * min(lines, 2**16))
    with memory_limit_gb(str(64 / 2**20)):
        assert "needs about" in refused(Trace.load, path)


# --------------------------------------------------------------------------- event logs
EVENT_DOCS = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries({"devices": st.dictionaries(st.text(max_size=4), JSON_VALUES
                                                      | st.lists(st.lists(st.floats() | st.integers(-3, 3), max_size=3),
                                                                 max_size=4), max_size=3)}),
    st.dictionaries(st.text(max_size=4), st.fixed_dictionaries({"messages": JSON_VALUES | st.text(max_size=40)}),
                    max_size=3),
    st.dictionaries(st.text(max_size=4), st.fixed_dictionaries({"active": JSON_VALUES, "inactive": JSON_VALUES}),
                    max_size=3),
)


@pytest.mark.slow
@SMALL
@given(doc=EVENT_DOCS)
def test_event_loader_on_wrong_types(scratch, doc):
    try:
        text = json.dumps(doc).encode()
    except ValueError:                          # infinities are not JSON
        text = json.dumps(doc, allow_nan=True).encode()
    refused(load_events, _write(scratch, "events.json", text))


def test_event_log_messages_quote_client_ids(tmp_path):
    """A client id holding a line break was put into the message raw (two lines)."""
    message = refused(load_events, _write(tmp_path, "e.json", json.dumps({"devices": {"a\nb": None}}).encode()),
                      one_line=False)
    assert "\n" not in message and "'a\\nb'" in message


@SMALL
@given(payload=st.one_of(st.binary(max_size=600), damaged(json.dumps({"devices": {"a": [[0, 1], [5, 0]]}}).encode())))
def test_event_loader_on_random_and_damaged_files(scratch, payload):
    refused(load_events, _write(scratch, "events.json", payload))


# --------------------------------------------------------------------------- image data sets
def _idx(magic: int, dims, body: bytes) -> bytes:
    return struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + body


@SMALL
@given(magic=st.sampled_from([0x0803, 0x0801, 0x0800, 0x0903, 0]), count=st.integers(0, 2**32 - 1),
       rows=st.sampled_from([28, 27, 0, 2**32 - 1]), body=st.binary(max_size=64), gz=st.booleans(),
       cut=st.integers(0, 20))
def test_idx_images_with_any_header(scratch, magic, count, rows, body, gz, cut):
    """(Fashion-)MNIST image files whose header declares anything, over a few bytes."""
    from algorithms import data

    root = scratch / "mnist"
    root.mkdir(exist_ok=True)
    payload = _idx(magic, (count, rows, 28), body)
    payload = payload[:len(payload) - cut] if cut < 4 else payload
    for stale in root.glob("train-images-idx3-ubyte*"):
        stale.unlink()
    name = "train-images-idx3-ubyte" + (".gz" if gz else "")
    _write(root, name, gzip.compress(payload) if gz else payload)
    _write(root, "train-labels-idx1-ubyte", _idx(0x0801, (2,), b"\x01\x02"))
    with memory_limit_gb(str(1 / 1024)):
        assert refused(data.load, "mnist", root) is not None


def test_gzipped_idx_declaring_gigabytes_is_refused_before_decompressing(tmp_path):
    """A 2 MB gzipped IDX inflating to 7.9 GiB of float32 ended in an allocation failure;
    the declared size is now checked first. The data after the header is not even valid
    gzip here, so reading it would have failed differently."""
    from algorithms import data

    header = _idx(0x0803, (2_550_000, 28, 28), b"")
    stream = gzip.compress(header + b"\0" * 4096)
    _write(tmp_path, "train-images-idx3-ubyte.gz", stream[:40])          # the header, then nothing valid
    _write(tmp_path, "train-labels-idx1-ubyte", _idx(0x0801, (2,), b"\x01\x02"))
    with memory_limit_gb("1"):
        message = refused(data.load, "mnist", tmp_path)
    assert "train-images-idx3-ubyte.gz" in message and "2550000 × 28 × 28" in message
    assert "needs about 9.31 GiB" in message and "the memory limit is 1 GiB" in message


def test_plain_cifar_batch_larger_than_the_limit_is_refused_before_reading(tmp_path):
    from algorithms import data

    for name in [f"data_batch_{i}.bin" for i in range(1, 6)]:
        _write(tmp_path, name, b"\0" * 3073 * 64)
    with memory_limit_gb(str(64 / 2**20)):
        assert "needs about" in refused(data.load, "cifar10", tmp_path)


def test_svhn_variables_declaring_more_than_the_limit_are_refused(tmp_path):
    from scipy.io import savemat

    from algorithms import data

    savemat(tmp_path / "train_32x32.mat", {"X": np.zeros((32, 32, 3, 200), np.uint8), "y": np.ones((200, 1), np.uint8)},
            do_compression=True)
    with memory_limit_gb(str(1 / 1024)):
        assert "its variables declare" in refused(data.load, "svhn", tmp_path)


@SMALL
@given(payload=st.binary(max_size=4000), which=st.sampled_from(["cifar10", "svhn"]), gz=st.booleans())
def test_cifar_and_svhn_on_random_bytes(scratch, payload, which, gz):
    from algorithms import data

    root = scratch / which
    root.mkdir(exist_ok=True)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if which == "cifar10" else ["train_32x32.mat"]
    head = b"MATLAB 5.0 MAT-file" + b" " * 97 + b"\0" * 8 + b"\x00\x01IM" if which == "svhn" and gz else b""
    for name in names:
        _write(root, name, gzip.compress(payload) if which == "cifar10" and gz else head + payload)
    refused(data.load, which, root)


# --------------------------------------------------------------------------- the commands
def cli(argv) -> tuple[int, str, str]:
    """``verify.cli.main(argv)`` in this process: (exit code, stdout, stderr)."""
    from verify.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def assert_refused(argv, *fragments):
    code, _, err = cli(argv)
    assert code == 2, (argv, err)
    assert err.count("\n") == 1 and err.startswith("fedverify: error: "), err
    assert "Traceback" not in err and len(err) < 1200, err[:300]
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A folder holding every kind of bad path, and the working folder of the commands."""
    root = tmp_path_factory.mktemp("cli")
    (root / "a_folder.npz").mkdir()
    (root / "loop.csv").symlink_to(root / "loop.csv")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "fifo.json")
    rng = np.random.default_rng(7)
    for suffix in (".npz", ".csv", ".json", ".toml"):
        _write(root, f"random{suffix}", rng.bytes(300))
    _write(root, "huge.json", json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": 2**40,
                                          "active": [[0]]}).encode())
    _write(root, "v99.json", json.dumps({"format": "fedverify-trace", "version": 99, "n_clients": 4,
                                         "active": [[0]]}).encode())
    _write(root, "a_file", b"x")
    return root


@contextlib.contextmanager
def inside(folder: Path):
    old = os.getcwd()
    os.chdir(folder)
    try:
        with memory_limit_gb("2"):
            yield
    finally:
        os.chdir(old)


def _not_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return True
    return False


def _not_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return True
    return False


def _not_positive_number(text: str) -> bool:
    try:
        return not float(text) > 0
    except ValueError:
        return True


BAD_PATHS = ["a_folder.npz", "loop.csv", "fifo.json", "random.npz", "random.csv", "random.json", "random.toml",
             "huge.json", "v99.json", "a_file/below.json", "missing.npz", "/proc/fedverify/x.json", "x" * 5000 + ".csv"]
BAD_INTS = st.one_of(st.sampled_from(["", " ", "0", "-1", "1.5", "1e3", "nan", "inf", "0x10", "−1", "9" * 5000, "\udcff"]),
                     st.text(max_size=12).filter(_not_int))
HUGE_INTS = st.integers(12, 40).map(lambda k: "1" + "0" * k)
BAD_SEEDS = BAD_INTS.filter(lambda t: _not_int(t) or int(t) < 0)
BAD_FLOATS = st.one_of(st.sampled_from(["", "nan", "inf", "-inf", "1e999", "x", "0", "-1", "\x00"]),
                       st.text(max_size=8).filter(_not_positive_number))
NOT_FINITE = st.one_of(st.sampled_from(["", "nan", "inf", "-inf", "1e999", "x", "\x00"]),
                       st.text(max_size=8).filter(lambda t: _not_positive_number(t) and _not_number(t)))
BAD_OUTPUT = st.sampled_from(["", " ", "a_file", "a_file/below", "/proc/fedverify", "/proc/fedverify/x", "x" * 5000,
                              "a\x00b"])
BAD_PLOT = st.sampled_from(["", " ", "a_folder.npz", "plot.xyz", "plot", "/proc/fedverify/p.png", "a_file/p.png",
                            "x" * 5000 + ".png"])
BAD_DEVICES = st.sampled_from(["meta", "mps", "xpu", "bogus", "", "cuda:99", "cpu:x", "lazy", "hpu", "\udcff"])


def _text_not_in(names):
    return st.text(max_size=20).filter(lambda t: not any(n.strip() in names for n in t.split(",")))


# (option, strategy of hostile values) per command; each value is refused before any work
CHECK_BASE = ["check", "-T", "3", "--seeds", "1", "--algorithms", "fedavg", "--patterns", "P1", "-N", "4", "-o", "out"]


def _check_options():
    from algorithms import names
    from participation.patterns import preset_aliases, preset_names
    from verify.choices import PROBLEMS

    presets = set(preset_names()) | set(preset_aliases())
    return {
        "--algorithms": st.one_of(st.sampled_from(["", ",", " , "]), _text_not_in(set(names()) | {""})),
        "--patterns": st.one_of(st.sampled_from(BAD_PATHS + ["", ","]),
                                _text_not_in(presets | {""}).map(lambda t: t + "z")),
        "--problem": _text_not_in(set(PROBLEMS)),
        "--constants": _text_not_in({"estimate", "problem"}),
        "--clients": st.one_of(BAD_INTS, HUGE_INTS),
        "--rounds": st.one_of(BAD_INTS, HUGE_INTS),
        "--seeds": st.one_of(BAD_INTS, HUGE_INTS),
        "--local-steps": BAD_INTS,
        "--theorem": _text_not_in(set()).map(lambda t: "nosuch." + t),
        "--confidence": st.one_of(BAD_FLOATS, st.sampled_from(["0.3", "1", "2"])),
        "--device": BAD_DEVICES,
        "--output": BAD_OUTPUT,
        "--plugin": st.sampled_from(BAD_PATHS + ["", "no_such_module_xyz", "os.path.nosuch"]),
    }


def _hostile_run(hostile, base, option, value):
    with inside(hostile):
        assert_refused([*base, option, value])


@pytest.mark.parametrize("option", list(_check_options()))
def test_check_refuses_each_hostile_value(hostile, option):
    strategy = _check_options()[option]

    @settings(SMALL, max_examples=8)
    @given(value=strategy)
    def run(value):
        _hostile_run(hostile, CHECK_BASE, option, value)

    run()


def _mc_options():
    return {"--rounds": st.one_of(BAD_INTS, HUGE_INTS), "--reps": st.one_of(BAD_INTS, HUGE_INTS), "--seed": BAD_SEEDS,
            "--workers": BAD_INTS, "--confidence": st.one_of(BAD_FLOATS, st.sampled_from(["1", "2"])), "--plot": BAD_PLOT}


@pytest.mark.parametrize("option", list(_mc_options()))
def test_mc_refuses_each_hostile_value(hostile, option):
    strategy = _mc_options()[option]

    @settings(SMALL, max_examples=8)
    @given(value=strategy)
    def run(value):
        _hostile_run(hostile, ["mc", "P1", "-T", "5", "--reps", "2"], option, value)

    run()


def _delays_options():
    return {"--rounds": st.one_of(BAD_INTS, HUGE_INTS), "--reps": BAD_INTS, "--seed": BAD_SEEDS,
            "--round-seconds": BAD_FLOATS, "--fraction": BAD_FLOATS, "--rule": _text_not_in({"start", "whole", "fraction"}),
            "--clients": BAD_INTS, "--plot": BAD_PLOT}


@pytest.mark.parametrize("option", list(_delays_options()))
def test_delays_refuses_each_hostile_value(hostile, option):
    strategy = _delays_options()[option]

    @settings(SMALL, max_examples=8)
    @given(value=strategy)
    def run(value):
        _hostile_run(hostile, ["delays", "P1", "-T", "5", "--reps", "2"], option, value)

    run()


@settings(SMALL, max_examples=len(BAD_PATHS) + 10)
@given(path=st.sampled_from(BAD_PATHS + ["", " "]), clients=st.sampled_from([[], ["--clients", "4"]]))
def test_delays_refuses_each_hostile_trace(hostile, path, clients):
    with inside(hostile):
        assert_refused(["delays", "--trace", path, *clients])


@settings(SMALL, max_examples=20)
@given(names=st.lists(_text_not_in({"reference"}), min_size=1, max_size=3), command=st.sampled_from(["mc", "delays"]))
def test_unknown_presets_are_refused(hostile, names, command):
    from participation.patterns import preset_names

    assume(not any(n in preset_names() for n in names))
    with inside(hostile):
        assert_refused([command, *names, "-T", "5", "--reps", "2"])


def _bound_options():
    return {"--L": NOT_FINITE, "--sigma2": NOT_FINITE,
            "--tau-max": st.sampled_from(["nan", "inf", "x", ""]), "--N": BAD_INTS, "--K": BAD_INTS, "--T": BAD_INTS,
            "--set": st.one_of(st.sampled_from(["", "=", "x", "=1", "x=", "tau_max=nan", "L=x", "variant=nosuch"]),
                               st.text(max_size=10).filter(lambda t: "=" not in t))}


@pytest.mark.parametrize("option", list(_bound_options()))
def test_bound_refuses_each_hostile_value(hostile, option):
    from verify.cli.commands.bound import example

    strategy = _bound_options()[option]
    base = ["bound", "fedsum.theorem_4_1", *example("fedsum.theorem_4_1").split()]

    @settings(SMALL, max_examples=8)
    @given(value=strategy)
    def run(value):
        _hostile_run(hostile, base, option, value)

    run()


@settings(SMALL, max_examples=15)
@given(name=_text_not_in(set()).map(lambda t: "nosuch_" + t))
def test_bound_refuses_unknown_theorems(hostile, name):
    with inside(hostile):
        assert_refused(["bound", name])


EXPERIMENT_BASE = ["experiment", "fedsum", "--rounds", "1", "-N", "4", "--limit", "40", "--algorithms", "fedavg",
                   "--patterns", "P1", "-o", "out"]


def _experiment_options():
    return {"--dataset": _text_not_in({"digits", "mnist", "fashion-mnist", "fashion_mnist", "fashionmnist", "svhn",
                                       "cifar10", "cifar-10"}),
            "--root": st.sampled_from(["", " ", "a_file", "a_folder.npz", "/proc/fedverify"]),
            "--limit": BAD_INTS, "--clients": BAD_INTS, "--rounds": BAD_INTS, "--local-steps": BAD_INTS,
            "--batch": st.one_of(BAD_INTS, HUGE_INTS, st.integers(41, 10**6).map(str)),
            "--alpha": BAD_FLOATS, "--eta-l": BAD_FLOATS, "--eta-g": BAD_FLOATS, "--record-every": BAD_INTS,
            "--seed": BAD_SEEDS, "--device": BAD_DEVICES, "--output": BAD_OUTPUT,
            "--algorithms": _text_not_in(set()).map(lambda t: "nosuch" + t),
            "--patterns": _text_not_in(set()).map(lambda t: "nosuch" + t),
            "--plugin": st.sampled_from(BAD_PATHS + ["", "no_such_module_xyz"])}


@pytest.mark.parametrize("option", [pytest.param(o, marks=pytest.mark.slow) if o == "--batch" else o
                                    for o in _experiment_options()])
def test_experiment_refuses_each_hostile_value(hostile, option):
    strategy = _experiment_options()[option]
    base = EXPERIMENT_BASE if option != "--root" else [*EXPERIMENT_BASE, "--dataset", "mnist"]

    @settings(SMALL, max_examples=6)
    @given(value=strategy)
    def run(value):
        _hostile_run(hostile, base, option, value)

    run()


@settings(SMALL, max_examples=25)
@given(spec=st.sampled_from(BAD_PATHS + ["", " ", "random.toml"]), output=st.sampled_from(["out", "", "a_file"]),
       processes=st.sampled_from([[], ["--processes", "0"], ["--processes", "x"]]))
def test_sweep_refuses_hostile_specs_and_outputs(hostile, spec, output, processes):
    with inside(hostile):
        assert_refused(["sweep", spec, "-o", output, *processes])


@settings(SMALL, max_examples=10)
@given(value=BAD_INTS)
def test_bench_refuses_hostile_workers(hostile, value):
    with inside(hostile):
        assert_refused(["bench", "--quick", "--workers", value])


# --------------------------------------------------------------------------- the reported cases
@pytest.mark.parametrize("device", ["meta", "mps", "xpu", "bogus", "cuda:99"])
@pytest.mark.parametrize("command", ["check", "experiment"])
def test_every_device_is_validated_once_with_one_line(hostile, device, command):
    """`check --device meta|mps|xpu` and `experiment --device bogus` ended in tracebacks."""
    import torch

    if device == "cuda:99" and torch.cuda.device_count() > 99:
        pytest.skip("this machine has a hundred GPUs")
    base = CHECK_BASE if command == "check" else EXPERIMENT_BASE
    with inside(hostile):
        assert_refused([*base, "--device", device], f"--device '{device}'")


@pytest.mark.slow
def test_experiment_batch_larger_than_the_data_is_refused_up_front(hostile):
    """`experiment --batch 1000000` failed in a torch allocation after 23 s."""
    with inside(hostile):
        assert_refused([*EXPERIMENT_BASE, "--batch", "1000000"],
                       "the mini-batch of 1000000 (--batch) is larger than the 40 training samples")


def test_experiment_batch_beyond_the_memory_limit_is_refused_up_front():
    from verify.studies.experiment import check_batch

    with memory_limit_gb(str(1 / 1024)):
        with pytest.raises(ValueError, match=r"a mini-batch of 1000 \(--batch\) for each of 100 clients .* needs about"):
            check_batch(1000, 60000, 100, "mnist", (1, 28, 28))
    check_batch(32, 1437, 100, "digits", (1, 8, 8))


@pytest.mark.parametrize("argv, fragment", [
    (["check", "--algorithms", ""], "--algorithms '' names no algorithm"),
    (["check", "--algorithms", ",", " "], "names no algorithm"),
    (["check", "--patterns", ""], "--patterns '' names no pattern"),
    (["check", "--output", ""], "the path is empty"),
    (["check", "--patterns", "a_folder.npz"], "is a folder"),
    (["check", "--patterns", "loop.csv"], "loop of symbolic links"),
    (["check", "--patterns", "v99.json"], "version 99 is not supported"),
    (["mc", "P1", "--plot", ""], "the path is empty"),
    (["mc", "P1", "--plot", "/proc/x.png"], "--plot '/proc/x.png': its folder '/proc' cannot be written to"),
    (["mc", "P1", "--plot", "a_folder.npz/"], "cannot write a plot"),
    (["delays", "P1", "--plot", ""], "the path is empty"),
    (["delays", "--trace", ""], "the path is empty"),
    (["delays", "--trace", "a_folder.npz"], "is a folder"),
    (["experiment", "fedsum", "--output", ""], "the path is empty"),
    (["experiment", "fedsum", "--output", "a_file"], "'a_file' exists and is not a folder"),
    (["experiment", "fedsum", "--root", ""], "the path is empty"),
    (["sweep", "", "-o", "out"], "the path is empty"),
])
def test_reported_messages_name_the_bad_value(hostile, argv, fragment):
    with inside(hostile):
        assert_refused(argv, fragment)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_given_as_a_trace_is_named(hostile):
    from verify.cli import build_parser
    from verify.cli.commands import trace_or_presets

    with inside(hostile):
        assert_refused(["check", "--patterns", "fifo.json", "-N", "4"], "is a FIFO")
        # delays opened a .json trace to see whether it is an event log: on a FIFO that blocked
        assert_refused(["delays", "--trace", "fifo.json"], "--trace 'fifo.json' is a FIFO")
        with pytest.raises(ValueError, match="--trace 'fifo.json' is a FIFO"):
            trace_or_presets(build_parser().parse_args(["delays", "--trace", "fifo.json"]))


def test_output_in_proc_is_refused_before_the_work(hostile):
    """`check --output /proc/fv_out` ran 56 s, then failed."""
    with inside(hostile):
        assert_refused([*CHECK_BASE, "--output", "/proc/fv_out"], "--output '/proc/fv_out' cannot be written to")
        assert_refused([*EXPERIMENT_BASE, "--output", "/proc/fv_out"], "cannot be written to")


def test_an_output_file_that_is_a_folder_is_refused_before_the_work(hostile):
    with inside(hostile):
        (Path("busy") / "check.json").mkdir(parents=True, exist_ok=True)
        assert_refused([*CHECK_BASE, "--output", "busy"], "check.json exists there and is not a file")
        (Path("busy") / "experiment.png").mkdir(exist_ok=True)
        assert_refused([*EXPERIMENT_BASE, "--output", "busy"], "experiment.png exists there and is not a file")


def test_writable_folder_probes_with_a_named_file(tmp_path):
    from verify.cli.commands import writable_folder
    from verify.cli.usage import UsageError

    writable_folder(tmp_path / "new", "--output")
    assert not (tmp_path / "new").exists()       # probed and removed: the write itself makes the folder
    with pytest.raises(UsageError, match="cannot be written to"):
        writable_folder(Path("/proc/fedverify_probe"), "--output")
    with pytest.raises(UsageError, match="empty path"):
        writable_folder("", "--output")


def test_a_megabyte_argument_is_not_echoed_whole(hostile):
    with inside(hostile):
        err = assert_refused(["mc", "P1", "--reps", "9" * 1_000_000])
        assert "…" in err
        err = assert_refused(["check", "--theorem", "t" * 1_000_000])
        assert len(err) < 1200


def test_an_undecodable_name_is_printed_escaped(tmp_path):
    """A file name that is not UTF-8 reaches Python as a lone surrogate; printing it raw to
    a UTF-8 stderr raised UnicodeEncodeError (a traceback instead of the error line)."""
    from verify.cli import main

    name = os.fsdecode(b"bad\xff.json")
    (tmp_path / name).write_bytes(b"{")
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    with contextlib.redirect_stderr(stream), contextlib.redirect_stdout(io.StringIO()):
        code = main(["delays", "--trace", str(tmp_path / name)])
    stream.flush()
    err = raw.getvalue().decode()
    assert code == 2 and err.count("\n") == 1 and "bad\\udcff.json" in err


def test_delays_trace_and_presets_together_are_refused(tmp_path):
    """`delays --trace F P1` is refused, not run on F alone: verify/cli/commands/delays.py calls
    ``trace_or_presets(args)`` first in its ``run``."""
    from verify.cli import build_parser
    from verify.cli.commands import trace_or_presets
    from verify.cli.usage import UsageError

    parse = build_parser().parse_args
    trace = str(Trace(np.eye(3, dtype=bool)).save(tmp_path / "t.csv"))
    trace_or_presets(parse(["delays", "--trace", trace]))              # the default presets are not "given"
    trace_or_presets(parse(["delays", "--trace", "mobiperf"]))
    trace_or_presets(parse(["delays", "P1", "P2"]))
    with pytest.raises(UsageError, match="exclude each other"):
        trace_or_presets(parse(["delays", "--trace", trace, "P1"]))
    with pytest.raises(ValueError, match="does not exist"):
        trace_or_presets(parse(["delays", "--trace", str(tmp_path / "missing.json")]))
    with pytest.raises(UsageError, match="--round-seconds apply only to --trace"):
        trace_or_presets(parse(["delays", "P1", "--round-seconds", "5"]))
    with pytest.raises(UsageError, match="empty"):
        trace_or_presets(argparse.Namespace(trace="", presets=[], round_seconds=None, fraction=None, clients=None,
                                            rule="whole"))


def test_delays_command_refuses_trace_beside_presets(hostile):
    """`delays --trace F P1` ignored P1; `delays --round-seconds 5` (presets) ignored the option."""
    with inside(hostile):
        Trace(np.eye(3, dtype=bool)).save("t.csv")
        assert_refused(["delays", "--trace", "t.csv", "P1"], "exclude each other")
        assert_refused(["delays", "P1", "--round-seconds", "5"], "apply only to --trace")
