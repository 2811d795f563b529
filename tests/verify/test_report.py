"""verify.report: files written atomically with a plain write's mode; figures a reader can read."""
import os
import stat

import numpy as np
import pytest

from participation.expected import monte_carlo
from participation.patterns import preset
from verify import report


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_files_get_the_mode_of_a_plain_write(tmp_path, umask):
    """mkstemp made every file 0600 whatever the umask."""
    old = os.umask(umask)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        written = report.write_json(tmp_path / "atomic.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "kept.csv"
    path.write_text("old")
    path.chmod(0o640)
    report.write_csv(path, [{"a": 1}], ["a"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text().startswith("a")


def _mc_case(name, rounds=200, reps=200):
    from participation.expected import exact_tau_avg, paper_tau_max_bound

    pattern = preset(name)
    mc = monte_carlo(pattern, rounds, reps, seed=0, keep_samples=True, progress=False)
    bound = paper_tau_max_bound(pattern, rounds).value
    return {"name": name, "estimates": {"tau_max": mc.tau_max, "tau_avg": mc.tau_avg},
            "exact": {"tau_max": None, "tau_avg": exact_tau_avg(pattern, rounds)},
            "bound": {"tau_max": bound, "tau_avg": bound}, "samples": mc.samples}


@pytest.mark.slow
def test_mc_histograms_are_not_squeezed_by_the_paper_bound(tmp_path):
    """The bound (about 5x the samples) does not stretch the x axis: the histograms fill their
    panels and the bound is named in a note."""
    from matplotlib.figure import Figure

    captured = {}
    original = report.save_figure

    def keep(fig, path):
        captured["fig"] = fig
        return original(fig, path)

    case = _mc_case("P1")
    report.save_figure, saved = keep, report.save_figure
    try:
        path = report.plot_mc([case], tmp_path / "mc.png")
    finally:
        report.save_figure = saved
    assert path.read_bytes()[:4] == b"\x89PNG"
    fig: Figure = captured["fig"]
    for ax, key in zip(fig.axes, ("tau_max", "tau_avg")):
        lo, hi = ax.get_xlim()
        samples = case["samples"][key]
        assert hi - lo < 3 * max(np.ptp(samples), 1.0)      # the histogram fills the panel
        assert ax.get_xlabel() and ax.get_ylabel() == "traces"
        assert any("paper bound" in t.get_text() for t in ax.texts)


@pytest.mark.slow
def test_check_figure_has_one_legend_and_one_bound_line_per_value(tmp_path):
    captured = {}
    original = report.save_figure
    rows = []
    for pattern in ("P1", "P2"):
        for k, algorithm in enumerate(("fedsum-b", "fedsum", "fedsum-cr", "fedavg", "scaffold")):
            curve = np.linspace(3, 1 + 0.1 * k, 50)
            rows.append({"algorithm": algorithm, "pattern": pattern, "rounds": 50, "tau_max": 9, "tau_avg": 4.0,
                         "measured": curve[-1], "bound": 14.0, "ratio": curve[-1] / 14, "curve": curve,
                         "covered": algorithm.startswith("fedsum")})

    def keep(fig, path):
        captured["fig"] = fig
        return original(fig, path)

    report.save_figure, saved = keep, report.save_figure
    try:
        report.plot_check(rows, tmp_path / "check.png", "title")
    finally:
        report.save_figure = saved
    fig = captured["fig"]
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels.count("bound") == 1 and "fedavg (ref)" in labels
    for ax in fig.axes:
        assert sum(1 for line in ax.get_lines() if line.get_linestyle() == "--") == 1
        assert all(t.get_text() == "" for t in ax.yaxis.get_minorticklabels())
