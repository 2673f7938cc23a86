"""A transfer study's cells on fake study results: the best learning rate's mean over seeds,
chosen on validation accuracy (or on test, the papers' practice), and a result that cannot say
what chose its cells refused."""

from __future__ import annotations

import matplotlib
import pytest
from transfer_studies import CELL, fake, validation_favours_small_rates

from dpvip.errors import DpvipInputError
from dpvip.report.common.transfer_cells import study_cells

matplotlib.use("Agg")


def test_cells_take_the_best_learning_rate_and_average_its_seeds():
    cells = study_cells(fake("mehta_table1"))
    cell = cells[("ViT-B/16 / Last layer", "With privacy / batch=2^20")]
    assert cell.lr == 1.6  # 40 + 16 + seed beats 40 + 4 + seed
    assert cell.mean == pytest.approx(57.5) and cell.std == pytest.approx((5 / 3) ** 0.5)  # seeds 0-3
    assert cell.seeds == 4


def test_cells_choose_on_validation_accuracy_not_on_test_accuracy():
    results = fake("mehta_table1", validation=validation_favours_small_rates)
    assert results["selection"]["mode"] == "validation"
    cell = study_cells(results)[CELL]
    assert cell.lr == 0.1 and cell.selection == "validation"  # 1.6 is the best on test
    assert cell.mean == pytest.approx(42.5)  # the chosen rate's test accuracy: 40 + 1 + seeds 0-3
    assert cell.validation == pytest.approx(60.5)  # 60 - 1 + seeds 0-3


def test_a_result_whose_runs_held_out_a_share_but_record_no_selection_is_refused():
    results = fake("mehta_table1")
    del results["selection"]
    with pytest.raises(DpvipInputError, match="records no selection"):
        study_cells(results)
    results = fake("mehta_table1")
    del results["runs"][0]["result"]["validation_accuracy"]
    with pytest.raises(DpvipInputError, match="recorded none"):
        study_cells(results)
