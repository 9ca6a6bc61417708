"""The official location of Google cluster-usage traces v3 (``clusterdata-2019``).

Since August 2020 each of the 8 cells (``a`` ... ``h``, May 2019) is a public GCS bucket
``gs://clusterdata_2019_X`` served over HTTPS at
``https://storage.googleapis.com/clusterdata_2019_X/`` (announcement by Nan Deng on
googleclusterdata-discuss, 2020-08-10), each table sharded as
``TABLE-NNNNNNNNNNNN.json.gz`` at the bucket root (gzipped newline-delimited JSON).

The number of shards per table is not published in the documents we have, and no checksum
list is published: ``PARTS`` are upper guesses (a part past the real last one answers 404)
and only sizes are checked (the server's Content-Length).  Only cell ``a`` is described here
(one cell is one ingest; ``--base-url .../clusterdata_2019_b/`` fetches another: its file
names are the same).  Default: ``machine_events``, ``collection_events`` and the first
``instance_events`` part.
"""

from __future__ import annotations

from pipeline.fetch.spec import Dataset, RemoteFile

CELLS = "abcdefgh"
BASE_URL = "https://storage.googleapis.com/clusterdata_2019_{cell}/"
# Shards per table: [A] guesses (not published); the first of each is known to exist.
PARTS = {
    "machine_events": 1, "machine_attributes": 1, "collection_events": 1,
    "instance_events": 500, "instance_usage": 5000,
}


def _parts(table: str, count: int) -> tuple[RemoteFile, ...]:
    return tuple(RemoteFile(f"{table}-{i:012d}.json.gz") for i in range(count))


def google2019(cell: str = "a") -> Dataset:
    """The v3 trace of one cell (default ``a``): its tables' JSON parts."""
    if cell not in CELLS:
        raise ValueError(f"unknown cell '{cell}' (cells: {', '.join(CELLS)})")
    return Dataset(
        name="google2019",
        base_url=BASE_URL.format(cell=cell),
        tables={table: _parts(table, n) for table, n in PARTS.items()},
        default_parts=("machine_events", "collection_events", "instance_events:0"),
        notes=f"Google cluster-usage traces v3, cell {cell} (~2.4 TiB for all 8 cells); "
              "gzipped NDJSON parts, sizes checked only (no checksum list is published)",
    )
