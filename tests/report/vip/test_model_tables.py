"""vip_table3: our parameter counts beside ViP Table 3's, plus the run's extra sizes."""

import pytest

from dpvip.report.vip.model_tables import vip_table3
from dpvip.report.common.paper_values import load_paper_values


def test_rows_follow_the_paper_then_the_extra_models(root):
    table = vip_table3(load_paper_values(root / "config" / "paper_values"), {"micro": (32, 4), "base": (224, 16)})
    assert list(table["model"]) == ["nano", "tiny", "small", "base", "large", "micro"]
    paper = table.set_index("model")
    for name in ("nano", "tiny", "small", "base"):
        assert abs(paper.loc[name, "difference (%)"]) < 1
    assert paper.loc["base", "parameters (M)"] == pytest.approx(99.05, abs=0.01)
    assert paper.loc["large", "paper parameters (M)"] == 233.3
    assert paper.loc["micro", "input"] == "32 px / patch 4"
    assert (
        paper.loc["micro", "paper parameters (M)"] != paper.loc["micro", "paper parameters (M)"]
    )  # NaN: no paper value


def test_a_decoder_variant_is_counted_with_its_depth(root):
    table = vip_table3(load_paper_values(root / "config" / "paper_values"), {"base_dec8": (224, 16)}).set_index("model")
    assert table.loc["base_dec8", "decoder depth"] == 8
    # four more decoder blocks of width 512: 4 x 3.15M
    assert table.loc["base_dec8", "parameters (M)"] - table.loc["base", "parameters (M)"] == pytest.approx(
        12.61, abs=0.01
    )
