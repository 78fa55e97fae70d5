"""Generated SWE-style tasks: one-token bugs in real functions, captured tests, Harbor's task format,
validation in the sandbox."""
