"""The networks of the classification problems, as plain ``torch.nn.Module`` builders.

``fedsum_cnn`` builds the CNNs of FedSUM Table 2 (App. H):

    MNIST     C(1,10)-R-M-C(10,20)-D-R-M-L(50)-R-D-L(10)
    SVHN      C(3,32)-R-M-C(32,32)-R-M-L(128)-R-L(10)
    CIFAR-10  C(3,32)-R-M-C(32,32)-R-M-L(256)-R-L(64)-R-L(10)

with C(in, out) a 3×3 convolution (stride 1, padding 1), R ReLU, M a 2×2 max-pool (stride 2),
L(n) a linear layer with n outputs and D dropout with probability 0.2 (the table's footnote).
The first linear layer's input size follows from the image: a padded 3×3 convolution keeps
H×W and each pool halves it (floor), so 20·7·7 = 980 for 28×28 MNIST and
32·8·8 = 2048 for 32×32 SVHN/CIFAR-10. There is no batch normalisation, so a network has
parameters only (no buffers, no running statistics shared across clients).

``digits_cnn`` is a scaled-down network for scikit-learn's 8×8 digits (not in the paper), and
``mlp`` the one-hidden-layer network of ``Classifier(model="mlp")``.
"""
from __future__ import annotations


from torch import nn
from participation.validation import integer

__all__ = ["fedsum_cnn", "digits_cnn", "mlp", "cnn", "DATASETS", "IMAGE_SHAPES"]

#: Input shape (C, H, W) of each data set (FedSUM App. H.2; digits: 8×8 grey).
IMAGE_SHAPES = {"mnist": (1, 28, 28), "svhn": (3, 32, 32), "cifar10": (3, 32, 32), "digits": (1, 8, 8)}
DATASETS = tuple(IMAGE_SHAPES)

# Table 2, one row per data set: (conv widths, dropout after the second conv, hidden linear widths).
_TABLE_2 = {
    "mnist": ((10, 20), True, (50,)),
    "svhn": ((32, 32), False, (128,)),
    "cifar10": ((32, 32), False, (256, 64)),
}

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _positive(value, name: str) -> int:
    return integer(value, name)


def _image_size(image_size, dataset: str) -> tuple[int, int]:
    if image_size is None:
        return IMAGE_SHAPES[dataset][1:]
    if len(tuple(image_size)) != 2:
        raise ValueError(f"image_size must be (H, W), got {image_size!r}")
    h, w = (_positive(s, "image_size") for s in image_size)
    if h < 4 or w < 4:
        raise ValueError(f"image_size must be at least 4×4 (two 2×2 pools), got {image_size!r}")
    return h, w


def _conv(c_in: int, c_out: int) -> nn.Conv2d:
    """C(c_in, c_out): kernel 3, stride 1, padding 1 (Table 2 footnote)."""
    return nn.Conv2d(c_in, c_out, kernel_size=3, stride=1, padding=1)


def _pool() -> nn.MaxPool2d:
    """M: 2×2 max-pool, stride 2 (Table 2 footnote)."""
    return nn.MaxPool2d(kernel_size=2, stride=2)


def _two_conv_net(in_channels, widths, hidden, n_classes, image_size, dropout=None) -> nn.Sequential:
    """C(in,w₁)-R-M-C(w₁,w₂)-[D]-R-M-L(h₁)-R-[D]-…-L(n_classes); D only where ``dropout`` is a rate."""
    (h, w), (w1, w2) = image_size, widths
    layers = [_conv(in_channels, w1), nn.ReLU(), _pool(), _conv(w1, w2)]
    layers += [nn.Dropout(dropout)] if dropout is not None else []
    layers += [nn.ReLU(), _pool(), nn.Flatten()]
    width = w2 * (h // 2 // 2) * (w // 2 // 2)
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        layers += [nn.Dropout(dropout)] if dropout is not None else []
        width = size
    return nn.Sequential(*layers, nn.Linear(width, n_classes))


def fedsum_cnn(dataset: str, in_channels: int | None = None, n_classes: int = 10, image_size=None,
               dropout: float = 0.2) -> nn.Sequential:
    """The Table 2 CNN of ``dataset`` ("mnist", "svhn" or "cifar10").

    ``in_channels`` and ``image_size`` (H, W) default to the data set's (1×28×28 or 3×32×32);
    ``n_classes`` is the last L's width (10 in the paper). ``dropout`` is D's rate (0.2 in the
    MNIST net; the other nets have no D). Dropout only acts in training mode; ``Classifier``
    evaluates the network in eval mode (see there).
    """
    if dataset not in _TABLE_2:
        raise ValueError(f"dataset must be one of {sorted(_TABLE_2)} for a Table 2 CNN, got {dataset!r}")
    default_channels = IMAGE_SHAPES[dataset][0]
    in_channels = default_channels if in_channels is None else _positive(in_channels, "in_channels")
    widths, has_dropout, hidden = _TABLE_2[dataset]
    return _two_conv_net(in_channels, widths, hidden, _positive(n_classes, "n_classes"),
                         _image_size(image_size, dataset), dropout if has_dropout else None)


def digits_cnn(in_channels: int = 1, n_classes: int = 10, image_size=None, widths=(8, 16),
               hidden: int = 32) -> nn.Sequential:
    """A scaled-down Table 2 CNN for 8×8 digits (not in the paper):
    C(1,8)-R-M-C(8,16)-R-M-L(32)-R-L(10), the SVHN layout with widths cut by 4 so that the
    16·2·2 = 64 flattened features match the 64 pixels; 3 658 parameters."""
    widths = tuple(_positive(w, "widths") for w in widths)
    if len(widths) != 2:
        raise ValueError(f"widths must be two conv widths, got {widths!r}")
    return _two_conv_net(_positive(in_channels, "in_channels"), widths, (_positive(hidden, "hidden"),),
                         _positive(n_classes, "n_classes"), _image_size(image_size, "digits"))


def cnn(dataset: str, image_shape, n_classes: int = 10) -> nn.Sequential:
    """The CNN for ``dataset`` on images of ``image_shape`` (C, H, W): Table 2's for
    mnist/svhn/cifar10, ``digits_cnn`` for digits."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {dataset!r}")
    c, h, w = image_shape
    if dataset == "digits":
        return digits_cnn(c, n_classes, (h, w))
    return fedsum_cnn(dataset, c, n_classes, (h, w))


def mlp(n_features: int, hidden: int, n_classes: int, activation: str = "tanh") -> nn.Sequential:
    """Linear(n_features, hidden) – tanh or ReLU – Linear(hidden, n_classes)."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    return nn.Sequential(nn.Linear(_positive(n_features, "n_features"), _positive(hidden, "hidden")),
                         _ACTIVATIONS[activation](), nn.Linear(hidden, _positive(n_classes, "n_classes")))
