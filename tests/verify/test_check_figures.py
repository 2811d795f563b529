"""`fedverify check` figures a reader can read at --paper scale: panels in a grid no wider than
a screen, one file per theorem, and an interval plot (mean, confidence limits, bound) for a left
side that is one number per run."""
import math

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.image import imread

from verify import report
from verify.cli import main
from verify.verdicts import AVERAGE_GRAD_NORM2

#: The widest figure that fits a screen: 18 inches at save_figure's 120 dpi.
SCREEN_PX = 18 * 120
FEDSUM = {"fedsum.lemma_c6": ("P1", "P2", "P3"), "fedsum.lemma_d6": ("P1", "P2", "P3"),
          "fedsum.lemma_e6": ("P1", "P2", "P3"), "fedsum.theorem_4_1": ("P1", "P2", "P3"),
          "fedsum.theorem_c1": ("P1", "P2", "P3"), "fedsum.theorem_d1": ("P1", "P2", "P3"),
          "fedsum.theorem_e1": ("P1", "P2", "P3"), "fedsum.corollary_4_1": ("P1", "P2", "P3"),
          "fedsum.corollary_g1": ("P1", "P2", "case3", "case4")}
BIAS = "ε_bias = F(w_B*) − F*, w_B* = argmin F_B"


def _curve_rows(theorems=FEDSUM, algorithms=("fedsum-b", "fedavg")):
    """Rows as `check --paper fedsum` makes them, one per algorithm and (theorem, pattern), each
    with its running mean of ‖∇f(x_t)‖²."""
    rows = []
    for theorem, patterns in theorems.items():
        for pattern in patterns:
            for k, algorithm in enumerate(algorithms):
                curve = np.linspace(3, 1 + 0.1 * k, 40)
                rows.append({"theorem": theorem, "algorithm": algorithm, "pattern": pattern, "rounds": 40,
                             "tau_max": 9.0, "tau_avg": 4.0, "measured": curve[-1], "lower": 0.95 * curve[-1],
                             "upper": 1.05 * curve[-1], "bound": 14.0, "ratio": curve[-1] / 14, "verdict": "holds",
                             "label": "holds", "covered": algorithm.startswith("fedsum"), "curve": curve,
                             "result": {"lhs": AVERAGE_GRAD_NORM2, "confidence": 0.95}})
    return rows


def _one_number_rows(measured=(0.5, 5.0, 1.0), theorem="cafed.theorem_3"):
    """Rows of a theorem whose left side is one number per run (no curve): one holds, one is
    violated, one has a bound known only within a range."""
    rows = []
    for algorithm, m, bound, verdict, span in zip(("cafed-unbiased", "cafed", "fedavg"), measured, (2.0, 2.0, 1.2),
                                                  ("holds", "violated", "inconclusive"), (None, None, (0.9, 1.6))):
        rows.append({"theorem": theorem, "algorithm": algorithm, "pattern": "cafed-temporal", "rounds": 100,
                     "tau_max": math.nan, "tau_avg": math.nan, "measured": m, "lower": m - 0.1 * abs(m),
                     "upper": m + 0.1 * abs(m), "bound": bound, "ratio": m / bound, "verdict": verdict,
                     "label": verdict, "covered": True, "curve": np.zeros(0),
                     "result": {"lhs": BIAS, "confidence": 0.95, "bound_range": span}})
    return rows


@pytest.fixture
def drawn(monkeypatch):
    """The figures plot_check saves, kept for inspection."""
    figures = []
    save = report.save_figure

    def keep(fig, path):
        figures.append(fig)
        return save(fig, path)

    monkeypatch.setattr(report, "save_figure", keep)
    return figures


def _width_px(path) -> int:
    return imread(path).shape[1]


@pytest.mark.slow
def test_28_panels_fit_a_screen_in_a_grid(tmp_path, drawn):
    rows = _curve_rows()
    assert len({(r["theorem"], r["pattern"]) for r in rows}) == 28
    path = report.plot_check(rows, tmp_path / "check.png", "fedsum")
    assert _width_px(path) <= SCREEN_PX
    fig = drawn[-1]
    assert len(fig.axes) == 28                         # no empty cells left in the grid
    columns = {ax.get_subplotspec().colspan.start for ax in fig.axes}
    assert len(columns) <= report.CHECK_COLUMNS and len({ax.get_subplotspec().rowspan.start for ax in fig.axes}) == 7
    assert all(ax.get_ylabel() for ax in fig.axes if ax.get_subplotspec().colspan.start == 0)
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)


@pytest.mark.slow
def test_several_theorems_give_one_file_each_and_one_theorem_keeps_check_png(tmp_path):
    theorems = {name: FEDSUM[name] for name in ("fedsum.theorem_4_1", "fedsum.lemma_c6", "fedsum.corollary_g1")}
    rows = _curve_rows(theorems)
    paths = report.plot_checks(rows, tmp_path / "check.png", "fedsum")
    assert [p.name for p in paths] == [f"check-{theorem}.png" for theorem in theorems]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)
    assert all(_width_px(p) <= SCREEN_PX for p in paths)
    one = [r for r in rows if r["theorem"] == "fedsum.theorem_4_1"]
    assert report.plot_checks(one, tmp_path / "one" / "check.png") == [tmp_path / "one" / "check.png"]


def test_figure_names_are_file_names():
    paths = report.check_figure_paths("out/check.png", ["my plugin/theorem 1", "b.theorem_2"])
    assert [p.name for p in paths] == ["check-my_plugin_theorem_1.png", "check-b.theorem_2.png"]
    assert report.check_figure_paths("out/check.png", ["a.b"]) == [report.Path("out/check.png")]


def test_one_number_per_run_draws_intervals_against_the_bound(tmp_path, drawn):
    rows = _one_number_rows()
    report.plot_check(rows, tmp_path / "check.png", "cafed")
    ax = drawn[-1].axes[0]
    assert ax.get_ylabel().replace("\n", " ") == BIAS
    assert ax.get_yscale() == "log"
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 3 and all(c.has_yerr for c in bars)
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == ["cafed-unbiased", "cafed", "fedavg"]
    segments = [s for c in ax.collections for s in getattr(c, "get_segments", lambda: [])()
                if len(s) == 2 and s[0][1] == s[1][1]]
    assert sorted(s[0][1] for s in segments) == [1.2, 2.0, 2.0]              # one bound segment per algorithm
    red = [line for line in ax.get_lines() if line.get_color() == "red" and line.get_marker() == "x"]
    assert len(red) == 1 and red[0].get_ydata()[0] == 5.0                    # the violated row is marked
    labels = [t.get_text() for t in drawn[-1].legends[0].get_texts()]
    assert "bound" in labels and any(lab.startswith("measured") for lab in labels)
    assert any(lab.startswith("violated") for lab in labels) and any("range of the bound" in lab for lab in labels)


def test_a_negative_left_side_stays_on_the_axis(tmp_path, drawn):
    rows = _one_number_rows(measured=(-585.0, -402.0, 0.5), theorem="cafed.theorem_1")
    report.plot_check(rows, tmp_path / "check.png")
    ax = drawn[-1].axes[0]
    low, high = ax.get_ylim()
    assert ax.get_yscale() == "symlog" and low < -585 * 1.1 and high > 2.0


def test_curve_panels_explain_the_dots_at_T(tmp_path, drawn):
    report.plot_check(_curve_rows({"fedsum.theorem_4_1": ("P1",)}, ("fedsum-b", "fedsum", "fedavg")),
                      tmp_path / "check.png")
    labels = [t.get_text() for t in drawn[-1].legends[0].get_texts()]
    assert any(lab.startswith("measured at t = T") for lab in labels)
    assert drawn[-1].axes[0].get_ylabel().startswith("running mean")


@pytest.mark.slow
def test_check_paper_writes_and_lists_one_figure_per_theorem(tmp_path, capsys):
    assert main(["check", "--paper", "momentum", "-T", "10", "-N", "4", "--seeds", "2", "-K", "1", "--no-progress",
                 "-o", str(tmp_path)]) == 0
    wrote = capsys.readouterr().out.splitlines()[-1]
    figures = sorted(p.name for p in tmp_path.glob("*.png"))
    assert figures == sorted(["check-momentum.theorem_4_1.png", "check-momentum.theorem_4_6.png",
                              "check-momentum.theorem_5_1.png", "check-momentum.corollary_g1.png"])
    assert all(str(tmp_path / name) in wrote for name in figures)
    assert all(_width_px(tmp_path / name) <= SCREEN_PX for name in figures)


def test_an_interval_panel_near_the_float_limit_is_drawn():
    """Values near 1e300 (a bound at an absurd step size): the log margins stay inside the float
    range instead of overflowing to an infinite axis limit."""
    import io

    from verify.report import _interval_scale, figure

    fig, axes = figure()
    ax = axes.ravel()[0]
    ax.errorbar([0], [3e299], yerr=[[1e299], [1e299]], fmt="o")
    ax.hlines(1.5e300, -0.3, 0.3)
    ax.margins(y=0.12)
    _interval_scale(ax, [3e299, 2e299, 4e299, 1.5e300])
    fig.savefig(io.BytesIO(), format="png")
    low, high = ax.get_ylim()
    assert 0 < low < 2e299 and 1.5e300 < high < float("inf")
