"""CA-Fed's theorems (Rodio et al., IEEE/ACM ToN 2023, doi:10.1109/TNET.2023.3324257: eqs. (10),
(11), (13), (15)) judged on run records beyond the cases of test_check_run_theorems.py: ``fedverify check
--record`` states the constants each record needs, so that ``check-run`` on the files alone
gives ``check``'s values, bound and verdict for every row (the greedy ``cafed`` included, whose
q moves from run to run); an availability model estimated from the recorded S_t is the
maximum-likelihood two-state chain of the pooled transition counts (counted here in a loop),
and a client whose chain the records do not identify is refused by name."""
import json

import numpy as np
import pytest

from algorithms.problems import Quadratic
from participation.patterns import Markov
from verify.cli import main
from verify.records.checks import check_run
from verify.records import load_record

from .test_check_run_theorems import N, _cafed_recorded

PI, LAM = np.linspace(0.4, 0.9, N), np.full(N, 0.3)


@pytest.fixture(scope="module")
def problem():
    return Quadratic.random(N, 4, seed=3, noise_std=0.1)


def test_check_record_then_check_run_gives_every_cafed_row(tmp_path, capsys):
    """Every CA-Fed row with runs: ``check-run`` on its records repeats ``check.json``'s values,
    bound and verdict (ε_bias of the greedy ``cafed`` at each record's own q)."""
    out, rec = tmp_path / "out", tmp_path / "rec"
    assert main(["check", "--paper", "cafed", "--clients", "8", "--rounds", "30", "--local-steps", "2", "--seeds", "2",
                 "--record", str(rec), "--output", str(out), "--no-progress"]) == 0
    table = json.loads((out / "check.json").read_text())
    judged_rows = 0
    for row in table["rows"]:
        files = sorted(str(p) for p in rec.glob(f"{row['theorem']}_{row['algorithm']}_*.jsonl"))
        if not files:                                   # ε_bias at a q known before any run: no run, no record
            assert row["algorithm"] == "cafed-unbiased" and row["theorem"] in ("cafed.theorem_1_bias",
                                                                                "cafed.theorem_3")
            continue
        assert "F_B_star" in load_record(files[0]).header["constants"]
        capsys.readouterr()
        report = tmp_path / "judged.json"
        assert main(["check-run", *files, "--theorem", row["theorem"], "--json", str(report)]) == 0
        judged = json.loads(report.read_text())
        assert judged["values"] == pytest.approx(row["result"]["values"], rel=1e-12, abs=1e-14), row["theorem"]
        assert judged["bound"]["value"] == pytest.approx(row["bound"], rel=1e-12), row["theorem"]
        assert judged["verdict"] == row["verdict"], row["theorem"]
        judged_rows += 1
    assert judged_rows == 6                             # theorem_1, theorem_2 × 2 algorithms; the bias rows of cafed


def _as_estimated(paths, tmp_path, name="est"):
    out = []
    for i, path in enumerate(paths):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines[0]["availability"] = {"model": "estimate"}
        target = tmp_path / f"{name}_{i}.jsonl"
        target.write_text("".join(json.dumps(x) + "\n" for x in lines))
        out.append(target)
    return out


def _pooled_chain(masks):
    """Maximum likelihood of independent two-state chains from several traces, conditional on
    each trace's first round: â = #(0→1)/#(0→·), b̂ = #(1→0)/#(1→·), counted transition by
    transition; π = â/(â + b̂), λ = 1 − â − b̂."""
    n = masks[0].shape[1]
    counts = np.zeros((n, 2, 2))
    for mask in masks:
        for t in range(1, mask.shape[0]):
            for k in range(n):
                counts[k, int(mask[t - 1, k]), int(mask[t, k])] += 1
    a = counts[:, 0, 1] / counts[:, 0].sum(axis=1)
    b = counts[:, 1, 0] / counts[:, 1].sum(axis=1)
    return a / (a + b), 1 - a - b


def test_an_estimated_markov_model_is_the_pooled_maximum_likelihood_chain(problem, tmp_path):
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_2", pattern=Markov(PI, LAM))
    estimated = _as_estimated(paths, tmp_path)
    judged = check_run(estimated, "cafed.theorem_2")
    assert any("estimated from the recorded S_t" in note for note in judged.notes)
    pi, lam = _pooled_chain([load_record(p).mask for p in paths])
    stated = []
    for i, path in enumerate(paths):                    # the same records with the chain written out
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines[0]["availability"] = {"model": "markov", "pi": list(pi), "lam": list(lam)}
        stated.append(tmp_path / f"stated_{i}.jsonl")
        stated[-1].write_text("".join(json.dumps(x) + "\n" for x in lines))
    explicit = check_run(stated, "cafed.theorem_2")
    assert judged.values == pytest.approx(explicit.values, rel=1e-12)
    assert float(judged.bound.value) == pytest.approx(float(explicit.bound.value), rel=1e-12)
    assert judged.verdict == explicit.verdict


def test_an_unidentified_chain_is_refused_naming_the_client(problem, tmp_path):
    """A client present in every recorded round never leaves its state: no irreducible chain."""
    always = Markov(np.r_[PI[:-1], 0.999999], np.r_[LAM[:-1], 0.0])
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_2", seeds=1, pattern=always)
    assert load_record(paths[0]).mask[:, N - 1].all()
    with pytest.raises(ValueError, match=f"client {N - 1}") as err:
        check_run(_as_estimated(paths, tmp_path), "cafed.theorem_2")
    assert "\n" not in str(err.value) and "Assumption 1" in str(err.value)


def _changed(paths, tmp_path, change, name="changed"):
    out = []
    for i, path in enumerate(paths):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        change(lines[0])
        out.append(tmp_path / f"{name}_{i}.jsonl")
        out[-1].write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


@pytest.mark.parametrize("theorem, constant", [("cafed.theorem_2", "F_B_star"), ("cafed.theorem_1", "F_B_star"),
                                               ("cafed.theorem_1", "F_star")])
def test_a_minimum_above_the_objective_at_the_averaged_iterate_is_refused(problem, tmp_path, theorem, constant):
    """F_B* = min F_B cannot exceed F_B(w̄_T): stated above it, Thm 2's nonnegative left side came out
    negative and 'held', and Thm 1's was 'violated'."""
    _, paths = _cafed_recorded(problem, tmp_path, theorem, seeds=2)
    check_run(paths, theorem)
    raised = _changed(paths, tmp_path, lambda h: h["constants"].update({constant: 1e3}))
    with pytest.raises(ValueError, match=f"the record's {constant} = 1000.0 is above the objective at the averaged "
                                         "iterate") as err:
        check_run(raised, theorem)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("change, words", [
    (lambda h: h["hparams"].update({"alpha": [1.0]}), f"hparams.alpha has 1 entries but the record has {N} clients"),
    (lambda h: h["constants"].update({"L": 1e300}), r"κ² = \(L/μ\)² overflows a float at L = 1e\+300"),
])
def test_header_values_the_plan_cannot_use_are_one_line(problem, tmp_path, change, words):
    """An α of the wrong length was an IndexError, and κ² beyond a float an OverflowError."""
    _, paths = _cafed_recorded(problem, tmp_path, "cafed.theorem_1", seeds=1)
    with pytest.raises(ValueError, match=words):
        check_run(_changed(paths, tmp_path, change), "cafed.theorem_1")
