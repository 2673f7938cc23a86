"""Mehta et al.'s Figures 1b and 2 on fake study results: every series drawn, Figure 1b's line of
the paper's own values, and legends that name our stand-ins and the chance level."""

from __future__ import annotations

import matplotlib
import pytest
from transfer_studies import EMBEDDED, VALUES, fake

from dpvip.report.mehta import figures as mehta_figures

matplotlib.use("Agg")


@pytest.mark.parametrize("figure", ["figure1b", "figure2"])
def test_figures_draw_every_series(figure):
    drawn = mehta_figures.draw(figure, fake(f"mehta_{figure}"), EMBEDDED, "embedded", VALUES)
    lines = sum(len(axis.lines) + len(axis.containers) for axis in drawn.axes)
    assert lines >= (3 if figure == "figure1b" else 4)


def test_figure1b_draws_the_papers_line_and_names_our_stand_in():
    drawn = mehta_figures.draw("figure1b", fake("mehta_figure1b"), EMBEDDED, "embedded", VALUES)
    axis = drawn.axes[0]
    paper = [line for line in axis.lines if line.get_label().startswith("paper: ")]
    assert len(paper) == 1
    assert list(paper[0].get_xdata()) == [4.0, 10.0] and list(paper[0].get_ydata()) == [81.7, 81.7]
    assert paper[0].get_label() == "paper: ViT-H/14-4B on ImageNet, delta 1e-06 (printed for epsilon 4-10 only)"
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert "ours: syn_vip_micro on photos (embedded), delta 1e-06" in labels
    assert "ours: syn_vip_micro on photos (embedded), without privacy" in labels
    chance = [line for line in axis.lines if line.get_label().startswith("chance: ")]
    assert [(line.get_label(), list(line.get_ydata())) for line in chance] == [
        ("chance: photo crops (11 scikit-image photographs) (standing in for ImageNet-1k)", [100 / 11, 100 / 11])
    ]


def test_figure2_legends_name_our_stand_in():
    drawn = mehta_figures.draw("figure2", fake("mehta_figure2"), EMBEDDED, "embedded", VALUES)
    labels = [text.get_text() for axis in drawn.axes for text in axis.get_legend().get_texts()]
    assert "ours: syn_vip_micro on photos (embedded), LAMB" in labels
    assert labels.count("ours: syn_vip_micro on photos (embedded), with privacy") == 2
    assert labels.count("chance: photo crops (11 scikit-image photographs) (standing in for ImageNet-1k)") == 3
