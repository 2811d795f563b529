"""Histograms of integer τ_max put the same number of integers in every bin (no bin alternately
catching one and two values), one value a bin for narrow ranges, whole-number widths for wide ones."""
import numpy as np

from verify.report import histogram_bins


def test_integer_samples_get_bins_of_a_whole_number_of_values():
    rng = np.random.default_rng(0)
    for low, high in ((3, 20), (10, 400), (0, 3000)):
        samples = rng.integers(low, high, 500).astype(float)
        edges = histogram_bins(samples, integer=True)
        widths = np.diff(edges)
        assert np.all(widths == widths[0]) and widths[0] == round(widths[0])
        assert edges[0] < samples.min() < edges[1] and edges[-1] > samples.max()
        counts = [np.sum((np.arange(low, high) > a) & (np.arange(low, high) < b)) for a, b in zip(edges, edges[1:])]
        assert len(set(counts[:-1])) == 1                   # every full bin holds the same number of integers


def test_fractional_samples_get_thirty_bins():
    assert histogram_bins(np.array([0.5, 1.25, 3.0]), integer=True) == 30
    assert histogram_bins(np.array([1.0, 2.0]), integer=False) == 30
