"""The fenced blocks of a Markdown page, each with the reason a reader does not run it
(``<!-- not run: REASON -->`` on the line above it, unseen in the rendered page): what the
tests that run the docs' examples read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    line: int  # of the opening fence, counted from 1
    language: str  # lower case; empty for an untagged block
    text: str  # the lines between the fences, each ending in a newline
    not_run: str | None


def fenced_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = NOT_RUN.match(previous)
        found.append(
            Block(
                line=index + 1,
                language=match.group(1).lower(),
                text="\n".join(lines[index + 1 : end]) + "\n",
                not_run=marker.group(1) if marker else None,
            )
        )
        index = end + 1
    return found
