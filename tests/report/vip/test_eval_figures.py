"""ViP Figures 1 and 5 read right: the paper's values and ours (on stand-in data) never share an
axis, every paper bar says it is the paper's, our axes name the data actually used and its
chance level, legends cover nothing, and tick labels do not run into each other."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from dpvip.report.common.paper_values import load_paper_values  # noqa: E402
from dpvip.report.vip.eval_figures import figure1, figure5  # noqa: E402

VALUES = load_paper_values(Path(__file__).resolve().parents[3] / "config" / "paper_values")
DIGITS = {"stand_in": "scikit-learn digits", "train": 1437, "test": 360}
SHAPES = {"stand_in": "generated shapes (3 categories)", "train": 256, "test": 64}


def result(task: str, backbone: str, columns: dict, data: dict, dataset: str | None = None) -> dict:
    return {"evaluation": {"task": task, "backbone": backbone, "dataset": dataset}, "columns": columns, "data": data}


RESULTS = [
    result("linear_probe", "vip_micro", {"ImageNet-1K": 95.0}, DIGITS, "ImageNet-1K"),
    result("coco", "vip_micro", {"COCO AP box": 28.0, "COCO AP mask": 22.0}, SHAPES)
    | {"trivial": {"columns": {"COCO AP box": 0.5, "COCO AP mask": 0.25}, "rule": "every box the whole image"}},
    result("few_shot", "vip_micro", {"CIFAR-100 10-shot": 22.0}, DIGITS, "CIFAR-100"),
]
LINES = {
    "(Syn)-ViP init": {0.12: {"ImageNet-1K": 94.4, "CIFAR-100 10-shot": 25.0}, 0.56: {"ImageNet-1K": 94.2}},
    "random init": {0.12: {"ImageNet-1K": 90.2}, 0.56: {"ImageNet-1K": 93.1, "CIFAR-100 10-shot": 32.0}},
}
PAPER_SIZES = {"ImageNet-1K": {62.0: 49.6, 99.0: 55.7, 233.0: 58.0}}


def labels(axis) -> list[str]:
    handles, names = axis.get_legend_handles_labels()
    return names


def axis_text(axis) -> str:
    ticks = " ".join(t.get_text() for t in axis.get_xticklabels())
    return f"{axis.get_title()} | {axis.get_ylabel()} | {ticks}"


def drawn(figure):
    figure.canvas.draw()
    return figure.canvas.get_renderer()


@pytest.fixture(scope="module")
def fig1():
    figure = figure1(VALUES, RESULTS, "vip_micro", "vip_micro", "embedded")
    yield figure
    matplotlib.pyplot.close(figure)


@pytest.fixture(scope="module")
def fig5():
    figure = figure5(LINES, ["ImageNet-1K", "CIFAR-100 10-shot"], RESULTS, PAPER_SIZES, "embedded")
    yield figure
    matplotlib.pyplot.close(figure)


def test_figure1_keeps_the_papers_bars_and_ours_on_separate_axes(fig1):
    for axis in fig1.axes:
        bars = [name for name in labels(axis) if not name.startswith("chance")]
        papers = [name for name in bars if "(paper" in name]
        assert papers == bars or not papers, f"{axis.get_title()} mixes the paper's bars with ours: {bars}"
        assert all("(paper" in name or "(ours" in name for name in bars), bars  # every bar says whose
    assert sum("(paper" in name for axis in fig1.axes for name in labels(axis)) == 7  # 4 probe + 3 COCO


def test_figure1_our_axes_name_the_stand_in_and_carry_its_chance_line(fig1):
    ours = [axis for axis in fig1.axes if any("(ours" in name for name in labels(axis))]
    assert len(ours) == 2
    probe, coco = ours
    assert "scikit-learn digits (standing in for ImageNet-1K)" in axis_text(probe).replace("\n", " ")
    assert "generated shapes" in coco.get_ylabel().replace("\n", " ")
    assert [line.get_ydata()[0] for line in probe.lines if line.get_label().startswith("chance")] == [10.0]
    heights = sorted(round(bar.get_height(), 6) for bar in coco.patches)
    assert heights == [0.25, 0.5, 22.0, 28.0]  # AP in points, as the paper prints it, the trivial detector's beside
    assert any(name.startswith("trivial predictor (ours") for name in labels(coco))


def test_figure5_axes_name_the_data_used_and_its_chance(fig5):
    ours = [axis for axis in fig5.axes if any("(ours" in name for name in labels(axis))]
    assert len(ours) == 2
    imagenet, cifar = (axis.get_ylabel().replace("\n", " ").replace("- ", "-") for axis in ours)
    assert "scikit-learn digits (standing in for ImageNet-1K)" in imagenet
    assert "scikit-learn digits (standing in for CIFAR-100)" in cifar
    for axis in ours:
        assert [line.get_ydata()[0] for line in axis.lines if line.get_label().startswith("chance")] == [10.0]
    paper = [axis for axis in fig5.axes if "Paper" in axis.get_title()]
    assert len(paper) == 1 and not any("(ours" in name for name in labels(paper[0]))


@pytest.mark.parametrize("name", ["fig1", "fig5"])
def test_legends_cover_no_axes_and_tick_labels_do_not_collide(name, request):
    figure = request.getfixturevalue(name)
    renderer = drawn(figure)
    plotted = [axis for axis in figure.axes if axis.axison]
    for axis in plotted:
        legend = axis.get_legend()
        assert legend is not None
        box = legend.get_window_extent(renderer)
        for other in plotted:
            assert not box.overlaps(other.get_window_extent(renderer)), f"a legend covers {other.get_title()}"
        assert not colliding_ticks(axis, renderer), f"tick labels collide on {axis.get_title()}"


def colliding_ticks(axis, renderer) -> list[tuple[str, str]]:
    shown = [
        t for t in [*axis.get_xticklabels(), *axis.get_xticklabels(minor=True)] if t.get_visible() and t.get_text()
    ]
    return [
        (a.get_text(), b.get_text())
        for a, b in itertools.combinations(shown, 2)
        if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer))
    ]


def test_the_collision_check_sees_colliding_labels():
    figure, axis = matplotlib.pyplot.subplots(figsize=(2, 2))
    axis.set_xticks([0, 0.05, 1], ["a long tick label", "another long one", "far"])
    assert colliding_ticks(axis, drawn(figure)) == [("a long tick label", "another long one")]
    matplotlib.pyplot.close(figure)


def test_figure5_ticks_are_the_drawn_model_sizes_alone(fig5):
    ours = [axis for axis in fig5.axes if any("(ours" in name for name in labels(axis))]
    drawn(fig5)
    for axis in ours:
        assert [t.get_text() for t in axis.get_xticklabels()] == ["0.12M", "0.56M"]
        assert [t.get_text() for t in axis.get_xticklabels(minor=True) if t.get_text()] == []
