import pandas as pd

from dpvip.report.tables import write_table


def test_three_formats_with_title_and_notes(tmp_path):
    frame = pd.DataFrame({"claim": ["a_b"], "epsilon": [7.123456789]})
    write_table(frame, tmp_path / "x.csv", "Title", ["stand-in: digits for ImageNet"])
    assert pd.read_csv(tmp_path / "x.csv")["epsilon"][0] == 7.123456789  # full precision
    markdown = (tmp_path / "x.md").read_text()
    assert markdown.startswith("# Title") and "stand-in: digits" in markdown and "7.123" in markdown
    latex = (tmp_path / "x.tex").read_text()
    assert "a\\_b" in latex and "stand-in" in latex
