"""A PostgreSQL setting the server would refuse: one sentence naming it and PostgreSQL's reason.

`--set` is checked against the target version's settings before any server is (re)started, so
a running sandbox keeps running; what only the server can tell is read from its log when the
start fails (Sandbox.start, used by bench, compare and `sandbox start` alike).
"""

from __future__ import annotations

import pytest

from conftest import one_clear_sentence as clear_sentence
from pgdyno.errors import UsageError
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.cluster import Sandbox

BAD = {
    "work_mem=1kB": "work_mem = 1kB is out of range for PostgreSQL ",
    "work_mem=banana": "work_mem = banana is not a number: ",
    "no_such_thing=1": "has no setting 'no_such_thing': ",
    "enable_seqscan=maybe": "enable_seqscan = maybe is not valid in PostgreSQL ",
}


def one_clear_sentence(stderr: str) -> str:
    assert "contains errors" not in stderr, stderr  # PostgreSQL's reason, not its summary
    return clear_sentence(stderr)


@pytest.mark.parametrize("assignment", BAD)
def test_sandbox_start_refuses_before_restarting(box: Sandbox, workdir, run_cli, assignment):
    running = box.postmaster_pid()
    result = run_cli(workdir, "sandbox", "start", "--pg-version", "18", "--set", assignment)
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert BAD[assignment] in line
    assert box.postmaster_pid() == running  # checked first: the sandbox was not restarted


@pytest.mark.parametrize("assignment", ["work_mem=1kB", "no_such_thing=1"])
def test_bench_refuses_before_starting_anything(workdir, run_cli, assignment):
    result = run_cli(workdir, "bench", "--pg-version", "18", "-T", "1", "--set", assignment)
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert BAD[assignment] in line
    assert "the plan" not in line  # the advice names where the value came from
    assert not (workdir / "clusters").exists()  # no sandbox made for a doomed run


def test_a_line_break_in_a_value_is_refused(workdir, run_cli):
    result = run_cli(
        workdir, "sandbox", "start", "--pg-version", "18", "--set", "application_name=a\nb"
    )
    line = one_clear_sentence(result.stderr)
    assert result.code == 2
    assert "the value of application_name holds a control character" in line


@pytest.mark.parametrize(
    ("settings", "named", "reason"),
    [
        ({"work_mem": "1kB"}, "work_mem = '1kB'",
         '1 kB is outside the valid range for parameter "work_mem" (64 '),
        ({"work_mem": "banana"}, "work_mem = 'banana'",
         'invalid value for parameter "work_mem": "banana"'),
        ({"no_such_thing": "1"}, "no_such_thing = '1'",
         'unrecognized configuration parameter "no_such_thing"'),
    ],
)  # fmt: skip
def test_server_log_fallback_names_the_setting_and_postgresql_reason(
    box: Sandbox, binaries: Binaries, settings: dict[str, str], named: str, reason: str
):
    """What reaches the server anyway (no pre-check here): its own words, from this start."""
    box.stop()
    with pytest.raises(UsageError) as refused:
        box.start(settings, owner_pid=None, binaries=binaries)
    message = str(refused.value)
    assert message.startswith(f"PostgreSQL {binaries.version} refused {named} and did not start")
    assert reason in message and str(box.log_file) in message
    assert "contains errors" not in message
    box.start({}, owner_pid=None, binaries=binaries)  # the sandbox is fine afterwards
    assert box.postmaster_pid() is not None
