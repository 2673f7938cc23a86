"""DP-RandP's private linear probing Tables 4, 5, 22 and 23 on fake study results: ours beside
the paper's per epsilon, and the epsilon of the paper's own sigmas."""

from __future__ import annotations

import matplotlib
import pytest
from transfer_studies import EMBEDDED, VALUES, fake

from dpvip.report.common.tables import write_table
from dpvip.report.dprandp.probe_tables import probe_table

matplotlib.use("Agg")


@pytest.mark.parametrize("table", ["table4", "table5", "table22", "table23"])
def test_probe_tables_put_ours_beside_the_paper_per_epsilon(table, tmp_path):
    study = "dprandp_probe_cifar" if table in ("table4", "table22") else "dprandp_probe_imagenet"
    frame, title, notes = probe_table(table, fake(study), VALUES, EMBEDDED, "embedded")
    assert len(frame) >= 2
    if table == "table4":
        row = frame[frame["epsilon"] == 0.1].iloc[0]
        assert row["accuracy (paper)"] == 57.10 and row["std (paper)"] == 0.42
        assert row["accuracy (ours)"] == pytest.approx(40 + 8 + 1.0)  # the mean of seeds 0, 1, 2 (+0, +1, +2)
        assert frame["epsilon"].iloc[-1] == "inf (without privacy)"
    if table == "table22":
        assert frame.set_index("epsilon").loc[1.0, "sigma (paper)"] == 38
    if table == "table23":
        by_epsilon = frame.set_index("epsilon")
        assert by_epsilon.loc[1.0, "σ_1 (paper)"] == 71
        assert 0.5 < by_epsilon.loc[1.0, "epsilon of the paper's sigmas"] < 1.5
        assert 5 < by_epsilon.loc[8.0, "epsilon of the paper's sigmas"] < 11
    write_table(frame, tmp_path / f"dprandp_{table}.csv", title, notes)
