"""Grounding: the repository's state in the simulator's context.

Where a session's repository comes from (`state`, `snapshots`), which commands are served exactly
and which are learned (`routing`), what content a command is about (`retrieval`), and the modes
that put them together (`modes`). It sits below the stages that use it (the agent's simulated
environment, rendering, scoring and the simulator grade) and above the sandbox and code trees.
"""
