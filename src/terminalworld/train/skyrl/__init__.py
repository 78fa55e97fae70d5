"""ECHO on SkyRL: the half that needs no SkyRL and is tested here (`bridge`), and the extension
that loads only inside SkyRL's own environment (`plugin`)."""
