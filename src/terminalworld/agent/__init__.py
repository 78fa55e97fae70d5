"""The agent grade: SWE-ZERO's harness, Harbor's environment and agent over the sandbox, agent-eval,
its summaries, and the Marin steps that grade checkpoints locally and in production."""
