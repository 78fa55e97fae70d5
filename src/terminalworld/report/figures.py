"""Writing a report's figures."""

from __future__ import annotations

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
