"""A command's output as an agent sees it: head and tail around a truncation note, counted exactly."""

from __future__ import annotations

import codecs


class Output:
    """Incremental UTF-8 decoding that keeps what the truncation shows: the first head+tail
    characters, the last `tail` ones, and the exact number of characters."""

    def __init__(self, head: int, tail: int):
        self.head, self.tail, self.first, self.last, self.total = head, tail, "", "", 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        """Take the next bytes of output (`final`: the last, flushing a split character)."""
        text = self._decoder.decode(data, final)
        self.total += len(text)
        self.first += text[: max(0, self.head + self.tail - len(self.first))]
        self.last = (self.last + text)[-self.tail :] if self.tail else ""

    def render(self) -> tuple[str, int]:
        """The output as the agent sees it, and how many characters were elided."""
        self.feed(b"", final=True)
        if self.total <= self.head + self.tail:
            return self.first, 0
        elided = self.total - self.head - self.tail  # SWE-ZERO's layout, to the character
        return f"{self.first[: self.head]}\n\n... (output truncated, {elided} chars elided) ...\n\n{self.last}", elided
