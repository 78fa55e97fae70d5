"""The project's expected failures: one base class, one subclass per kind of problem.

Every error a user can cause (a bad input, too few trajectories, a missing sandbox, a failed step)
derives from `TerminalworldError`; the CLI and the experiment entry points print such an error in
one line and exit with status 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class TerminalworldError(Exception):
    """An expected failure, reported to the user in one line."""


class InputError(TerminalworldError):
    """A problem with the inputs as a whole (no files, too few records, a bad flag value)."""


class TrajectoryError(TerminalworldError):
    """A record that cannot be a trajectory (or a held-out row); names the record and the defect."""

    def __init__(self, record: str, problem: str):
        super().__init__(f"{record}: {problem}")
        self.record = record
        self.problem = problem


class RenderError(TerminalworldError):
    """An example that cannot be rendered exactly; names the example and the cause."""


class PackingError(TerminalworldError):
    """Rows that cannot be packed for Levanter as asked (a row longer than the sequence)."""


class ResultsError(TerminalworldError):
    """Scorer outputs that cannot be compared (unfinished run, duplicate names, unknown base)."""


class SandboxUnavailable(TerminalworldError):
    """The sandbox cannot run on this host (no bwrap, user namespaces disabled)."""


class VerifierError(TerminalworldError):
    """A verifier's output that is not a reward: not a regular file, too large, not one number, or
    outside [0, 1]. An infrastructure error, never a score."""


class StepFailed(TerminalworldError):
    """A pipeline step failed; names the step and the log holding its traceback."""
