"""Trace.load is bounded: sizes are checked against the memory limit before anything is
allocated, paths that are not regular files are named for what they are, a JSON trace must
carry version 1 and unique keys, and quoted values in messages are cut short.

Every "huge" file here is tiny and only declares a huge size; the limit is lowered to 1 MiB
with FEDVERIFY_MEMORY_GB so that the sizes refused are small enough that the code before
these checks (which allocated them) stayed harmless.
"""
from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from participation import trace as trace_module
from participation.trace import Trace

ENV_MEMORY = "FEDVERIFY_MEMORY_GB"          # the variable participation.budget reads


def memory_limit() -> int:
    return trace_module.memory_limit()

ONE_MIB_IN_GB = str(1 / 1024)


def _fails(path, **kw) -> str:
    """Trace.load must raise ValueError (one line), and nothing else."""
    try:
        Trace.load(path, **kw)
    except ValueError as err:
        assert "\n" not in str(err)
        return str(err)
    pytest.fail(f"Trace.load accepted {path}")


@pytest.fixture
def one_mib(monkeypatch):
    monkeypatch.setenv(ENV_MEMORY, ONE_MIB_IN_GB)


# --------------------------------------------------------------------------- the limit itself
def test_memory_limit_reads_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_MEMORY, "2")
    assert memory_limit() == 2 * 2**30
    monkeypatch.setenv(ENV_MEMORY, ONE_MIB_IN_GB)
    assert memory_limit() == 2**20
    for bad in ("lots", "0", "-1", "nan", "inf"):
        monkeypatch.setenv(ENV_MEMORY, bad)
        with pytest.raises(ValueError, match=ENV_MEMORY):
            memory_limit()
    monkeypatch.delenv(ENV_MEMORY)
    assert memory_limit() > 0


@pytest.mark.slow
def test_participation_does_not_import_verify():
    import ast
    from pathlib import Path

    source = Path(trace_module.__file__).read_text()
    imported = {a.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module or "" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "verify" for name in imported)


# --------------------------------------------------------------------------- declared sizes
def test_json_declaring_many_clients_is_refused_before_allocating(tmp_path, one_mib):
    """An 85-byte JSON declaring 2^31 clients is refused before anything is allocated; here 2^24 against 1 MiB."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": 2**24, "active": [[0]]}))
    message = _fails(p)
    assert "1 round × 16777216 clients needs about 16 MiB" in message and "memory limit is 1 MiB" in message
    assert "corrupt" not in message


def test_bare_json_list_with_many_clients_is_refused(tmp_path, one_mib):
    p = tmp_path / "t.json"
    p.write_text("[[0], [1]]")
    assert "needs about 32 MiB" in _fails(p, n_clients=2**24)


def test_json_client_count_mismatch_is_refused_before_allocating(tmp_path, one_mib):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": 2**40, "active": [[0]]}))
    assert _fails(p, n_clients=3) == f"trace t.json has {2**40} clients, expected 3"


def test_npz_declaring_a_large_trace_is_refused_from_its_headers(tmp_path, one_mib):
    """A small npz declaring 32768² cells is refused before reading; here 4096² (16 Mi cells, 2 KB of file) against 1 MiB."""
    mask = np.zeros((4096, 4096), dtype=bool)
    p = tmp_path / "t.npz"
    np.savez_compressed(p, format=np.array("fedverify-trace"), version=np.array(1), shape=np.array(mask.shape),
                        bits=np.packbits(mask, axis=1))
    assert p.stat().st_size < 100_000
    message = _fails(p)
    assert "4096 rounds × 4096 clients needs about" in message and "memory limit is 1 MiB" in message


def test_npz_plain_mask_declaring_a_large_array_is_refused(tmp_path, one_mib):
    p = tmp_path / "t.npz"
    np.savez_compressed(p, mask=np.zeros((2048, 2048), dtype=np.int8))
    assert "needs about" in _fails(p)


def test_npz_plain_array_of_wrong_rank_is_refused_without_reading_it(tmp_path):
    p = tmp_path / "t.npz"
    with zipfile.ZipFile(p, "w") as z:
        b = io.BytesIO()
        np.lib.format.write_array_header_1_0(b, {"descr": "|b1", "fortran_order": False, "shape": (10,)})
        b.write(b"\0" * 10)
        z.writestr("mask.npy", b.getvalue())
    assert "must have shape (rounds, n_clients), got shape (10,)" in _fails(p)


def test_npz_loads_one_copy_of_the_mask(tmp_path):
    """The loader unpacked into a uint8 array, copied it to bool, unpacked again for the
    padding check and copied once more into the Trace (4 bytes per cell); now 1."""
    import tracemalloc

    mask = np.random.default_rng(0).random((512, 1000)) < 0.3
    p = Trace(mask).save(tmp_path / "t.npz")
    tracemalloc.start()
    try:
        loaded = Trace.load(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded == Trace(mask)
    assert peak < 2 * mask.size


def test_csv_with_many_rows_is_refused_before_parsing(tmp_path, one_mib):
    """A CSV of millions of rows is refused by its size before parsing; here 2 MB against 1 MiB."""
    p = tmp_path / "t.csv"
    p.write_text("0\n1\n" * 2**19)
    message = _fails(p)
    assert "needs about" in message and "memory limit is 1 MiB" in message


def test_csv_wider_than_expected_is_refused_from_its_first_row(tmp_path, one_mib):
    p = tmp_path / "t.csv"
    p.write_text("0," * 99 + "1\n")
    assert _fails(p, n_clients=3) == "trace t.csv has 100 clients, expected 3"


def test_a_file_larger_than_the_limit_is_not_read(tmp_path, one_mib):
    p = tmp_path / "t.json"
    p.write_bytes(b" " * (2**20 + 1))
    assert "needs about" in _fails(p)


def test_out_of_memory_is_not_called_corrupt(tmp_path, monkeypatch):
    """A valid file too large for the machine was reported as "corrupt file (MemoryError)"."""
    p = Trace(np.eye(3, dtype=bool)).save(tmp_path / "t.json")

    def exhausted(*args):
        raise MemoryError

    monkeypatch.setattr(trace_module, "_load_json", exhausted)
    message = _fails(p)
    assert "out of memory" in message and "corrupt" not in message


# --------------------------------------------------------------------------- what a path is
def test_a_folder_is_named_a_folder(tmp_path):
    (tmp_path / "d.csv").mkdir()
    assert "is a folder" in _fails(tmp_path / "d.csv")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_named_and_not_opened(tmp_path):
    os.mkfifo(tmp_path / "f.json")              # opening it would block this test forever
    assert "is a FIFO" in _fails(tmp_path / "f.json")


def test_a_symlink_loop_is_named(tmp_path):
    (tmp_path / "a.npz").symlink_to(tmp_path / "b.npz")
    (tmp_path / "b.npz").symlink_to(tmp_path / "a.npz")
    assert "loop of symbolic links" in _fails(tmp_path / "a.npz")


def test_a_path_through_a_file_and_an_empty_path(tmp_path):
    (tmp_path / "f").write_text("x")
    assert "a part of its path is a file" in _fails(tmp_path / "f" / "t.csv")
    assert "empty" in _fails("")
    assert "not a valid path" in _fails("a\0b.csv")
    assert "does not exist" in _fails(tmp_path / "missing.csv")


@pytest.mark.parametrize("n_clients", [0, -1, 2.5, "3", True])
def test_n_clients_argument_is_checked(tmp_path, n_clients):
    p = Trace(np.eye(3, dtype=bool)).save(tmp_path / "t.json")
    assert "n_clients must be an integer ≥ 1" in _fails(p, n_clients=n_clients)


# --------------------------------------------------------------------------- JSON version and keys
def _doc(**fields):
    return {"format": "fedverify-trace", "version": 1, "n_clients": 3, "active": [[0], [1, 2]], **fields}


@pytest.mark.parametrize("version, fragment", [(99, "version 99 is not supported"), (2, "version 2"),
                                                ("1", "version '1'"), (1.0, "version 1.0"), (True, "version True"),
                                                (None, "version None")])
def test_json_needs_version_1(tmp_path, version, fragment):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_doc(version=version)))
    assert fragment in _fails(p)


def test_json_without_version_is_refused(tmp_path):
    doc = _doc()
    del doc["version"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    assert 'needs "version": 1' in _fails(p)


@pytest.mark.parametrize("text, key", [
    ('{"format": "fedverify-trace", "version": 1, "n_clients": 3, "n_clients": 4, "active": [[0]]}', "n_clients"),
    ('{"format": "fedverify-trace", "version": 1, "version": 1, "n_clients": 3, "active": [[0]]}', "version"),
    ('{"format": "fedverify-trace", "version": 1, "n_clients": 3, "active": [[0]], "active": [[1]]}', "active"),
])
def test_json_duplicate_keys_are_refused(tmp_path, text, key):
    p = tmp_path / "t.json"
    p.write_text(text)
    assert f"key '{key}' appears twice" in _fails(p)


def test_json_written_by_save_still_loads(tmp_path):
    t = Trace(np.random.default_rng(1).random((7, 5)) < 0.4)
    assert Trace.load(t.save(tmp_path / "t.json")) == t


# --------------------------------------------------------------------------- short messages
@pytest.mark.parametrize("suffix, content, fragment", [
    (".csv", "0,1\n" + "x" * 1_000_000 + ",1\n", "row 1: entry 'xxxx"),
    (".json", json.dumps(_doc(active=[["y" * 1_000_000]])), "round 0: client id 'yyyy"),
    (".json", json.dumps(_doc(version="v" * 1_000_000)), "version 'vvvv"),
    (".json", json.dumps(_doc(n_clients="n" * 1_000_000)), "n_clients must be an integer ≥ 1, got 'nnnn"),
    (".json", '{"format": "fedverify-trace", "' + "k" * 1_000_000 + '": 1, "' + "k" * 1_000_000 + '": 2}',
     "key 'kkkk"),
])
def test_a_long_value_is_quoted_short(tmp_path, suffix, content, fragment):
    """A 1 MB CSV entry was echoed in a 1,000,082-byte error line."""
    p = tmp_path / f"t{suffix}"
    p.write_text(content)
    message = _fails(p)
    assert fragment in message and "…" in message and len(message) < 200


# --------------------------------------------------------------------------- the CSV parser
def _reference_csv(text: str) -> np.ndarray:
    """The parser Trace.load used before it was vectorised (a line-by-line loop)."""
    rows = [line.split(",") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    header = None
    if rows and any(v.strip() not in ("0", "1") for v in rows[0]) and not any(trace_module._is_number(v) for v in rows[0]):
        header, rows = rows[0], rows[1:]
    if not rows:
        raise ValueError("no rounds in file")
    if header is not None and len(header) != len(rows[0]):
        raise ValueError(f"the header has {len(header)} columns, the rows have {len(rows[0])}")
    width = len(rows[0])
    for t, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {t} has {len(row)} entries, row 0 has {width}")
        for value in row:
            if value.strip() not in ("0", "1"):
                raise ValueError(f"row {t}: entry {value.strip()!r} is not 0 or 1")
    return np.array([[v.strip() == "1" for v in row] for row in rows])


_CSV_PIECES = st.sampled_from(["0", "1", "0", "1", ",", ",", "\n", "\r\n", "\r", " ", "\t", "#", "a", "2", ".", "-1",
                               "x,y\n", "# note\n", "\n\n"])


@st.composite
def csv_texts(draw):
    """Mostly well-formed 0/1 tables, with headers, comments, blanks and damage mixed in."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(_CSV_PIECES, max_size=40)))
    n = draw(st.integers(1, 6))
    rows = draw(st.lists(st.lists(st.sampled_from("01"), min_size=n, max_size=n), min_size=1, max_size=8))
    sep = draw(st.sampled_from([",", ", ", " ,"]))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    lines = [sep.join(r) for r in rows]
    if draw(st.booleans()):
        lines.insert(0, ",".join(f"c{i}" for i in range(n)))
    if draw(st.booleans()):
        k = draw(st.integers(0, len(lines)))
        lines.insert(k, draw(st.sampled_from(["# comment", "", "   ", "1,0,1,1,1,1,1", "0,,1", "01"])))
    return end.join(lines) + draw(st.sampled_from(["", end]))


@settings(max_examples=60)
@given(csv_texts())
def test_csv_parser_agrees_with_the_line_by_line_reference(tmp_path_factory, text):
    p = tmp_path_factory.mktemp("csv") / "t.csv"
    p.write_bytes(text.encode())
    try:
        expected = _reference_csv(text)
    except ValueError as err:
        assert _fails(p) == f"cannot read trace t.csv: {err}"
        return
    try:
        loaded = Trace.load(p)
    except ValueError as err:                  # the reference accepts what Trace(mask) refuses
        assert expected.size == 0 or "at least one" in str(err)
        return
    np.testing.assert_array_equal(loaded.mask, expected)


@pytest.mark.parametrize("text", ["0,1\n1,0\n", "0,1\r\n1,0\r\n", "1\n0\n1\n", "0,1\n1,0", "1,1,0,1,0,0,0,1,1\n" * 5])
def test_csv_in_save_layout_and_general_layout_agree(tmp_path, text):
    """The one-reshape path for save's layout and the counting path give the same trace."""
    p = tmp_path / "t.csv"
    p.write_text(text)
    q = tmp_path / "u.csv"
    q.write_text("# a comment forces the general path\n" + text)
    assert Trace.load(p) == Trace.load(q) == Trace(_reference_csv(text))
