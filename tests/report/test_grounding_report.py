"""The grounding report's numbers on hand-made rows and on the real fixtures: PPL per bucket is the
token-weighted exp of the summed NLL, a served row is counted, not scored, and the router's share
of the execution-free SWE-ZERO rows is all of it."""

import math

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.trajectories import extract_command
from terminalworld.grounding.routing import route
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
