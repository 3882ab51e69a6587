"""pgbench command lines, workloads, jobs policy and the bench matrix."""

from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.experiment.matrix import expand, make_spec
from pgdyno.pgbench.command import (
    RunOptions,
    builtin_workload,
    jobs_for,
    parse_int_list,
    run_argv,
    script_workload,
)


def test_run_argv_has_everything_a_run_records():
    opts = RunOptions(
        builtin_workload("tpcb-like"),
        clients=8,
        jobs=2,
        duration_s=60,
        protocol="prepared",
        rate=500,
        latency_limit_ms=50,
    )
    argv = run_argv(Path("/pg/bin/pgbench"), "host=/s port=1 dbname=b", opts, Path("/r/agg"))
    assert argv[:2] == ["/pg/bin/pgbench", "-n"]
    assert argv[argv.index("-c") + 1] == "8"
    assert argv[argv.index("-j") + 1] == "2"
    assert argv[argv.index("-R") + 1] == "500"
    assert argv[argv.index("-L") + 1] == "50"
    assert argv[argv.index("-M") + 1] == "prepared"
    assert {"-l", "--log-prefix=/r/agg"} <= set(argv)
    assert not any(a.startswith("--sampling-rate") for a in argv)  # full log by default
    assert "-r" not in argv and "-P" not in argv  # each costs TPS beside -l: on request only
    assert "-s" not in argv  # built-ins read the scale from the dataset
    assert argv[-1] == "host=/s port=1 dbname=b"


def test_sampled_log_and_scripts_get_the_scale(tmp_path: Path):
    script = tmp_path / "q.sql"
    script.write_text("SELECT 1;\n")
    opts = RunOptions(script_workload([str(script)]), clients=1, jobs=1, duration_s=1)
    argv = run_argv(Path("pgbench"), "dbname=b", opts, Path("/r/tx"), sampling_rate=0.05, scale=7)
    assert "--sampling-rate=0.05" in argv
    assert argv[argv.index("-s") + 1] == "7"


def test_per_statement_and_progress_on_request():
    opts = RunOptions(
        builtin_workload("tpcb-like"), 2, 2, 5, per_statement=True, progress=True
    )  # fmt: skip
    argv = run_argv(Path("pgbench"), "dbname=b", opts, Path("/r/tx"))
    assert "-r" in argv and argv[argv.index("-P") + 1] == "1"


def test_warmup_argv_logs_nothing():
    opts = RunOptions(builtin_workload("select-only"), clients=1, jobs=1, duration_s=5)
    argv = run_argv(Path("pgbench"), "dbname=b", opts, None)
    assert "-l" not in argv and "-r" not in argv


def test_script_files_and_builtins_form_one_weighted_mix(tmp_path: Path):
    script = tmp_path / "lookup.sql"
    script.write_text("SELECT 1;\n")
    workload = script_workload([f"{script}@3"], ["select-only@1"])
    assert workload.name == "custom:lookup@3+select-only@1"
    opts = RunOptions(workload, clients=1, jobs=1, duration_s=1)
    argv = run_argv(Path("pgbench"), "dbname=b", opts, None)
    assert argv[argv.index("-f") + 1] == f"{script}@3"
    assert argv[argv.index("-b") + 1] == "select-only@1"
    assert workload.may_write  # a custom file might write: each run gets a fresh copy


def test_missing_script_file_is_a_usage_error(tmp_path: Path):
    with pytest.raises(UsageError, match="does not exist"):
        script_workload([str(tmp_path / "nope.sql")])


@pytest.mark.parametrize("bad", ["0", "x", "1,,-2", ""])
def test_client_lists_must_be_positive_numbers(bad: str):
    with pytest.raises(UsageError, match="-c/--clients"):
        parse_int_list(bad, "-c/--clients")


def test_jobs_policies():
    assert [jobs_for(c, "auto", 4) for c in (1, 2, 4, 8, 16)] == [1, 2, 4, 4, 4]
    assert [jobs_for(c, "clients", 4) for c in (1, 8, 32)] == [1, 8, 32]
    assert jobs_for(8, "3", 4) == 3
    with pytest.raises(UsageError, match="--jobs"):
        jobs_for(8, "many", 4)


def test_matrix_order_and_jobs():
    spec = make_spec(
        workloads=[builtin_workload("tpcb-like"), builtin_workload("select-only")],
        scales=[1],
        clients=[1, 2, 8],
        repeats=2,
    )
    cells = expand(spec, [1, 10], cpus=2)
    assert len(cells) == 2 * 2 * 2 * 3
    assert [c.index for c in cells] == list(range(len(cells)))
    first = cells[:6]
    assert [(c.workload, c.repeat, c.clients) for c in first] == [
        ("tpcb-like", 1, 1),
        ("tpcb-like", 1, 2),
        ("tpcb-like", 1, 8),
        ("tpcb-like", 2, 1),
        ("tpcb-like", 2, 2),
        ("tpcb-like", 2, 8),
    ]
    assert {c.jobs for c in cells if c.clients == 8} == {2}
    assert cells[-1].scale == 10


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("duration_s", 0, "-T/--time"),
        ("repeats", 0, "--repeats"),
        ("warmup_s", -1, "--warmup"),
        ("rate", -5.0, "-R/--rate"),
    ],
)
def test_spec_errors_name_the_option(field: str, value: object, option: str):
    fields = {"workloads": [builtin_workload("tpcb-like")], "scales": [1], "clients": [1]}
    with pytest.raises(UsageError, match=option):
        make_spec(**fields, **{field: value})
