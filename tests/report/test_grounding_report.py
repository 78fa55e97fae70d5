"""The grounding report's numbers on hand-made rows and on the real fixtures: PPL per bucket is the
token-weighted exp of the summed NLL, a served row is counted, not scored, and the router's share
of the execution-free SWE-ZERO rows is all of it; the plot draws what was scored and marks what
was served where it shows; the per-family table reads the summaries."""

import math

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.routing import route
from terminalworld.core.trajectories import extract_command
from terminalworld.report.grounding import fidelity_by_family, ppl_by_bucket, ppl_table, route_share


def test_ppl_by_bucket_by_hand():
    rows = {
        "none": [
            {"n_target_tokens": 10, "sum_nll": 10.0, "ppl": math.e},
            {"n_target_tokens": 300, "sum_nll": 600.0, "ppl": math.e**2},
            {"n_target_tokens": 100, "sum_nll": 0.0, "ppl": 1.0},
        ],
        "hybrid": [
            {"n_target_tokens": 10, "route": "exact"},
            {"n_target_tokens": 300, "route": "exact"},
            {"n_target_tokens": 100, "sum_nll": 0.0, "ppl": 1.0, "route": "generated"},
        ],
    }
    t = ppl_by_bucket(rows)
    assert t["none"]["<=20"]["ppl"] == pytest.approx(math.e) and t["none"][">200"]["ppl"] == pytest.approx(math.e**2)
    assert t["none"]["all"]["ppl"] == pytest.approx(math.exp(610 / 410))
    assert t["hybrid"][">200"] == {"rows": 1, "scored": 0, "ppl": None, "served_rows": 1, "served_token_share": 1.0}
    assert t["hybrid"]["all"]["served_token_share"] == pytest.approx(310 / 410) and t["hybrid"]["all"]["ppl"] == 1.0
    assert "1 served exactly" in ppl_table(t).splitlines()[-1]
    f = fidelity_by_family({"none": [{"family": "cat", "exact_match": True, "similarity": 1.0}]})
    assert f["none"]["cat"]["exact_match"] == 1.0


def test_route_share_on_real_rows(fixtures):
    count = len  # characters: any count works, the share is over the same unit
    swe_zero = route_share(load_trajectories(str(fixtures / "adp_swe-zero-12m" / "sample_raw.json")), count)
    assert swe_zero["observations"] == 45 and swe_zero["exact_token_share"] == 1.0
    trajs = load_trajectories(str(fixtures / "mini-swe-agent_b6984ac5" / "github_issue.traj.json"))
    s = route_share(trajs, count)
    observed = [t for traj in trajs for t in traj.turns if t.observation is not None]
    exact = sum(len(t.observation) for t in observed if route(extract_command(t.action) or "") == "exact")
    assert s["exact_tokens"] == exact and 0 < s["exact_token_share"] < 1
    assert s["by_family"]["execution"] == sum(len(t.observation) for t in observed) - exact


def _cell(ppl, scored, served=0):
    return {"rows": scored + served, "scored": scored, "ppl": ppl, "served_rows": served, "served_token_share": None}


def test_the_plot_draws_what_was_scored_and_marks_what_was_served(tmp_path, monkeypatch):
    """One panel per row set; no bar for a cell with nothing scored (a zero bar on a log axis is
    off the plot); "served" marks in axes-fraction height, inside the panel; the project's log axis."""
    from matplotlib.ticker import FuncFormatter

    import terminalworld.report.grounding as grounding

    figures = []
    monkeypatch.setattr(grounding, "save_plot", lambda fig, out, name: figures.append(fig) or name)
    probes = {
        "none": {"<=20": _cell(4.7, 2), "21-200": _cell(9.0, 15), ">200": _cell(4.1, 3)},
        "hybrid": {"<=20": _cell(None, 0, 2), "21-200": _cell(5.5, 4, 11), ">200": _cell(None, 0, 3)},
    }
    heldout = {
        "none": {"<=20": _cell(None, 0), "21-200": _cell(6.3, 5), ">200": _cell(5.7, 18)},
        "hybrid": {"<=20": _cell(None, 0), "21-200": _cell(None, 0, 5), ">200": _cell(None, 0, 18)},
    }
    grounding.ppl_plot({"probes": probes, "held-out": heldout}, str(tmp_path), "p.png", "t")
    [fig] = figures
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["probes", "held-out"]
    assert [len(ax.patches) for ax in axes] == [4, 2]  # the cells with a PPL, and no others
    assert all(p.get_height() > 0 for ax in axes for p in ax.patches)
    for ax, n in zip(axes, [2, 2], strict=True):
        marks = [t for t in ax.texts if t.get_text() == "served"]
        assert len(marks) == n
        low, high = ax.get_xlim()
        for t in marks:
            x, y = t.get_position()
            assert t.get_transform() == ax.get_xaxis_transform() and 0 < y < 0.5 and low < x < high
        assert ax.get_yscale() == "log" and isinstance(ax.yaxis.get_major_formatter(), FuncFormatter)
        assert ax.get_ylim()[0] == 1  # PPL 1 is the floor


def test_ppl_by_family_from_the_summaries():
    """The per-family table reads the scores files' summaries: PPL and rows scored per family, and
    in hybrid mode the rows served exactly, which have no PPL."""
    from terminalworld.report.grounding import family_table, ppl_by_family

    none = {"by_family": {"cat": {"n": 3, "tokens": 900, "ppl": 6.2}, "python": {"n": 1, "tokens": 9, "ppl": 5.5}}}
    hybrid = {"by_family": {"python": {"n": 1, "tokens": 9, "ppl": 5.5}}, "served_by_family": {"cat": 3}}
    t = ppl_by_family({"none": none, "retrieved": None, "hybrid": hybrid})
    assert list(t) == ["none", "hybrid"]
    assert t["hybrid"]["cat"] == {"n": 0, "ppl": None, "served": 3} and t["none"]["cat"]["ppl"] == 6.2
    lines = family_table(t).splitlines()
    assert lines[2] == "| cat | 6.20 (3) | –; 3 served exactly |" and lines[3] == "| python | 5.50 (1) | 5.50 (1) |"
