"""What a published trace is, for ``fetch``: its files by table (one module that the dataset
registry and each dataset's own description import, so neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RemoteFile:
    """One published file: its path under the base URL (and under OUT) and what is known of it."""

    rel: str
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A published trace: where it lives, its files grouped by table, and a default selection."""

    name: str
    base_url: str
    tables: dict[str, tuple[RemoteFile, ...]]
    default_parts: tuple[str, ...]
    checksum_file: str | None = None
    notes: str = ""
    aliases: dict[str, str] = field(default_factory=dict)

    def all_files(self) -> list[RemoteFile]:
        """Every file of the dataset, table by table, parts in order."""
        return [f for files in self.tables.values() for f in files]
