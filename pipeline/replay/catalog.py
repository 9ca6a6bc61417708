"""A catalog of priced instance types, as the user gives it (CSV or YAML), in trace units.

Kubernetes cluster models (:mod:`pipeline.sim.kubernetes`) buy nodes of these types; cost
is per instance type.  One row per type:

``instance_type`` (unique name), ``cpu`` (vCPUs), ``memory_gib``, ``gpu`` (devices, 0 when
none), ``gpu_model`` (empty when none), ``price_per_hour`` (USD), ``capacity_type``
(``on-demand`` or ``spot``).  Optional ``allocatable_cpu`` and ``allocatable_memory_gib``:
what the kubelet offers pods after its reservations (default: the whole machine).

CSV: a header row with those names; lines starting with ``#`` are comments (say the source
and date of the prices there).  YAML: ``{source, date, instance_types: [{...}, ...]}``.

Trace units: a trace's cpu and memory are in its own units (cores and GiB, or normalized
to the largest machine), so ``vcpu_per_unit`` and ``gib_per_unit`` say how many vCPUs and
GiB one trace unit is; :func:`capacities` divides by them.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pipeline.errors import UsageError

CAPACITY_TYPES = ("on-demand", "spot")
REQUIRED = ("instance_type", "cpu", "memory_gib", "price_per_hour")
OPTIONAL = ("gpu", "gpu_model", "capacity_type", "allocatable_cpu", "allocatable_memory_gib")


@dataclass(frozen=True)
class InstanceType:
    """One priced machine type (resources as the provider lists them)."""

    name: str
    cpu: float
    memory_gib: float
    gpu: float
    gpu_model: str
    price_per_hour: float
    capacity_type: str
    allocatable_cpu: float
    allocatable_memory_gib: float


@dataclass(frozen=True)
class Catalog:
    """The instance types of one catalog file, in file order."""

    path: str
    types: tuple[InstanceType, ...]

    def index(self, name: str, field: str) -> int:
        """Position of type ``name``; a UsageError naming ``field`` when it is not listed."""
        for i, t in enumerate(self.types):
            if t.name == name:
                return i
        raise UsageError(f"instance type {name!r} is not in the catalog {self.path} "
                         f"(types: {', '.join(t.name for t in self.types)})", field=field)


def read_catalog(path: str | Path) -> Catalog:
    """Read a CSV or YAML catalog; a bad row is a one-line error naming the row and field."""
    p = Path(path)
    if not p.is_file():
        raise UsageError("no such catalog file", p, field="catalog")
    text = p.read_text()
    yaml_file = p.suffix.lower() in (".yaml", ".yml")
    rows = _yaml_rows(text, p) if yaml_file else _csv_rows(text, p)
    types = tuple(_instance(row, p, line) for line, row in rows)
    if not types:
        raise UsageError("the catalog lists no instance type", p)
    seen: set[str] = set()
    for (line, _), t in zip(rows, types, strict=True):
        if t.name in seen:
            raise UsageError(f"instance type {t.name!r} is listed twice", p, line,
                             "instance_type")
        seen.add(t.name)
    return Catalog(str(path), types)


def _csv_rows(text: str, p: Path) -> list[tuple[int, dict[str, Any]]]:
    lines = [(i + 1, s) for i, s in enumerate(text.splitlines())
             if s.strip() and not s.lstrip().startswith("#")]
    if not lines:
        raise UsageError("the catalog has no header row", p)
    reader = csv.DictReader(io.StringIO("\n".join(s for _, s in lines)))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise UsageError(f"the header has no column {missing[0]!r} (needed: "
                         f"{', '.join(REQUIRED)})", p, lines[0][0])
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise UsageError(f"unknown column {unknown[0]!r} (known: "
                         f"{', '.join(REQUIRED + OPTIONAL)})", p, lines[0][0])
    rows = []
    for (line, _), row in zip(lines[1:], reader, strict=False):
        if None in row or any(v is None for v in row.values()):
            raise UsageError("the row does not have one value per column", p, line)
        rows.append((line, dict(row)))
    return rows


def _yaml_rows(text: str, p: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UsageError(f"not valid YAML ({getattr(exc, 'problem', exc)})", p,
                         mark.line + 1 if mark is not None else None) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("instance_types"), list):
        raise UsageError("expected a mapping with an instance_types list", p,
                         field="instance_types")
    rows = []
    for i, row in enumerate(doc["instance_types"]):
        if not isinstance(row, dict):
            raise UsageError("each entry must be a mapping", p, field=f"instance_types[{i}]")
        unknown = [k for k in row if k not in REQUIRED + OPTIONAL]
        if unknown:
            raise UsageError(f"unknown key {unknown[0]!r}", p,
                             field=f"instance_types[{i}].{unknown[0]}")
        rows.append((i, row))
    return rows


def _instance(row: dict[str, Any], p: Path, line: int) -> InstanceType:
    where = (p, line) if p.suffix.lower() not in (".yaml", ".yml") else (p, None)
    prefix = "" if where[1] is not None else f"instance_types[{line}]."

    def number(key: str, default: float | None, lo: float, strict: bool = False) -> float:
        raw = row.get(key)
        if raw is None or raw == "":
            if default is None:
                raise UsageError("a value is needed", *where, prefix + key)
            return default
        try:
            value = float(raw) if not isinstance(raw, bool) else math.nan
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value) or value < lo or (strict and value <= lo):
            op = ">" if strict else ">="
            raise UsageError(f"must be a number {op} {lo:g} (got {raw!r})", *where, prefix + key)
        return value

    name = str(row.get("instance_type") or "").strip()
    if not name:
        raise UsageError("a name is needed", *where, prefix + "instance_type")
    cpu = number("cpu", None, 0.0, strict=True)
    mem = number("memory_gib", None, 0.0, strict=True)
    kind = str(row.get("capacity_type") or "on-demand").strip()
    if kind not in CAPACITY_TYPES:
        raise UsageError(f"must be one of {', '.join(CAPACITY_TYPES)} (got {kind!r})", *where,
                         prefix + "capacity_type")
    alloc_cpu = number("allocatable_cpu", cpu, 0.0, strict=True)
    alloc_mem = number("allocatable_memory_gib", mem, 0.0, strict=True)
    if alloc_cpu > cpu or alloc_mem > mem:
        field = "allocatable_cpu" if alloc_cpu > cpu else "allocatable_memory_gib"
        raise UsageError("allocatable cannot exceed the machine's capacity", *where,
                         prefix + field)
    gpu = number("gpu", 0.0, 0.0)
    return InstanceType(name, cpu, mem, gpu, str(row.get("gpu_model") or "").strip(),
                        number("price_per_hour", None, 0.0), kind, alloc_cpu, alloc_mem)


def capacities(catalog: Catalog, vcpu_per_unit: float, gib_per_unit: float) -> np.ndarray:
    """Allocatable (cpu, mem, gpu) of each type in trace units, (T, 3)."""
    return np.array([[t.allocatable_cpu / vcpu_per_unit, t.allocatable_memory_gib / gib_per_unit,
                      t.gpu] for t in catalog.types], dtype=np.float64).reshape(-1, 3)


def prices(catalog: Catalog) -> np.ndarray:
    """USD per hour of each type, (T,)."""
    return np.array([t.price_per_hour for t in catalog.types], dtype=np.float64)
