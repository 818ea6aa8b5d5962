"""Slurm host lists: ``gpu[1-2],node[01-03,7]`` ⇄ ``["gpu1", "gpu2", "node01", ...]``."""

from __future__ import annotations

import re

from cpsched.slurm_bridge.errors import StateParseError

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in (part.strip() for part in parts) if p]


def _expand_one(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.find("]", open_at)
    if close_at < 0:
        raise StateParseError(f"unbalanced bracket in host list {item!r}")
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    names: list[str] = []
    for chunk in body.split(","):
        match = _RANGE.match(chunk.strip())
        if not match:
            raise StateParseError(f"cannot read range {chunk!r} in host list {item!r}")
        low, high = match.group(1), match.group(2) or match.group(1)
        width = len(low) if low.startswith("0") else 0
        for number in range(int(low), int(high) + 1):
            names.extend(f"{prefix}{number:0{width}d}{tail}" for tail in _expand_one(rest))
    return names


def expand(hostlist: str) -> list[str]:
    """Node names of a Slurm host list, in order; an empty or "(null)" list gives []."""
    text = hostlist.strip()
    if not text or text in {"(null)", "None", "N/A"}:
        return []
    names: list[str] = []
    for item in _split_top_level(text):
        names.extend(_expand_one(item))
    return names


def join(names: list[str]) -> str:
    """A host list Slurm accepts: plain names joined by commas (no compression needed)."""
    return ",".join(names)
