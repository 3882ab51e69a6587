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


BASE = {"workloads": [builtin_workload("tpcb-like")], "scales": [1], "clients": [1, 4]}


@pytest.mark.parametrize(
    ("fields", "sentence"),
    [
        ({"rate": float("inf")}, "-R/--rate inf is not valid: it must be a finite number."),
        ({"latency_limit_ms": float("nan")}, "-L/--latency-limit nan is not valid"),
        ({"jobs": "5"}, "-j/--jobs 5 is more than the largest client count (4)"),
        ({"jobs": "0"}, "--jobs '0' is not valid: use auto, clients or a number >= 1."),
        ({"trim_s": 60}, "--trim 60 leaves nothing of a 60 s run"),
        ({"latency_log": "2"}, "choose auto, full or a sampling rate in (0, 1] such as 0.1."),
        ({"latency_log": "0.0"}, "--latency-log '0.0' is not valid"),
        ({"latency_log": "nan"}, "--latency-log 'nan' is not valid"),
        ({"scales": []}, "-s/--scale [] is not valid: give at least one value."),
    ],
)
def test_spec_refuses_with_one_sentence(fields: dict[str, object], sentence: str):
    with pytest.raises(UsageError) as caught:
        make_spec(**{**BASE, **fields})
    assert sentence in str(caught.value)
    assert str(caught.value).count(". ") == 0 and str(caught.value).endswith(".")


@pytest.mark.parametrize(
    ("jobs", "trim", "log"), [("4", 59, "0.1"), ("1", 0, "1"), ("2", None, "full")]
)
def test_spec_accepts_the_edges(jobs: str, trim: int | None, log: str):
    spec = make_spec(**BASE, jobs=jobs, trim_s=trim, latency_log=log)
    # A fixed jobs count below the largest client count is capped per cell: pgbench needs
    # jobs <= clients.
    assert [c.jobs for c in expand(spec, [1], cpus=8)] == [1, int(jobs)]


def test_script_names_pgbench_cannot_open_are_usage_errors():
    for name in ("no\x00such.sql", "~no-such-user-pgdyno/x.sql", ""):
        with pytest.raises(UsageError, match="does not exist"):
            script_workload([name])


def test_resumed_runs_count_as_done_in_the_progress(tmp_path: Path):
    import io

    from rich.console import Console

    from pgdyno.cli.progress import MatrixProgress
    from pgdyno.records import RunCell, RunRecord

    stream = io.StringIO()
    cells = [RunCell(index=i, scale=1, workload="select-only", clients=1, jobs=1, repeat=i + 1)
             for i in range(4)]  # fmt: skip
    with MatrixProgress(Console(file=stream, force_terminal=False)) as progress:
        progress.skipped(3)  # an earlier `compare` finished three of the four runs
        progress.planned(cells, 10.0)
        record = RunRecord(
            cells[0], "failed", "", "", 10, "simple", None, 0, "18", "18", (), {}, None,
            error="pgbench failed",
        )  # fmt: skip
        progress.finished(cells[0], record, run_id=42)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "1 runs planned (3 already done), about 0.2 min"
    assert lines[-1].startswith("run 42 (4/4): select-only scale 1, 1 clients, repeat 1: failed")
