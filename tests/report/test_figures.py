"""Figures read at a glance: log axes whose tick labels never overlap, one colour per model."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from terminalworld.report.figures import log_axis, model_colors


def _labels(ax, axis):
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    ticks = axis.get_majorticklabels() + axis.get_minorticklabels()
    low, high = sorted(axis.get_view_interval())
    shown = [
        t
        for t in ticks
        if t.get_visible() and t.get_text() and low <= (t.get_position()[0 if axis is ax.xaxis else 1]) <= high
    ]
    return [(t.get_text(), t.get_window_extent(renderer)) for t in shown]


def _overlaps(labels):
    return [(a, b) for i, (a, ea) in enumerate(labels) for b, eb in labels[i + 1 :] if ea.overlaps(eb)]


# The ranges of the committed plots (the demo's per-trajectory PPL, the renderer's turns), a wide one,
# and one too narrow for any mantissa (a checkpoint set whose PPLs lie within a few percent).
RANGES = [(97, 7_300), (150, 8_000), (5, 80), (540, 1_500), (1, 2e6), (0.02, 3), (1.02, 1.08)]


@pytest.mark.parametrize("low,high", RANGES)
def test_log_axis_labels_never_overlap(low, high):
    for which in ("x", "y"):
        fig, ax = plt.subplots(figsize=(5, 5))
        ax.scatter([low, high], [low, high])
        ax.set(xlim=(low, high), ylim=(low, high))
        axis = ax.xaxis if which == "x" else ax.yaxis
        log_axis(axis)
        labels = _labels(ax, axis)
        plt.close(fig)
        assert len(labels) >= 2, labels  # the axis is still read: at least two numbers on it
        assert not _overlaps(labels), [(a, b) for a, b in _overlaps(labels)]
        assert all("$" not in text for text, _ in labels)  # plain numbers, not 2×10^3
        assert len(labels) <= 6


def test_matplotlibs_default_log_labels_do_overlap_on_the_demos_range():
    """The case `log_axis` exists for: the default labels minor ticks over a short range."""
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter([150, 8_000], [150, 8_000])
    ax.set_xscale("log")
    ax.set_xlim(150, 8_000)
    overlapping = _overlaps(_labels(ax, ax.xaxis))
    plt.close(fig)
    assert overlapping


def test_a_model_keeps_its_colour_across_plots():
    order = ["base", "assistant", "full", "user"]
    colors = model_colors(order)
    assert list(colors) == order and len(set(colors.values())) == 4
    assert model_colors(order[:2]) == {k: colors[k] for k in order[:2]}
