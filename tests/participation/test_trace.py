"""Tests of participation.trace: validation, views, file formats and hostile files."""
from __future__ import annotations

import codecs
import io
import json
import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from participation.trace import Trace

ODD_WIDTHS = [1, 7, 8, 9, 63, 65]


@st.composite
def masks(draw, widths=ODD_WIDTHS, max_rounds=12):
    n = draw(st.sampled_from(widths))
    rounds = draw(st.integers(1, max_rounds))
    flat = draw(st.lists(st.booleans(), min_size=rounds * n, max_size=rounds * n))
    return np.array(flat, dtype=bool).reshape(rounds, n)


def _random_mask(rounds, n, p=0.3, seed=0):
    return np.random.default_rng(seed).random((rounds, n)) < p


# --------------------------------------------------------------------------- construction
class TestConstruction:
    @pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
    def test_wrong_ndim(self, shape):
        with pytest.raises(ValueError, match="shape"):
            Trace(np.zeros(shape, dtype=bool))

    @pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
    def test_empty(self, shape):
        with pytest.raises(ValueError, match="at least one round"):
            Trace(np.zeros(shape, dtype=bool))

    @pytest.mark.parametrize("dtype", [np.float64, np.float32])
    def test_float_dtype_refused_even_if_0_1(self, dtype):
        with pytest.raises(ValueError, match="dtype"):
            Trace(np.array([[0.0, 1.0], [1.0, 0.0]], dtype=dtype))

    @pytest.mark.parametrize("bad", [2, -1, 7])
    def test_integer_other_than_0_1_names_value(self, bad):
        arr = np.array([[0, 1, 1], [1, 0, 1]])
        arr[1, 2] = bad
        with pytest.raises(ValueError, match=rf"found {bad} at index \(1, 2\)"):
            Trace(arr)

    def test_int_and_bool_give_same_trace(self):
        arr = np.array([[0, 1, 1], [1, 0, 0]], dtype=np.int8)
        t = Trace(arr)
        assert t.mask.dtype == bool
        assert t == Trace(arr.astype(bool)) == Trace(arr.tolist())
        assert (t.n_rounds, t.n_clients, len(t)) == (2, 3, 2)

    def test_mask_not_writeable(self):
        t = Trace(np.zeros((3, 4), dtype=bool))
        assert not t.mask.flags.writeable
        with pytest.raises(ValueError):
            t.mask[0, 0] = True
        assert not t.mask.any()

    def test_attribute_assignment_fails(self):
        t = Trace(np.zeros((3, 4), dtype=bool))
        with pytest.raises(AttributeError):
            t._mask = np.ones((3, 4), dtype=bool)
        with pytest.raises(AttributeError):
            t.mask = np.ones((3, 4), dtype=bool)
        with pytest.raises(AttributeError):
            t.anything = 1
        assert not t.mask.any()

    def test_construction_copies_input(self):
        src = np.zeros((2, 3), dtype=bool)
        t = Trace(src)
        src[0, 0] = True
        assert not t.mask.any()

    def test_mask_cannot_be_made_writeable_again(self):
        t = Trace(np.zeros((3, 4), dtype=bool))
        with pytest.raises(ValueError):
            t.mask.flags.writeable = True


class TestFromSets:
    def test_matches_brute_force(self):
        sets = [[0, 3], [], [4, 1, 2], [2]]
        t = Trace.from_sets(sets, 5)
        expected = [[int(i in s) for i in range(5)] for s in sets]
        assert t.mask.astype(int).tolist() == expected
        assert t.sets() == [sorted(s) for s in sets]

    def test_accepts_numpy_integers(self):
        t = Trace.from_sets([np.array([1, 2], dtype=np.int64)], 3)
        assert t.sets() == [[1, 2]]

    @pytest.mark.parametrize("bad", [5, 6, -1, 100])
    def test_id_out_of_range(self, bad):
        with pytest.raises(ValueError, match=rf"round 1: client id {bad} is outside \[0, 5\)"):
            Trace.from_sets([[0], [1, bad]], 5)

    def test_duplicate_id(self):
        with pytest.raises(ValueError, match="round 2: client id 3 appears twice"):
            Trace.from_sets([[0], [3, 1], [3, 1, 3]], 5)

    @pytest.mark.parametrize("bad", [1.0, 1.5, "2", None])
    def test_non_integer_id(self, bad):
        with pytest.raises(ValueError, match=r"round 1: client id .* is not an integer"):
            Trace.from_sets([[0], [bad]], 5)

    @pytest.mark.parametrize("bad", [True, False, np.bool_(True)])
    def test_bool_id(self, bad):
        with pytest.raises(ValueError, match=rf"round 0: client id {bad!r} is not an integer"):
            Trace.from_sets([[bad]], 5)

    def test_no_rounds(self):
        with pytest.raises(ValueError):
            Trace.from_sets([], 5)

    @pytest.mark.parametrize("n", [0, -3, 2.0, True, None])
    def test_bad_n_clients(self, n):
        with pytest.raises(ValueError, match="n_clients"):
            Trace.from_sets([[0]], n)


# --------------------------------------------------------------------------- views
class TestViews:
    @given(masks(max_rounds=8))
    def test_views_against_brute_force(self, mask):
        t = Trace(mask)
        rounds, n = mask.shape
        for r in range(rounds):
            ids = [i for i in range(n) if mask[r, i]]
            assert t.active(r).tolist() == ids
            assert t.active(r - rounds).tolist() == ids  # negative index
            assert t.sets()[r] == ids
            assert int(t.counts()[r]) == len(ids)
        for i in range(n):
            assert t.participation_rate()[i] == pytest.approx(sum(bool(mask[r, i]) for r in range(rounds)) / rounds)

    def test_active_out_of_range(self):
        t = Trace(np.ones((3, 2), dtype=bool))
        for r in (3, 10, -4):
            with pytest.raises(ValueError, match=f"round {r}"):
                t.active(r)

    def test_slicing_returns_trace(self):
        mask = _random_mask(10, 6, 0.5, seed=1)
        t = Trace(mask)
        for sl in (slice(2, 7), slice(None, None, 3), slice(-4, None), slice(None, None, -1)):
            part = t[sl]
            assert isinstance(part, Trace)
            assert np.array_equal(part.mask, mask[sl])
            assert not part.mask.flags.writeable
        with pytest.raises(TypeError):
            t[0]

    @given(masks(widths=[1, 3, 8], max_rounds=4), masks(widths=[1, 3, 8], max_rounds=4))
    def test_hash_eq_consistency(self, a, b):
        ta, tb = Trace(a), Trace(b)
        same = a.shape == b.shape and bool((a == b).all())
        assert (ta == tb) is same
        assert (ta != tb) is (not same)
        if same:
            assert hash(ta) == hash(tb)
        assert ta == Trace(a.astype(np.uint8)) and hash(ta) == hash(Trace(a.astype(np.uint8)))

    def test_eq_distinguishes_shapes_with_same_bits(self):
        # the flattened packed bits are equal, the traces are not
        a, b = Trace(np.zeros((1, 8), dtype=bool)), Trace(np.zeros((2, 4), dtype=bool))
        assert a != b
        assert len({a, b, Trace(np.zeros((1, 8), dtype=np.int64))}) == 2
        assert Trace(np.ones((1, 1), dtype=bool)) != np.ones((1, 1), dtype=bool)


# --------------------------------------------------------------------------- files
class TestRoundTrip:
    @pytest.mark.slow
    @pytest.mark.parametrize("suffix", [".npz", ".csv", ".json"])
    @given(mask=masks())
    def test_round_trip(self, suffix, mask):
        t = Trace(mask)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"trace{suffix}"
            assert t.save(path) == path
            back = Trace.load(path)
            assert back == t and back.mask.shape == mask.shape
            assert np.array_equal(back.mask, mask)
            assert Trace.load(path, n_clients=mask.shape[1]) == t
            with pytest.raises(ValueError, match="clients"):
                Trace.load(path, n_clients=mask.shape[1] + 1)

    @given(mask=masks(max_rounds=5))
    def test_csv_and_json_content_is_the_documented_format(self, mask):
        t = Trace(mask)
        with tempfile.TemporaryDirectory() as d:
            t.save(Path(d) / "a.csv")
            rows = [line.split(",") for line in (Path(d) / "a.csv").read_text().splitlines()]
            assert [[int(v) for v in row] for row in rows] == mask.astype(int).tolist()
            t.save(Path(d) / "a.json")
            doc = json.loads((Path(d) / "a.json").read_text())
            assert doc["n_clients"] == mask.shape[1]
            assert doc["active"] == [[i for i in range(mask.shape[1]) if row[i]] for row in mask]

    def test_npz_is_bit_packed(self, tmp_path):
        rounds, n = 2000, 1001
        mask = _random_mask(rounds, n, 0.5, seed=3)
        path = Trace(mask).save(tmp_path / "big.npz")
        with np.load(path, allow_pickle=False) as data:
            bits = data["bits"]
            assert bits.dtype == np.uint8 and bits.shape == (rounds, -(-n // 8))
            assert data["shape"].tolist() == [rounds, n]
            assert np.array_equal(np.unpackbits(bits, axis=1, count=n).astype(bool), mask)
        # random bits are incompressible: packed is ~rounds*n/8 bytes, a byte per entry would be ~8x more
        assert path.stat().st_size < 0.14 * rounds * n
        sparse = _random_mask(rounds, n, 0.05, seed=4)
        assert Trace(sparse).save(tmp_path / "sparse.npz").stat().st_size < rounds * n / 8

    @pytest.mark.parametrize("suffix", [".npz", ".csv", ".json"])
    def test_save_leaves_no_temporary_file_and_overwrites(self, tmp_path, suffix):
        t1, t2 = Trace(_random_mask(5, 9, seed=1)), Trace(_random_mask(5, 9, seed=2))
        t1.save(tmp_path / f"x{suffix}")
        t2.save(tmp_path / f"x{suffix}")
        assert os.listdir(tmp_path) == [f"x{suffix}"]
        assert Trace.load(tmp_path / f"x{suffix}") == t2

    def test_save_unknown_suffix(self, tmp_path):
        with pytest.raises(ValueError, match="unknown trace format"):
            Trace(np.ones((1, 1), dtype=bool)).save(tmp_path / "x.txt")
        assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------- hostile files
def _load_fails(path, **kw):
    """Trace.load must raise ValueError, and nothing else."""
    try:
        Trace.load(path, **kw)
    except ValueError as err:
        return str(err)
    except BaseException as err:  # noqa: BLE001 - the point of the test
        pytest.fail(f"Trace.load raised {type(err).__name__} instead of ValueError: {err}")
    pytest.fail("Trace.load accepted a corrupt file")


def _npz_bytes(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _good_arrays(mask):
    return dict(format=np.array("fedverify-trace"), version=np.array(1),
                shape=np.array(mask.shape, dtype=np.int64), bits=np.packbits(mask, axis=1))


class _Tripwire:
    """Unpickling this object creates the file ``path`` (via builtins.open)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class TestHostileNpz:
    @pytest.fixture
    def good(self, tmp_path):
        return Trace(_random_mask(40, 13, seed=5)).save(tmp_path / "good.npz").read_bytes()

    @pytest.mark.parametrize("cut", [0, 1, 10, 30, 100, -40, -1])
    def test_truncated(self, tmp_path, good, cut):
        p = tmp_path / "t.npz"
        p.write_bytes(good[:cut])
        _load_fails(p)

    @pytest.mark.parametrize("seed", range(4))
    def test_random_bytes(self, tmp_path, seed):
        p = tmp_path / "r.npz"
        p.write_bytes(np.random.default_rng(seed).bytes(500))
        _load_fails(p)

    @pytest.mark.parametrize("prefix", [b"PK\x03\x04", b"\x93NUMPY"])
    def test_random_bytes_with_magic(self, tmp_path, prefix):
        p = tmp_path / "r.npz"
        p.write_bytes(prefix + np.random.default_rng(9).bytes(300))
        _load_fails(p)

    def test_npy_named_npz(self, tmp_path):
        p = tmp_path / "a.npz"
        with open(p, "wb") as f:
            np.save(f, np.zeros((3, 3), dtype=np.uint8))
        _load_fails(p)

    @pytest.mark.parametrize("key", ["bits", "shape", "format", "extra"])
    def test_pickled_object_array_refused_without_unpickling(self, tmp_path, key):
        marker = tmp_path / "unpickled.marker"
        obj = np.array([_Tripwire(marker), 1], dtype=object)
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        arrays[key] = obj
        data = _npz_bytes(**arrays)
        # sanity: the file really holds a pickle that would trip the wire
        with np.load(io.BytesIO(data), allow_pickle=True) as z:
            z[key]
        assert marker.exists()
        marker.unlink()
        p = tmp_path / "evil.npz"
        p.write_bytes(data)
        _load_fails(p)
        assert not marker.exists()

    def test_extra_key(self, tmp_path):
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        p = tmp_path / "e.npz"
        p.write_bytes(_npz_bytes(**arrays, extra=np.zeros(2)))
        assert "found" in _load_fails(p)

    @pytest.mark.parametrize("key", ["format", "version", "shape", "bits"])
    def test_missing_key(self, tmp_path, key):
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        del arrays[key]
        p = tmp_path / "m.npz"
        p.write_bytes(_npz_bytes(**arrays))
        _load_fails(p)

    @pytest.mark.parametrize("field,value", [
        ("format", np.array("something-else")), ("format", np.array(["fedverify-trace", "x"])),
        ("version", np.array(2)), ("version", np.array([1, 1])), ("version", np.array("one")),
    ])
    def test_bad_format_or_version(self, tmp_path, field, value):
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        arrays[field] = value
        p = tmp_path / "v.npz"
        p.write_bytes(_npz_bytes(**arrays))
        _load_fails(p)

    @pytest.mark.parametrize("shape", [
        np.array([10**9, 10**9], dtype=np.int64),   # enormous: must be refused before unpacking
        np.array([2, 4], dtype=np.int64),           # bits are (2, 1) for n=3: consistent! (see below)
        np.array([3, 3], dtype=np.int64),
        np.array([2, 17], dtype=np.int64),
        np.array([0, 3], dtype=np.int64), np.array([2, -3], dtype=np.int64),
        np.array([2.0, 3.0]), np.array([2, 3, 1], dtype=np.int64), np.array(["2", "3"]),
    ])
    def test_shape_inconsistent_with_bits(self, tmp_path, shape):
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        arrays["shape"] = shape
        p = tmp_path / "s.npz"
        p.write_bytes(_npz_bytes(**arrays))
        if shape.tolist() == [2, 4]:  # 4 clients also fit in one byte per row: a valid trace
            assert Trace.load(p) == Trace(np.zeros((2, 4), dtype=bool))
            return
        _load_fails(p)

    @pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.bool_, np.float64])
    def test_bits_wrong_dtype(self, tmp_path, dtype):
        arrays = _good_arrays(np.zeros((2, 3), dtype=bool))
        arrays["bits"] = arrays["bits"].astype(dtype)
        p = tmp_path / "d.npz"
        p.write_bytes(_npz_bytes(**arrays))
        _load_fails(p)

    @pytest.mark.parametrize("n,byte", [(7, 0b00000001), (3, 0b00010000), (9, 0b01000000)])
    def test_nonzero_padding_bits(self, tmp_path, n, byte):
        mask = np.zeros((2, n), dtype=bool)
        arrays = _good_arrays(mask)
        arrays["bits"][1, -1] |= byte
        p = tmp_path / "pad.npz"
        p.write_bytes(_npz_bytes(**arrays))
        assert "padding" in _load_fails(p)

    def test_hand_written_npz_loads(self, tmp_path):
        mask = _random_mask(6, 11, seed=8)
        p = tmp_path / "hand.npz"
        p.write_bytes(_npz_bytes(**_good_arrays(mask)))
        assert Trace.load(p) == Trace(mask)

    def test_corrupted_compressed_stream(self, tmp_path):
        good = Trace(_random_mask(200, 50, seed=5)).save(tmp_path / "g.npz").read_bytes()
        with zipfile.ZipFile(io.BytesIO(good)) as z:
            info = z.getinfo("bits.npy")
        head = good[info.header_offset : info.header_offset + 30]  # local file header
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
        assert info.compress_type == zipfile.ZIP_DEFLATED
        bad = bytearray(good)
        bad[start] ^= 0xFF  # first byte of the deflate stream of bits.npy
        p = tmp_path / "c.npz"
        p.write_bytes(bytes(bad))
        _load_fails(p)

    def test_member_header_declaring_huge_array(self, tmp_path):
        p = tmp_path / "h.npz"
        with zipfile.ZipFile(p, "w") as z:
            for name, arr in _good_arrays(np.zeros((2, 3), dtype=bool)).items():
                if name == "bits":
                    continue
                b = io.BytesIO()
                np.save(b, arr)
                z.writestr(name + ".npy", b.getvalue())
            b = io.BytesIO()
            np.lib.format.write_array_header_1_0(b, {"descr": "|u1", "fortran_order": False, "shape": (10**9, 125_000_000)})
            b.write(b"\0" * 16)
            z.writestr("bits.npy", b.getvalue())
        _load_fails(p)


class TestHostileText:
    @pytest.mark.parametrize("text,where", [
        ("0,1\n1,2\n", "'2'"), ("0,1\n0.5,1\n", "'0.5'"), ("0,1,1\n1,0\n", "row 1"),
        ("", "no rounds"), ("\n\n", "no rounds"), ("a,b\n", "no rounds"), ("0,1\na,b\n", "'a'"), ("a,b,c\n0,1\n", "header has 3"), ("0,1\n1,\n", "row 1"),
        ("0;1\n1;0\n", "row 0"), ("-1,0\n", "'-1'"), ("1,1\n0,True\n", "'True'"),
    ])
    def test_bad_csv(self, tmp_path, text, where):
        p = tmp_path / "x.csv"
        p.write_text(text)
        assert where in _load_fails(p)

    def test_binary_csv(self, tmp_path):
        p = tmp_path / "x.csv"
        p.write_bytes(b"\xff\xfe\x00\x81" * 50)
        _load_fails(p)

    def test_hand_written_csv_with_comment_and_spaces(self, tmp_path):
        p = tmp_path / "x.csv"
        p.write_text("# a comment\n0, 1, 1\n\n1 ,0,0\n")
        assert Trace.load(p).mask.astype(int).tolist() == [[0, 1, 1], [1, 0, 0]]

    @pytest.mark.parametrize("text", ["", "{", "not json", "[[0, 1]", "{'format': 1}", "\x00\x01"])
    def test_json_not_json(self, tmp_path, text):
        p = tmp_path / "x.json"
        p.write_text(text)
        _load_fails(p)

    def _doc(self, active, n=5, **extra):
        return json.dumps({"format": "fedverify-trace", "version": 1, "n_clients": n, "active": active, **extra})

    @pytest.mark.parametrize("active,msg", [
        ([[0], [5]], "client id 5"), ([[0], [-1]], "client id -1"), ([[1, 2, 1]], "appears twice"),
        ([[1.5]], "not an integer"), ([[True]], "not an integer"), ([["1"]], "not an integer"),
        ([[1.0]], "not an integer"), ([], "at least one round"), ([1, 2], "list of lists"),
        ("0,1", "list of lists"), (None, "list of lists"), ([[[0]]], "not an integer"),
    ])
    def test_json_bad_ids(self, tmp_path, active, msg):
        p = tmp_path / "x.json"
        p.write_text(self._doc(active))
        assert msg in _load_fails(p)

    @pytest.mark.parametrize("doc", [
        {"active": [[0]], "n_clients": 3},                                    # no format tag
        {"format": "other", "active": [[0]], "n_clients": 3},
        {"format": "fedverify-trace", "active": [[0]]},                        # no n_clients
        {"format": "fedverify-trace", "active": [[0]], "n_clients": 0},
        {"format": "fedverify-trace", "active": [[0]], "n_clients": 3.0},
        {"format": "fedverify-trace", "active": [[0]], "n_clients": "3"},
        {"format": "fedverify-trace", "active": [[0]], "n_clients": 10**30},
        {"format": "fedverify-trace", "n_clients": 3},
        "just a string", 17, None,
    ])
    def test_json_bad_document(self, tmp_path, doc):
        p = tmp_path / "x.json"
        p.write_text(json.dumps(doc))
        _load_fails(p)

    def test_bare_list(self, tmp_path):
        p = tmp_path / "x.json"
        p.write_text(json.dumps([[0, 2], [], [1]]))
        assert "n_clients" in _load_fails(p)
        t = Trace.load(p, n_clients=4)
        assert t.mask.astype(int).tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0]]
        assert "outside" in _load_fails(p, n_clients=2)
        p.write_text(json.dumps([[0, 0]]))
        assert "twice" in _load_fails(p, n_clients=4)
        p.write_text(json.dumps([0, 1]))
        _load_fails(p, n_clients=4)

    def test_json_deeply_nested(self, tmp_path):
        p = tmp_path / "x.json"
        p.write_text("[" * 100_000 + "]" * 100_000)
        _load_fails(p, n_clients=3)

    def test_json_enormous_n_clients(self, tmp_path):
        p = tmp_path / "x.json"
        p.write_text(self._doc([[]], n=2**62))
        _load_fails(p)


class TestPathErrors:
    @pytest.mark.parametrize("suffix", [".npz", ".csv", ".json"])
    def test_nonexistent(self, tmp_path, suffix):
        assert "does not exist" in _load_fails(tmp_path / f"missing{suffix}")

    def test_directory_with_trace_suffix(self, tmp_path):
        (tmp_path / "dir.npz").mkdir()
        _load_fails(tmp_path / "dir.npz")

    @pytest.mark.parametrize("name", ["x.txt", "x", "x.npy", "x.pkl"])
    def test_unknown_suffix(self, tmp_path, name):
        p = tmp_path / name
        p.write_bytes(pickle.dumps([[0, 1]]))
        assert "unknown trace format" in _load_fails(p)

    def test_suffix_is_case_insensitive(self, tmp_path):
        t = Trace(_random_mask(3, 5, seed=2))
        t.save(tmp_path / "X.CSV")
        assert Trace.load(tmp_path / "X.CSV") == t


class TestCommonForms:
    """Forms other tools write: a header row, other separators, ids as lists, and the like."""

    MASK = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)

    def test_csv_with_a_header_row(self, tmp_path):
        p = tmp_path / "t.csv"
        p.write_text("client0,client1,client2\n" + "\n".join(",".join(str(int(v)) for v in row) for row in self.MASK))
        assert Trace.load(p) == Trace(self.MASK)

    def test_csv_whose_first_row_is_numbers_but_not_0_1_still_fails(self, tmp_path):
        p = tmp_path / "t.csv"
        p.write_text("2,0,1\n1,0,1\n")
        assert "not 0 or 1" in _load_fails(p)

    @pytest.mark.parametrize("arrays", [lambda m: {"mask": m}, lambda m: {"mask": m.astype(np.int8)},
                                        lambda m: {"arr_0": m}])
    def test_npz_with_a_plain_mask(self, tmp_path, arrays):
        p = tmp_path / "t.npz"
        p.write_bytes(_npz_bytes(**arrays(self.MASK)))
        assert Trace.load(p) == Trace(self.MASK)

    def test_npz_with_a_plain_mask_is_still_validated(self, tmp_path):
        p = tmp_path / "t.npz"
        p.write_bytes(_npz_bytes(mask=np.array([[0, 2]])))
        assert "only 0 and 1" in _load_fails(p)
        p.write_bytes(_npz_bytes(mask=np.ones(4, dtype=bool)))
        assert "shape" in _load_fails(p)
        p.write_bytes(_npz_bytes(a=self.MASK, b=self.MASK))
        assert "'mask'" in _load_fails(p)

    def test_bare_json_list_names_what_it_needs(self, tmp_path):
        p = tmp_path / "t.json"
        p.write_text("[[0, 2], [1], [], [0, 1, 2]]")
        assert "number of clients" in _load_fails(p)
        assert Trace.load(p, n_clients=3) == Trace(self.MASK)


def test_concurrent_saves_of_one_path_never_mix(tmp_path):
    """The temporary name was .NAME.PID.tmp, shared by every thread of a process: two threads
    saving one path wrote into one file (corrupt JSON, wrong CSV, bad zip)."""
    from concurrent.futures import ThreadPoolExecutor

    traces = [Trace(np.eye(40, dtype=bool)[:, ::-1] if k % 2 else np.eye(40, dtype=bool)) for k in range(2)]
    for suffix in (".json", ".csv", ".npz"):
        path = tmp_path / f"shared{suffix}"
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: traces[k % 2].save(path), range(64)))
        assert Trace.load(path) in traces
        assert not list(tmp_path.glob(".shared*"))            # no temporary file left behind


@pytest.mark.parametrize("sets, message", [([[0], 5], "round 1: expected a list of client ids, got 5"),
                                           ([[0], "01"], "round 1"), (7, "sequence of per-round id lists")])
def test_from_sets_refuses_what_is_not_a_list_of_lists(sets, message):
    """`Trace.from_sets([[0], 5], 2)` raised TypeError."""
    with pytest.raises(ValueError, match=message):
        Trace.from_sets(sets, 2)


@pytest.mark.parametrize("text", ["1,0,1\n0,1,1\n", "client_0,client_1,client_2\n1,0,1\n0,1,1\n", "1,0,1\r\n0,1,1"])
def test_a_csv_trace_saved_with_a_byte_order_mark_reads_as_without(tmp_path, text):
    """Spreadsheet programs start UTF-8 CSV files with a byte order mark (EF BB BF)."""
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_bytes(text.encode())
    marked.write_bytes(codecs.BOM_UTF8 + text.encode())
    assert np.array_equal(Trace.load(marked).mask, Trace.load(plain).mask)
    assert Trace.load(marked).mask.tolist() == [[True, False, True], [False, True, True]]
