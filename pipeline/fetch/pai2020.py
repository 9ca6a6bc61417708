"""Alibaba PAI ``cluster-trace-gpu-v2020``: the seven per-table archives on Aliyun OSS.

Official location: ``https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/`` (the
links of alibaba/clusterdata ``cluster-trace-gpu-v2020/data/README.md`` and
``download_data.sh``; the repository's own copies are Git-LFS pointers over quota since 2023).
Each ``TABLE.tar.gz`` holds one ``TABLE.csv`` without a header row; the ``alibaba-gpu2020``
adapter reads the extracted CSV (``tar -xzf TABLE.tar.gz``).

Checksums: the sha256 of every archive as published in ``cluster-trace-gpu-v2020/README.md``
("Checksum").  The publisher lists sizes only rounded (``ls -sh``: 53M, 663M, 60M, 198M, 32K,
388M, 34M), so the one exact size is ``pai_machine_spec.tar.gz``'s, 30,449 bytes, measured on
an archive whose sha256 equals the published one; the others are checked by sha256 and the
server's Content-Length.
"""

from __future__ import annotations

from pipeline.fetch.spec import Dataset, RemoteFile

BASE_URL = "https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/"

# table -> (published sha256 of TABLE.tar.gz, exact size in bytes where known)
ARCHIVES: dict[str, tuple[str, int | None]] = {
    "pai_job_table": ("5aad7f7caac501136d14ed6a48e40546f825d7b0617a3a4f337e2348fe0a6cb0", None),
    "pai_task_table": ("cd1d6dc3215d2a8607ccf6b6dd952b5db776df86926c73259fea7c1499ac40e5", None),
    "pai_instance_table": (
        "1bf1e423a7ce3f8d086699801c362fd56a7182abdb234139e5ebbed97995ca06", None),
    "pai_sensor_table": (
        "9a0b82e8bdf3949281e4ba1423d9b4b34847e52799eecb138966de46da69c7a0", None),
    "pai_group_tag_table": (
        "722fef30b7fb7aa50dabd79155614b5423a9d65cf45a9b26c590d57725423a14", None),
    "pai_machine_spec": (
        "cc0d38a4045af1b1af8179de8b1b54b1ddd995e6160d6d061a6b1000f1276c2d", 30_449),
    "pai_machine_metric": (
        "53ad917193d3b1dd0f3055e723148b1f36c2f81789b014ea2930a7875892eef5", None),
}
# sha256 of the CSV inside each archive (published with the archives), for checking extraction.
EXTRACTED_SHA256: dict[str, str] = {
    "pai_group_tag_table.csv": "d23fcb56d88b2976fda4a62708d77b2a8c98635c4b443f100ed5553d4cd07fbe",
    "pai_instance_table.csv": "b179f7d7e0927a6663d719b728c92640447c5a0fc3c6e4edff31e7207ab9dd17",
    "pai_job_table.csv": "379ecb3becaba347f44a53bf7eb53e54b185221b2a0338a3f828828d269ba96c",
    "pai_machine_metric.csv": "8b6592daab0373ef7fec730198b4df5891b1722c2ab4c7016249166e131402d3",
    "pai_machine_spec.csv": "251e9e33649155a6a935fdc1dc0e90cd4698206936b60bd8fce60ff2ccd51439",
    "pai_sensor_table.csv": "12dd9929b70f3efe18d1279d9873e3a519c64f431613b23b059ed8c46a376dd7",
    "pai_task_table.csv": "6954802b457305f8a9e480ef97c40060baee59649fd3adc62c5a1e048aa058de",
}


def alibaba_gpu2020() -> Dataset:
    """The published archives of cluster-trace-gpu-v2020, one table each; by default the
    three the adapter requires (machine spec, jobs, tasks: about 94 MB)."""
    tables = {t: (RemoteFile(f"{t}.tar.gz", size, sha),) for t, (sha, size) in ARCHIVES.items()}
    return Dataset(
        name="alibaba-gpu2020",
        base_url=BASE_URL,
        tables=tables,
        default_parts=("pai_machine_spec", "pai_job_table", "pai_task_table"),
        notes="Alibaba PAI cluster-trace-gpu-v2020, seven archives (~1.4 GB); sha256 from "
              "cluster-trace-gpu-v2020/README.md; extract each (tar -xzf) before ingest",
    )
