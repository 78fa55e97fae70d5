"""terminalworld: world models of the Linux terminal."""
