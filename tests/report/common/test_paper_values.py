"""Every number printed in the papers' tables, transcribed once: counted per table."""

import pytest

from dpvip.errors import DpvipInputError
from dpvip.report.common.paper_values import load_paper_values, paper_table

# Rows per table, from each table's shape (rows x columns, minus blank cells, plus
# separate "std" entries for "mean ± std" cells). See the transcription notes in git log.
EXPECTED = {
    "vip": {
        "table1": 35,
        "table2": 45,
        "table3": 25,
        "table4": 14,
        "table5": 17,
        "table6": 16,
        "table7": 27,
        "table8": 4,
        "table9": 30,
        "table10": 53,
        "table11": 18,
    },
    "dprandp": {
        "table1": 30,
        "table2": 14,
        "table3": 18,
        "table4": 17,
        "table5": 6,
        "table6": 13,
        "table7": 18,
        "table8": 2,
        "table9": 3,
        "table10": 6,
        "table11": 35,
        "table12": 24,
        "table13": 30,
        "table14": 20,
        "table15": 15,
        "table16": 14,
        "table17": 9,
        "table18": 10,
        "table19": 10,
        "table20": 11,
        "table21": 12,
        "table22": 18,
        "table23": 8,
        "table24": 18,
        "table25": 20,
    },
    "mehta": {
        "figure1b": 2,  # the text's 81.7% for epsilon in [4, 10] (Abstract, App. B): its ends
        "table1": 24,
        "table2": 36,
        "table3": 24,
        "table4": 16,
        "table5": 18,
        "table6": 24,
        "table7": 8,
        "table8": 15,
        "table9": 3,
        "table10": 15,
        "table11": 2,
    },
}


@pytest.fixture(scope="module")
def values(root):
    return load_paper_values(root / "config/paper_values")


def test_rows_per_table(values):
    counted = values.groupby(["paper", "table"]).size()
    found = {paper: {t: int(counted[paper][t]) for t in counted[paper].index} for paper in EXPECTED}
    assert found == EXPECTED


def test_spot_values(values):
    vip1 = paper_table(values, "vip", "table1")
    assert vip1.loc["ViP-LAION", "ImageNet-1K"] == 55.7
    dprandp13 = values[(values.paper == "dprandp") & (values.table == "table13")]
    assert set(dprandp13.value[dprandp13.row.str.contains("σ|sigma", case=False)]) == {9.3, 5.6, 4.7, 3.8, 2.9, 2.6}


def test_bad_value_is_named(tmp_path):
    (tmp_path / "x.csv").write_text("paper,table,row,column,value,unit\nx,table1,r,c,12%,%\n")
    with pytest.raises(DpvipInputError, match="'12%'"):
        load_paper_values(tmp_path)


def test_duplicate_is_named(tmp_path):
    (tmp_path / "x.csv").write_text("paper,table,row,column,value,unit\nx,t,r,c,1,%\nx,t,r,c,2,%\n")
    with pytest.raises(DpvipInputError, match="more than once"):
        load_paper_values(tmp_path)
