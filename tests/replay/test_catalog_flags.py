"""The instance catalog and Cluster Autoscaler's flags, read as users write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import UsageError
from pipeline.replay.autoscaler_flags import parse_duration, read_flags, settings
from pipeline.replay.catalog import capacities, prices, read_catalog
from pipeline.sim.kubernetes.settings import NodeGroup

SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "instance-types-aws.csv"


def test_shipped_catalog_reads_and_converts() -> None:
    cat = read_catalog(SHIPPED)
    i = cat.index("m5.xlarge", "node_groups")
    assert prices(cat)[i] == pytest.approx(0.192)
    cap = capacities(cat, vcpu_per_unit=16.0, gib_per_unit=64.0)
    assert cap[i] == pytest.approx([3.92 / 16, 15.03 / 64, 0.0])
    assert cat.types[cat.index("p3.2xlarge", "x")].gpu_model == "V100"


@pytest.mark.parametrize(("row", "field"), [
    ("m5.xlarge,4,16,abc", "price_per_hour"),
    ("m5.xlarge,0,16,0.1", "cpu"),
    (",4,16,0.1", "instance_type"),
])
def test_bad_catalog_row_names_row_and_field(tmp_path: Path, row: str, field: str) -> None:
    p = tmp_path / "c.csv"
    p.write_text(f"# prices\ninstance_type,cpu,memory_gib,price_per_hour\n{row}\n")
    with pytest.raises(UsageError) as err:
        read_catalog(p)
    assert err.value.line == 3 and err.value.field == field


def test_yaml_catalog_and_duplicates(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("instance_types:\n- {instance_type: a, cpu: 2, memory_gib: 4, "
                 "price_per_hour: 0.1}\n- {instance_type: a, cpu: 4, memory_gib: 8, "
                 "price_per_hour: 0.2}\n")
    with pytest.raises(UsageError, match="listed twice"):
        read_catalog(p)
    p.write_text("instance_types:\n- {instance_type: a, cpu: 2, memory_gib: 4, "
                 "price_per_hour: 0.1, capacity_type: spot}\n")
    assert read_catalog(p).types[0].capacity_type == "spot"
    assert np.array_equal(capacities(read_catalog(p), 1, 1), [[2.0, 4.0, 0.0]])


@pytest.mark.parametrize(("text", "seconds"), [
    ("10m", 600.0), ("1m30s", 90.0), ("500ms", 0.5), ("0", 0.0), ("1h", 3600.0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "scan-interval") == pytest.approx(seconds)


def test_flags_as_users_pass_them(tmp_path: Path) -> None:
    f = tmp_path / "ca.flags"
    f.write_text("- ./cluster-autoscaler\n- --v=4   # verbose\n- --expander=least-waste\n"
                 "- --nodes=1:10:m5.xlarge\n- --nodes 0:5:c5.xlarge\n"
                 "- --scale-down-unneeded-time=5m\n- --scan-interval=20s\n")
    got, ignored = settings(read_flags(str(f)), ())
    assert got.expanders == ("least-waste",)
    assert got.groups == (NodeGroup("m5.xlarge", 1, 10), NodeGroup("c5.xlarge", 0, 5))
    assert got.unneeded_s == 300.0 and got.scan_interval_s == 20.0
    assert got.delay_after_delete_s == 20.0  # defaults to the scan interval
    assert got.delay_after_add_s == 600.0 and got.threshold == 0.5
    assert ignored == ("v",)


@pytest.mark.parametrize(("flags", "match"), [
    ("--expander=cheapest", "not one of"),
    ("--scale-down-unneeded-time=ten", "not a duration"),
    ("--nodes=5:1:m5.xlarge", "MIN <= MAX"),
    ("--made-up-flag=1", "not a Cluster Autoscaler flag"),
    ("--scale-down-utilization-threshold=1.5", "must be in"),
])
def test_bad_flags_are_one_line_errors(flags: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        settings(read_flags(flags), ())


def test_editing_the_catalog_changes_the_sweep_key(tmp_path: Path) -> None:
    from pipeline.sweep.grid import _cluster_file_digests

    (tmp_path / "c.csv").write_text("instance_type,cpu,memory_gib,price_per_hour\na,2,4,0.1\n")
    before = _cluster_file_digests("cluster-autoscaler", {"catalog": "c.csv"}, tmp_path)
    (tmp_path / "c.csv").write_text("instance_type,cpu,memory_gib,price_per_hour\na,2,4,0.2\n")
    after = _cluster_file_digests("cluster-autoscaler", {"catalog": "c.csv"}, tmp_path)
    assert before["cluster.catalog"] != after["cluster.catalog"]
    assert _cluster_file_digests("elastic", {"catalog": "c.csv"}, tmp_path) == {}
