"""A run's data and WAL devices as records: located on recorded hosts, written to the runs
table's `devices` column and read back, in the doctor snapshot's shape, old layouts as stored."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from pgdyno.host.disks import device_names, find_devices, locate_devices, read_devices
from pgdyno.records.devices import DeviceLayout
from pgdyno.results.decode import devices
from pgdyno.results.encode import devices_json, dumps

REPO = Path(__file__).parents[2]
RECORDED = REPO / "tests/data/hosts/firecracker-2cpu"
NVME_SDB = (REPO / "tests/data/proc/edited-nvme-sdb", REPO / "tests/data/sys/edited-nvme-sdb")
DATA, WAL = Path("/var/lib/postgresql/18/main"), Path("/pg_wal")


def test_the_column_holds_what_the_doctor_snapshot_holds():
    """One shape: the same keys, order and values in the runs table and the snapshot."""
    found, _ = find_devices(DATA, DATA / "pg_wal", RECORDED / "proc", RECORDED / "sys")
    section, _ = read_devices(DATA, DATA / "pg_wal", RECORDED / "proc", RECORDED / "sys")
    assert dumps(devices_json(found), "devices") == json.dumps(section)
    assert found.data is not None and found.data.role == "data"
    assert found.data.schedulers == ("none", "mq-deadline", "kyber", "bfq")
    assert found.wal_on_data_device is True


def test_a_layout_reads_back_as_written():
    found, _ = find_devices(DATA, WAL, *NVME_SDB)
    assert devices(json.loads(dumps(devices_json(found), "devices"))) == found
    assert device_names(found) == ["sdb1", "sdb", "nvme0n1p2", "nvme0n1"]  # partitions, disks


def test_a_layout_stored_by_an_earlier_pgdyno_prints_as_stored():
    """The first layout: no nvme, virtual, schedulers or free space, source after the options."""
    with sqlite3.connect(REPO / "tests/data/report/results.sqlite") as conn:
        (text,) = conn.execute("SELECT devices FROM runs WHERE id = 1").fetchone()
    found = devices(json.loads(text))
    assert found is not None and found.data is not None
    assert (found.data.name, found.data.source, found.data.nvme) == ("vda", "/dev/vda", None)
    assert dumps(devices_json(found), "devices") == text
    assert device_names(found) == ["vda"]


def test_missing_keys_read_as_nothing():
    found = devices({"data": {"name": "sdb"}, "wal_on_data_device": "yes"})
    assert found is not None and found.data is not None
    assert (found.data.path, found.data.disk, found.data.rotational) == ("", None, None)
    assert (found.wal, found.wal_on_data_device) == (None, None)
    assert devices_json(found) == {"data": {"name": "sdb"}, "wal": None, "wal_on_data_device": None}


def test_a_data_directory_not_on_this_host(tmp_path: Path):
    """Stored as `{}` (not null: the run was looked at), and every device is sampled."""
    for missing in (None, tmp_path / "elsewhere"):
        found = locate_devices(missing, Path("/proc"), Path("/sys"))
        assert found == DeviceLayout() and not found.on_host
        assert devices_json(found) == {}
        assert device_names(found) is None
    assert devices({}) == DeviceLayout()


def test_a_data_directory_on_this_host(tmp_path: Path):
    (tmp_path / "pg_wal").mkdir()
    found = locate_devices(tmp_path, Path("/proc"), Path("/sys"))
    assert found.on_host
    assert found.data is not None and found.data.path == str(tmp_path.resolve())
    assert found.wal is not None and found.wal.path == str((tmp_path / "pg_wal").resolve())
    assert found.wal_on_data_device is True
    names = device_names(found)
    assert names is not None and names[0] == found.data.name
