"""The same situation gets the same mark: records at step sizes other than Thm 4.1's are marked †
when judged against fedsum.corollary_4_1 (Thm 4.1's step sizes for each realised trace) as they
are against fedsum.theorem_4_1."""
import pytest

from verify import check_run
from verify.cli import main


@pytest.mark.slow
def test_records_at_other_step_sizes_are_marked_under_theorem_4_1_and_corollary_4_1(tmp_path, capsys):
    records = tmp_path / "rec"
    assert main(["check", "--clients", "4", "-T", "12", "-K", "1", "--seeds", "2", "--patterns", "P1", "--algorithms",
                 "fedsum-b", "--eta-l", "0.01", "--eta-g", "1", "--record", str(records), "--no-progress", "--no-worst-case",
                 "-o", str(tmp_path / "out")]) == 0
    paths = sorted(str(p) for p in records.glob("*.jsonl"))
    for theorem in ("fedsum.theorem_4_1", "fedsum.corollary_4_1"):
        result = check_run(paths, theorem)
        assert result.steps_outside and "†" in str(result).split(":")[0], theorem
