"""`report --by`: runs grouped by host, kernel, version or set, and what else differs named."""

from __future__ import annotations

from pathlib import Path

from pgdyno.report.content import build
from pgdyno.report.differences import differences
from pgdyno.report.load import Selection, load
from pgdyno.report.selection import group_runs
from pgdyno.results.store import ResultsStore
from store_runs import new_comparison, run_at

HOSTS = {
    "db-a": {"hostname": "db-a", "machine_id": "aaaa1111", "kernel": "6.1.0", "cpu_count": 2},
    "db-b": {"hostname": "db-b", "machine_id": "bbbb2222", "kernel": "6.8.0", "cpu_count": 2},
}


def two_hosts(path: Path, *, same_settings: bool = False) -> None:
    with ResultsStore(path) as store:
        for n, host in enumerate(HOSTS.values()):
            session = store.begin_session(["pgdyno", "bench"], "sandbox pg18", host, {})
            work_mem = "4096 kB" if same_settings or n == 0 else "65536 kB"
            for i in range(3):
                store.add_run(session, run_at(n * 100 + i, settings={
                    "work_mem": work_mem, "port": str(5432 + n)}))  # fmt: skip
            store.finish_session(session, "done")


def test_by_host_groups_the_same_cell_and_names_the_setting_that_differs(tmp_path: Path) -> None:
    two_hosts(tmp_path / "r.sqlite")
    with ResultsStore(tmp_path / "r.sqlite") as store:
        data = load(store, Selection(all_runs=True, by="host"))
    report = build(data, "now", "test")
    assert [g["name"] for g in report["groups"]] == ["db-a", "db-b"]
    assert [g["baseline"] for g in report["groups"]] == [True, False]
    assert [r["group"] for r in report["summary"]] == ["db-a", "db-b"]
    assert report["summary"][1]["verdict"] is not None  # judged unpaired against db-a
    differing = {d["what"]: d["values"] for d in report["differences"]}
    assert differing == {
        "kernel": {"db-a": "6.1.0", "db-b": "6.8.0"},
        "setting work_mem": {"db-a": "4MB", "db-b": "64MB"},  # as SHOW prints them
    }  # the port differs too, but says nothing about performance
    assert (
        "not the same in every group (1 cell): setting work_mem: db-a 4MB; db-b 64MB"
        in (report["notes"])
    )


def test_by_kernel_does_not_list_the_kernel_as_a_difference(tmp_path: Path) -> None:
    two_hosts(tmp_path / "r.sqlite", same_settings=True)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        data = load(store, Selection(all_runs=True, by="kernel"))
    names, baseline, _groups = group_runs(data)
    assert names == ["kernel 6.1.0", "kernel 6.8.0"] and baseline == "kernel 6.1.0"
    assert build(data, "now", "test")["differences"] == []


def test_two_hosts_of_one_name_are_told_apart_by_machine_id(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        for n, machine in enumerate(("aaaa1111", "bbbb2222")):
            session = store.begin_session(["x"], "t", {"hostname": "db", "machine_id": machine}, {})
            store.add_run(session, run_at(n))
        data = load(store, Selection(all_runs=True, by="host"))
    names, _, _ = group_runs(data)
    assert names == ["db (machine aaaa1111)", "db (machine bbbb2222)"]


def test_a_comparison_by_set_checks_only_the_runs_not_the_settings(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        comparison = store.comparisons.create(new_comparison())
        session = store.begin_session(["pgdyno", "compare"], "t", {}, {})
        for i, name in enumerate(("a", "b")):
            store.add_run(session, run_at(i, comparison_id=comparison, set_name=name,
                                          settings={"work_mem": f"{i + 4} MB"},
                                          duration_s=3 + i))  # fmt: skip
        data = load(store, Selection(comparison_id=comparison))
    _, _, groups = group_runs(data)
    found = differences(data.runs, groups, "set")
    assert [d["what"] for d in found] == ["run length (s)"]
