"""Writing a report's figures, and the conventions every figure shares: one colour per model, in
the models' one order (base, then the arms in the recipe's order), and log axes whose labels never
overlap."""

from __future__ import annotations

import math
import os

from terminalworld.core.records import atomic_output


def save_plot(fig, out: str, name: str) -> str:
    """Write `fig` as `out/name` (PNG, atomically) and close it; returns the path."""
    import matplotlib.pyplot as plt

    path = os.path.join(out, name)
    fig.tight_layout()
    with atomic_output(path) as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path


def model_colors(names: list[str]) -> dict[str, str]:
    """Each model's colour, by its place in the models' order, so a model looks the same in every plot."""
    return {name: f"C{k % 10}" for k, name in enumerate(names)}


# Tick mantissas per decade, coarsest first: a log axis takes the first giving it three labels.
_MANTISSAS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0))


def _number(v: float, _: object = None) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:,.0f}" if v >= 10 else f"{v:g}"


def log_axis(axis, most: int = 6) -> None:
    """Put `axis` (an `ax.xaxis` or `ax.yaxis`, its data already drawn) on a log scale with at most
    `most` labels in plain numbers (600, 2,000, 10k), as finely spaced as it takes to show three;
    minor ticks carry no label (matplotlib's default labels them when one decade is in view, and
    they overlap)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    axis.axes.set_xscale("log") if axis is axis.axes.xaxis else axis.axes.set_yscale("log")
    low, high = sorted(axis.get_view_interval())
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for subs in _MANTISSAS:
        ticks = [m * 10.0**k for k in decades for m in subs if low <= m * 10.0**k <= high]
        if len(ticks) >= 3:
            break
    ticks = ticks or sorted({low, high})  # a range too narrow for any mantissa: label its ends
    axis.set_major_locator(FixedLocator(ticks[:: max(1, math.ceil(len(ticks) / most))]))
    axis.set_major_formatter(FuncFormatter(_number))
    axis.set_minor_formatter(NullFormatter())
