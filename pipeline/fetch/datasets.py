"""DATASETS: the official public files of each trace, and ``--parts`` selection over them.

Official locations (the default base URL of each dataset; ``--base-url`` replaces it):

- ``google2011``: bucket ``gs://clusterdata-2011-2``, served over HTTPS at
  https://commondatastorage.googleapis.com/clusterdata-2011-2/ .  500 parts each of
  ``job_events``, ``task_events``, ``task_constraints`` and ``task_usage``
  (``TABLE/part-NNNNN-of-00500.csv.gz``), one part each of ``machine_events`` and
  ``machine_attributes`` (``TABLE/part-00000-of-00001.csv.gz``), and ``schema.csv`` and
  ``SHA256SUM`` at the bucket root.  ``SHA256SUM`` (``sha256sum`` output) is Google's
  published checksum list; it is fetched first and every part is checked against it.
- ``alibaba2017``: ``alibaba-trace-2017.tar.gz`` at
  http://aliopentrace.oss-cn-beijing.aliyuncs.com/v2017Traces/ (alibaba/clusterdata
  ``cluster-trace-v2017/README2017.md``).  The published ``SHA256SUM`` (02c1fbc4…) names the
  earlier ``trace_201708.tgz`` and does not match the file now served (alibaba/clusterdata
  issue #209), so only the size is checked.
- ``alibaba2018``: the six per-table archives ``TABLE.tar.gz`` at
  http://aliopentrace.oss-cn-beijing.aliyuncs.com/v2018Traces/ (``cluster-trace-v2018/
  fetchData.sh``), each checked against the sha256 published in ``trace_2018.md``.

Verification: a file is accepted when its size equals the published size (or the server's
Content-Length) and its sha256 equals the published one, where one is published.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.errors import TraceError, UsageError
from pipeline.fetch.google2019 import google2019
from pipeline.fetch.pai2020 import alibaba_gpu2020
from pipeline.fetch.spec import Dataset, RemoteFile
from pipeline.fetch.swf import swf

__all__ = ["DATASETS", "Dataset", "RemoteFile", "dataset", "parse_sha256sum", "select"]

PARTS_OPTION = "--parts"
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *]?(.+)$")


def _google_parts(table: str, count: int) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(f"{table}/part-{i:05d}-of-{count:05d}.csv.gz") for i in range(count)
    )


def _google2011() -> Dataset:
    tables = {t: _google_parts(t, 500)
              for t in ("job_events", "task_events", "task_constraints", "task_usage")}
    tables |= {t: _google_parts(t, 1) for t in ("machine_events", "machine_attributes")}
    tables |= {"schema.csv": (RemoteFile("schema.csv"),),
               "SHA256SUM": (RemoteFile("SHA256SUM"),)}
    return Dataset(
        name="google2011",
        base_url="https://commondatastorage.googleapis.com/clusterdata-2011-2/",
        tables=tables,
        default_parts=("machine_events", "schema.csv", "job_events:0", "task_events:0"),
        checksum_file="SHA256SUM",
        notes="Google clusterdata-2011-2 (~41 GB in all); parts verified against SHA256SUM",
    )


def _alibaba2017() -> Dataset:
    archive = RemoteFile("alibaba-trace-2017.tar.gz")
    return Dataset(
        name="alibaba2017",
        base_url="http://aliopentrace.oss-cn-beijing.aliyuncs.com/v2017Traces/",
        tables={"trace": (archive,)},
        default_parts=("trace",),
        notes="Alibaba cluster-trace-v2017, one archive; no checksum matches the served file",
    )


# sha256 as published in alibaba/clusterdata cluster-trace-v2018/trace_2018.md; the only
# exact size known is machine_meta's (the publisher lists rounded sizes: 20G, 125M, ...).
_ALIBABA2018 = {
    "machine_meta": ("b5b1b786b22cd413a3674b8f2ebfb2f02fac991c95df537f363ef2797c8f6d55", 92_432),
    "machine_usage": ("3e6ee87fd204bb85b9e234c5c75a5096580fdabc8f085b224033080090753a7a", None),
    "container_meta": ("febd75e693d1f208a8941395e7faa7e466e50d21c256eff12a815b7e2fa2053f", None),
    "container_usage": ("b4bd3b1b82f5407c1b0dd47fe736ff5152c4b016a9c30cb26f988e2d1c5e5031", None),
    "batch_task": ("7c4b32361bd1ec2083647a8f52a6854a03bc125ca5c202652316c499fbf978c6", None),
    "batch_instance": ("e73e5a9326669aa079ba20048ddd759383cabe1fe3e58620aa75bd034e2450c6", None),
}


def _alibaba2018() -> Dataset:
    tables = {t: (RemoteFile(f"{t}.tar.gz", size, sha),)
              for t, (sha, size) in _ALIBABA2018.items()}
    return Dataset(
        name="alibaba2018",
        base_url="http://aliopentrace.oss-cn-beijing.aliyuncs.com/v2018Traces/",
        tables=tables,
        default_parts=("machine_meta", "container_meta", "batch_task"),
        notes="Alibaba cluster-trace-v2018, six archives (~49 GB); sha256 from trace_2018.md",
    )


def _openb() -> Dataset:
    base = "https://raw.githubusercontent.com/alibaba/clusterdata/master/cluster-trace-gpu-v2023/"
    return Dataset(
        name="alibaba-gpu2023",
        base_url=base,
        tables={"node_list": (RemoteFile("csv/openb_node_list_all_node.csv", 52_287),),
                "pod_list": (RemoteFile("csv/openb_pod_list_default.csv", 575_468),)},
        default_parts=("node_list", "pod_list"),
        notes="Alibaba cluster-trace-gpu-v2023 (openb), the two CSV files of the production "
              "trace (sizes as published at commit 7a6c496e; no checksums published)",
    )


def _more() -> tuple[Dataset, ...]:
    """Datasets described beside their adapters' sources."""
    return (google2019(), alibaba_gpu2020(), swf())


DATASETS: dict[str, Dataset] = {
    d.name: d for d in (_google2011(), _alibaba2017(), _alibaba2018(), _openb(), *_more())
}


def dataset(name: str) -> Dataset:
    """The dataset registered under ``name``."""
    if name not in DATASETS:
        known = ", ".join(sorted(DATASETS))
        raise UsageError(f"unknown dataset '{name}' (known: {known})", field="DATASET")
    return DATASETS[name]


def select(spec: Dataset, parts: list[str] | None) -> list[RemoteFile]:
    """The files named by ``parts`` selectors (default selection when None or empty).

    A selector is ``all``; a table name (all its parts); ``TABLE:N`` or ``TABLE:A-B``
    (inclusive part numbers); a file's path (``schema.csv``,
    ``task_events/part-00003-of-00500.csv.gz``).  Selectors may also be joined by commas,
    and a bare number or range after a ``TABLE:...`` selector continues it
    (``task_events:0-2,7,job_events:0``).  Files come back in dataset order, each once.
    """
    chosen: set[str] = set()
    for selector in _tokens(parts or list(spec.default_parts)):
        chosen.update(f.rel for f in _resolve(spec, selector))
    return [f for f in spec.all_files() if f.rel in chosen]


def _tokens(parts: list[str]) -> list[str]:
    """Split comma-joined selectors; a bare range inherits the table of the one before it."""
    tokens: list[str] = []
    table: str | None = None
    for token in (t.strip() for p in parts for t in p.split(",")):
        if not token:
            continue
        if _RANGE.match(token) and table is not None:
            tokens.append(f"{table}:{token}")
            continue
        table = token.split(":", 1)[0] if ":" in token else None
        tokens.append(token)
    return tokens


def _resolve(spec: Dataset, selector: str) -> list[RemoteFile]:
    if selector == "all":
        return spec.all_files()
    table, _, span = selector.partition(":")
    if table in spec.tables:
        files = spec.tables[table]
        return list(files) if not span else [files[i] for i in _span(spec, table, span, selector)]
    by_rel = {f.rel: f for f in spec.all_files()}
    if selector in by_rel:
        return [by_rel[selector]]
    known = ", ".join(spec.tables)
    raise UsageError(
        f"unknown table or file '{table}' in selector '{selector}' for {spec.name} "
        f"(known: all, {known})", field=PARTS_OPTION,
    )


def _span(spec: Dataset, table: str, span: str, selector: str) -> range:
    count = len(spec.tables[table])
    match = _RANGE.match(span)
    if not match:
        raise UsageError(f"bad part range '{span}' in selector '{selector}' "
                         "(expected N or A-B)", field=PARTS_OPTION)
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if first > last or last >= count:
        raise UsageError(f"part range '{span}' in selector '{selector}' is outside "
                         f"0-{count - 1} ({table} has {count} part(s))", field=PARTS_OPTION)
    return range(first, last + 1)


def parse_sha256sum(path: Path) -> dict[str, str]:
    """Read ``sha256sum`` output (``HASH  PATH`` lines) into a map of relative path -> hash."""
    sums: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read checksum list: {exc}", path) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _SUM_LINE.match(line.rstrip("\r"))
        if not match:
            raise TraceError("not a sha256sum line (expected 'HASH  PATH')", path, number)
        sums[_normalize(match.group(2))] = match.group(1).lower()
    return sums


def _normalize(rel: str) -> str:
    """A checksum-list path as a path relative to the bucket root."""
    rel = rel.strip().removeprefix("./")
    # Lists made from a parent directory or gs:// prefix the bucket name; drop it.
    _, sep, tail = rel.partition("clusterdata-2011-2/")
    return tail if sep else rel
