"""ECHO's on-policy miniature: the loss (`loss`), one optimizer update (`update`), rollouts through
the agent harness in the sandbox (`rollouts`) and one arm's run (`miniature`)."""
