"""Why a run failed, read from real server logs of faults (tests/data/faults, README there).

pgbench itself only says "Run was aborted"; the cause is in the server log. These feed the
recorded logs through the same readers a failed run uses and check the sentence a user gets.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.experiment.failure import Facts, explain
from pgdyno.pgbench.execute import failure_reason
from pgdyno.postgres.serverlog import problems_since

DATA = Path(__file__).parent.parent / "data" / "faults"
LOG = Path("/w/clusters/pg18/log/postgresql.log")  # as the sentence names it
DISK = "the disk under /w/clusters/pg18/data (tmpfs /w, 2 MiB free)"
ABORTED = "pgbench failed (exit code 2): pgbench: error: Run was aborted"


def facts(log: str, server: str, *, error: str = ABORTED, stderr: str = "") -> Facts:
    problems = problems_since(DATA / log, 0)
    return Facts(error, stderr, problems, server, LOG, DISK, "the disk under /w/runs", True)


def test_postmaster_killed_names_the_stop_and_the_log():
    verdict = explain(facts("postmaster_killed.log", "stopped"))
    assert verdict.reason == (
        f"the PostgreSQL server stopped during the run (see its log: {LOG}: FATAL: "
        "terminating connection due to unexpected postmaster exit)"
    )
    assert verdict.fatal


def test_backend_killed_is_a_crash_restart_with_the_death_line():
    verdict = explain(facts("backend_killed.log", "restarted"))
    assert verdict.reason.startswith(
        "the PostgreSQL server crashed and restarted during the run (see its log: "
    )
    # The postmaster's report of the death, not the FATALs it caused in the other sessions.
    assert "was terminated by signal 9: Killed" in verdict.reason
    assert verdict.fatal


def test_disk_full_names_the_disk_and_postgresql_own_words():
    verdict = explain(facts("disk_full.log", "stopped"))
    assert verdict.reason == (
        f'{DISK} filled up during the run: PostgreSQL could not write to file "pg_wal/'
        'xlogtemp.14447": No space left on device; the server stopped (see its log: '
        f"{LOG})"
    )
    assert verdict.advice == "free some space or use a larger --workdir"
    assert verdict.fatal


def test_disk_full_reported_by_pgbench_alone_on_a_server_pgdyno_does_not_own():
    stderr = (
        "pgbench: error: client 0 script 0 aborted in command 7 query 0: ERROR:  could not "
        'extend file "base/16384/16397": No space left on device\n'
    )
    plain = Facts(ABORTED, stderr, [], "up", None, None, None, False)
    verdict = explain(plain)
    assert verdict.reason.startswith("the server's disk filled up during the run: pgbench:")
    assert "could not extend file" in verdict.reason
    assert verdict.advice == "free some space"  # no --workdir: not pgdyno's server


def test_only_lines_after_the_mark_count():
    text = (DATA / "disk_full.log").read_bytes()
    mark = text.index(b"PANIC")  # a run that started after the PANIC line began
    mark = text.index(b"\n", mark) + 1
    later = problems_since(DATA / "disk_full.log", mark)
    assert "PANIC" not in [p.level for p in later]
    assert later[0].message == "client backend (PID 14447) was terminated by signal 6: Aborted"
    fatal = [p.message for p in later if p.level == "FATAL"]
    assert fatal == ['could not write to file "pg_wal/xlogtemp.14466": No space left on device']


def test_a_log_that_shrank_is_read_from_its_start(tmp_path: Path):
    log = tmp_path / "postgresql.log"
    log.write_bytes((DATA / "postmaster_killed.log").read_bytes())
    assert problems_since(log, 10**9)[0].message.startswith("terminating connection")


def test_an_ordinary_failure_keeps_pgbench_own_line_and_goes_on():
    stderr = (
        "pgbench: error: client 0 script 0 aborted in command 0 query 0: ERROR:  relation "
        '"nope" does not exist\npgbench: error: Run was aborted; the above results are '
        "incomplete.\n"
    )
    error = failure_reason(2, stderr)
    assert error.endswith('ERROR:  relation "nope" does not exist')
    verdict = explain(Facts(error, stderr, [], "up", LOG, DISK, None, True))
    assert (verdict.reason, verdict.fatal) == (error, False)


def test_a_tps_line_is_never_a_reason():
    # Disk full under the run's files: pgbench's stderr stayed empty, its stdout has the summary.
    assert failure_reason(2, "") == "pgbench failed (exit code 2) without an error message"
