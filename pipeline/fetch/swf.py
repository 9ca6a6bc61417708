"""The ``swf`` dataset: Parallel Workloads Archive logs in the Standard Workload Format.

Official location: https://www.cs.huji.ac.il/labs/parallel/workload/ (``logs.html`` lists
the logs), one directory ``l_NAME/`` per log holding its ``.swf.gz`` files.  Each part is one
log, named by the log (``SDSC-SP2``, ``CTC-SP2``, ...), and is written to ``OUT/l_NAME/FILE``,
so every log lands in its own directory: ``tracereplay ingest swf OUT/l_sdsc_sp2 TRACE``.
The default selection is the two logs the project's tests use (``SDSC-SP2``, ``CTC-SP2``).

Verification: the archive publishes no checksums.  Sizes and sha256 are those of the copies
described in ``shared/traces/parallel-workloads-archive-swf/PROVENANCE.md`` (complete
original files, self-consistent with their own ``MaxRecords`` headers); should the archive
ever re-compress a file, its bytes would differ and the download would be refused as
unverified rather than accepted silently.
"""

from __future__ import annotations

from pipeline.fetch.spec import Dataset, RemoteFile

BASE_URL = "https://www.cs.huji.ac.il/labs/parallel/workload/"

# log name -> (archive directory, file, gz bytes, sha256), from PROVENANCE.md
LOGS: dict[str, tuple[str, str, int, str]] = {
    "SDSC-SP2": ("l_sdsc_sp2", "SDSC-SP2-1998-4.2-cln.swf.gz", 1_205_570,
                 "e03fe48be50c4ab04d6bb2285296d9c3399e9c1f27ee79b754ad32a14abd9bac"),
    "CTC-SP2": ("l_ctc_sp2", "CTC-SP2-1996-3.1-cln.swf.gz", 1_487_336,
                "9fa28ac16c4386fb81b72a91d8bd8888281df2948a9d912769d387c5ee285bb4"),
    "KTH-SP2": ("l_kth_sp2", "KTH-SP2-1996-2.1-cln.swf.gz", 411_455,
                "3e152f201fd2e96808a735bced6ea6eb0bb07fdc447689cafb0750d87b264c0b"),
    "LLNL-Thunder": ("l_llnl_thunder", "LLNL-Thunder-2007-1.1-cln.swf.gz", 1_312_559,
                     "00d9bce501efd3a23cd0713bbae591516b7a69217d5f4b851725f601f3b75247"),
    "HPC2N": ("l_hpc2n", "HPC2N-2002-2.2-cln.swf.gz", 2_997_773,
              "3c534857d6065cfd9cc35aac8d064c9c17172be7acf336de835006f43a626e64"),
    "NASA-iPSC": ("l_nasa_ipsc", "NASA-iPSC-1993-3.1-cln.swf.gz", 207_976,
                  "5589ae9b2fb78e3bf92de097497cf33a91607de1ad54563e43533f7827597f29"),
}


def swf() -> Dataset:
    """The PWA logs as a dataset: one part per log, each in its own ``l_NAME/`` directory."""
    tables = {name: (RemoteFile(f"{folder}/{file}", size, sha256),)
              for name, (folder, file, size, sha256) in LOGS.items()}
    return Dataset(
        name="swf",
        base_url=BASE_URL,
        tables=tables,
        default_parts=("SDSC-SP2", "CTC-SP2"),
        notes="Parallel Workloads Archive, cleaned (-cln) SWF logs, one per l_NAME/ directory; "
              "ingest one directory at a time; size and sha256 from PROVENANCE.md",
    )
