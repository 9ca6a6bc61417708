"""Reading Hadoop ``<configuration>`` files: properties by name, typed, errors naming both.

Shared by :mod:`.config` (queues, global settings) and :mod:`.labels` (node-label and
absolute-resource settings), so every UsageError names the file and the property.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pipeline.errors import UsageError


def read_properties(path: Path) -> dict[str, str]:
    """``name -> value`` of a Hadoop ``<configuration>`` file (UsageError if unreadable)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise UsageError(f"{path}: cannot read Hadoop configuration ({exc})") from None
    props = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is None:
            raise UsageError(f"{path}: a <property> has no <name>")
        # Hadoop trims values, but a value of one space is meaningful for
        # accessible-node-labels ("only nodes without labels"): keep blank as "".
        props[name.strip()] = (value or "").strip()
    return props


class Reader:
    """Typed access to properties with errors naming the file and property."""

    def __init__(self, props: dict[str, str], source: str) -> None:
        self.props, self.source = props, source

    def fail(self, name: str, why: str) -> UsageError:
        return UsageError(f"{self.source}: property '{name}': {why}")

    def number(self, name: str, default: float, low: float | None = None,
               high: float | None = None) -> float:
        if name not in self.props:
            return default
        try:
            value = float(self.props[name])
        except ValueError:
            raise self.fail(name, f"{self.props[name]!r} is not a number") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail(name, f"{value:g} is outside [{low}, {high}]")
        return value

    def integer(self, name: str, default: int, low: int | None = None) -> int:
        """A whole number, as Hadoop's ``Configuration.getInt`` reads it (40.7 is refused,
        as ``--set`` refuses it, not cut to 40)."""
        value = self.number(name, default, low)
        if not float(value).is_integer():
            raise self.fail(name, f"{self.props[name]!r} is not a whole number")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        text = self.props.get(name, str(default)).lower()
        if text not in ("true", "false"):
            raise self.fail(name, f"{text!r} is not true or false")
        return text == "true"

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.props.get(name, default)
        if value not in choices:
            raise self.fail(name, f"{value!r} is not one of {', '.join(choices)}")
        return value
