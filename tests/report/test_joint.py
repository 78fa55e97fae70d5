from terminalworld.report.joint import NO_SOLVES, joint_blocks, joint_plot, joint_table
from terminalworld.report.tables import to_markdown


def _cp(name, median, tw=None):
    return {"name": name, "median_ppl": median, "token_weighted_ppl": tw or median * 2}


def _g(p, se, solved, scored):
    return {"pass_at_1": p, "pass_at_1_stderr": se, "solved_trials": solved, "scored_trials": scored}


def test_opposite_directions_by_hand(tmp_path):
    checkpoints = [_cp("base", 9.0), _cp("assistant-1M", 3.0), _cp("full-1M", 2.0), _cp("assistant-10K", 4.0)]
    checkpoints += [_cp("full-10K", 5.0), _cp("user-1M", 1.5)]
    grades = {
        "base": _g(0.02, 0.014, 2, 100),
        "assistant-1M": _g(0.11, 0.03, 33, 300),
        "full-1M": _g(0.06, 0.02, 18, 300),
        "assistant-10K": _g(0.07, 0.026, 7, 100),
        "full-10K": _g(0.05, 0.022, 5, 100),
    }
    joint = joint_table(checkpoints, grades)
    assert [r["name"] for r in joint["rows"]] == ["base", "assistant-1M", "full-1M", "assistant-10K", "full-10K"]
    by_scale = {o["scale"]: o for o in joint["opposite_directions"]}
    # 1M: assistant the better agent, full the better world model: opposite directions.
    assert by_scale["1M"]["better_agent"] == "assistant" and by_scale["1M"]["better_world_model"] == "full"
    assert by_scale["1M"]["opposite"] is True
    # 10K: assistant better at both.
    assert by_scale["10K"]["better_world_model"] == "assistant" and by_scale["10K"]["opposite"] is False
    assert joint["note"] is None
    text = to_markdown(joint_blocks(joint))
    assert "| assistant-1M | 0.110 ± 0.030 | 33 / 300 | — | 3.00 | 6.00 |" in text and "| 1M |" in text
    assert joint_plot(joint, str(tmp_path)).endswith("agent_vs_world_model.png")
    assert (tmp_path / "agent_vs_world_model.png").stat().st_size > 1000


def test_no_solves_is_said_in_plain_words():
    joint = joint_table(
        [_cp("assistant", 3.0), _cp("full", 2.0)], {"assistant": _g(0.0, 0.0, 0, 4), "full": _g(0.0, 0.0, 0, 4)}
    )
    assert joint["note"] == NO_SOLVES and NO_SOLVES in to_markdown(joint_blocks(joint))
    assert joint["opposite_directions"][0]["better_agent"] is None and not joint["opposite_directions"][0]["opposite"]


def test_points_are_named_in_a_legend_whose_names_never_overlap():
    """The demo's own rows: user and full share pass@1 0 and lie 6% apart in PPL, where labels
    beside the points ran together ("userfull"); the legend names each model once, in its colour."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from terminalworld.report.figures import model_colors
    from terminalworld.report.joint import joint_figure

    names = ["base", "assistant", "full", "user"]
    medians = [938.3, 1768.4, 650.4, 612.5]
    joint = joint_table(
        [_cp(n, m) for n, m in zip(names, medians, strict=True)], {n: _g(0.0, 0.0, 0, 4) for n in names}
    )
    fig = joint_figure(joint)
    (ax,) = fig.axes
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == names
    colors = model_colors(names)
    handles, labels = ax.get_legend_handles_labels()  # the errorbar each legend entry draws
    assert labels == names
    assert [to_hex(h.lines[0].get_color()) for h in handles] == [to_hex(colors[n]) for n in names]
    assert not ax.texts  # no label drawn beside a point
    boxes = [t.get_window_extent(renderer) for t in legend.get_texts()]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]
    # Outside the axes: the legend hides no point.
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    plt.close(fig)
    assert joint_figure({"rows": [], "opposite_directions": [], "note": None}) is None


def test_the_opposite_directions_table_carries_a_paired_test_per_task():
    # 24 tasks, one attempt each: assistant solves 8, full solves 2 of them and nothing else.
    tasks = [f"t{i:02d}" for i in range(24)]
    a = {t: [1, int(i < 8)] for i, t in enumerate(tasks)}
    b = {t: [1, int(i < 2)] for i, t in enumerate(tasks)}
    grades = {"assistant-1M": _g(8 / 24, 0.1, 8, 24) | {"per_task": a}, "full-1M": _g(2 / 24, 0.06, 2, 24)}
    grades["full-1M"]["per_task"] = b
    joint = joint_table([_cp("assistant-1M", 3.0), _cp("full-1M", 2.0)], grades)
    [o] = joint["opposite_directions"]
    assert (o["paired"]["a_higher"], o["paired"]["b_higher"], o["paired"]["ties"]) == (6, 0, 18)
    assert o["paired"]["sign_p"] == 2 / 64 and o["paired"]["permutation_p"] == 2 / 64 and o["opposite"]
    assert joint["rows"][0]["pass_at_k_ci95"]["1"]["value"] == 8 / 24
    assert "0.0312, 0.0312 (24 tasks)" in to_markdown(joint_blocks(joint))
