"""The delay study's table says what its limits are: two one-sided 95% limits, a 90% interval."""
from verify.studies.delay_study import table


def test_the_delay_table_labels_its_limits_as_a_90_percent_interval():
    row = {"regime": "theorem", "pattern": "P1", "group": "same rate", "rate": 0.2, "tau_max": 3, "tau_avg": 1.5,
           "eta_l": 0.01, "eta_g": 1.0, "measured": 1.0, "lower": 0.9, "upper": 1.1, "bound": 10.0,
           "tau_avg_term": 1.0, "tau_max_term": 9.0, "ratio": 0.1, "label": "holds", "loss": 0.5}
    header = next(line for line in table([row]).splitlines() if line.startswith("| pattern"))
    assert "measured [one-sided 95% limits: a 90% interval]" in header
