import pandas as pd

from dpvip.report.common.tables import write_table


def test_three_formats_with_title_and_notes(tmp_path):
    frame = pd.DataFrame({"claim": ["a_b"], "epsilon": [7.123456789]})
    write_table(frame, tmp_path / "x.csv", "Title", ["stand-in: digits for ImageNet"])
    assert pd.read_csv(tmp_path / "x.csv")["epsilon"][0] == 7.123456789  # full precision
    markdown = (tmp_path / "x.md").read_text()
    assert markdown.startswith("# Title") and "stand-in: digits" in markdown and "7.123" in markdown
    latex = (tmp_path / "x.tex").read_text()
    assert "a\\_b" in latex and "stand-in" in latex


def test_readable_forms_keep_counts_whole_and_leave_missing_cells_empty(tmp_path):
    import math

    import pandas as pd

    from dpvip.report.common.tables import write_table

    frame = pd.DataFrame({"model": ["a", "b"], "Batch Size": [98304.0, math.nan], "sigma": [0.4801234, 2.5]})
    write_table(frame, tmp_path / "t.csv", "title", [])
    markdown = (tmp_path / "t.md").read_text()
    assert "98304" in markdown and "98300" not in markdown and "0.4801" in markdown and "nan" not in markdown
    assert pd.read_csv(tmp_path / "t.csv")["Batch Size"].isna().tolist() == [False, True]  # the data keep NaN
