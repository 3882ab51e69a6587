"""The on-CPU profile from recorded `perf script` output (tests/data/perf/, see its README):
the parser, the process types from recorded titles, the profile and its stored form."""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console

from pgdyno.collect.cpu_profile import unavailable
from pgdyno.host.perf import CLIENT_BACKEND, parse_script, process_type
from pgdyno.records.health import RunHealth
from pgdyno.records.profile import KERNEL_DSO, CpuProfile, FunctionShare
from pgdyno.records.stored import RunOutcome
from pgdyno.report import content, html
from pgdyno.report.content import summary_rows
from pgdyno.report.load import Selection, load
from pgdyno.results.decode import profile
from pgdyno.results.encode import profile_json
from pgdyno.results.store import ResultsStore
from pgdyno.stats.analysis import analyse
from pgdyno.stats.cpu_profile import cpu_profile, frame_moves, moved, symbols_missing
from pgdyno.terminal.verdict_tables import CPU_HEADING, verdict_table

DATA = Path(__file__).parent.parent / "data" / "perf"
REPORT_FIXTURE = Path(__file__).parent.parent / "data" / "report" / "results.sqlite"


def recorded(name: str) -> tuple[str, dict[int, str]]:
    titles = {}
    for line in (DATA / f"{name}.titles").read_text().splitlines():
        pid, _, title = line.partition(" ")
        titles[int(pid)] = process_type(title)
    plain = DATA / f"{name}.script"
    text = (
        plain.read_text()
        if plain.exists()
        else gzip.decompress((DATA / f"{name}.script.gz").read_bytes()).decode()
    )
    return text, titles


def test_every_sample_of_recorded_output_is_parsed_with_its_call_chain() -> None:
    text, _ = recorded("tpcb-pg18")
    samples = parse_script(text)
    headers = [line for line in text.splitlines() if line and not line[0].isspace()]
    assert len(samples) == len(headers) == 147
    frames = sum(1 for line in text.splitlines() if line[:1] == "\t")
    assert sum(len(s.frames) for s in samples) == frames
    assert all(s.frames for s in samples)
    assert any(f.dso == KERNEL_DSO for s in samples for f in s.frames)


def test_recorded_titles_give_postgresql_process_types() -> None:
    _, types = recorded("tpcb-pg18")
    assert set(types.values()) == {
        "postmaster", "io worker", "checkpointer", "background writer", "walwriter",
        "autovacuum launcher", "logical replication launcher", CLIENT_BACKEND,
    }  # fmt: skip


def test_profile_names_postgres_functions_per_process_type() -> None:
    text, types = recorded("tpcb-pg18")
    samples = parse_script(text)
    found = cpu_profile(samples, types, 99)
    assert found is not None and found.samples == 147
    assert dict(found.by_process) == {CLIENT_BACKEND: 145 / 147, "checkpointer": 2 / 147}
    assert abs(sum(s for _, s in found.by_process) - 1) < 1e-9
    assert 0 < found.kernel_share < 1
    backend = found.functions(CLIENT_BACKEND)
    # the postgres binary keeps its symbols: its functions are named (recorded, so fixed)
    assert {"XLogInsertRecord", "AllocSetAllocLarge"} <= set(backend)
    assert backend["finish_task_switch.isra.0"] > 0.2  # mostly waiting on fsync: the kernel
    assert not symbols_missing(samples)
    assert sum(n for _, n in found.folded) + found.folded_other == 147
    assert all(stack.split(";")[0] in types.values() for stack, _ in found.folded)


def test_bounds_keep_the_largest_and_count_the_rest() -> None:
    text, types = recorded("tpcb-pg18")
    found = cpu_profile(parse_script(text), types, 99, top_per_process=2, max_stacks=5)
    assert found is not None
    assert len(found.folded) == 5 and found.folded_other == 147 - sum(n for _, n in found.folded)
    assert len([f for f in found.top if f.process == CLIENT_BACKEND]) == 2
    counts = [n for _, n in found.folded]
    assert counts == sorted(counts, reverse=True)


def test_stored_form_is_strict_json_and_reads_back() -> None:
    text, types = recorded("select-only-simple-pg18")
    found = cpu_profile(parse_script(text), types, 99)
    assert found is not None
    blob = json.loads(json.dumps(profile_json(found), allow_nan=False))
    assert profile(blob) == found


def test_a_binary_without_symbols_is_told() -> None:
    text, _ = recorded("select-only-simple-pg18")
    assert not symbols_missing(parse_script(text))
    # what `strip` would leave: the same addresses in the same binary, no names
    stripped = re.sub(r"^(\s+[0-9a-f]+) \S+ (\(\S+/bin/postgres\))$", r"\1 [unknown] \2", text,
                      flags=re.MULTILINE)  # fmt: skip
    assert stripped != text
    assert symbols_missing(parse_script(stripped))


def test_moves_between_two_workloads_rank_the_largest_first() -> None:
    a_text, a_types = recorded("select-only-simple-pg18")
    b_text, b_types = recorded("select-only-prepared-pg18")
    a = cpu_profile(parse_script(a_text), a_types, 99)
    b = cpu_profile(parse_script(b_text), b_types, 99)
    assert a is not None and b is not None
    found = moved([a], [b])
    assert [m.function for m in found] == ["base_yyparse"] and moved([a], [a]) == ()
    sizes = [abs(m.change) for m in found]
    assert sizes == sorted(sizes, reverse=True)


def _outcomes(profiles: dict[str, list[CpuProfile]]) -> list[RunOutcome]:
    runs = []
    for round_no in range(len(next(iter(profiles.values())))):
        for name, tps in (("a", 1000.0), ("b", 1500.0)):
            runs.append(
                RunOutcome(
                    len(runs) + 1,
                    name,
                    "ok",
                    "tpcb-like",
                    1,
                    2,
                    round_no + 1,
                    tps + round_no,
                    2.0,
                    1.0,
                    RunHealth(),
                    "18",
                    profile=profiles[name][round_no],
                )
            )
    return runs


def test_verdict_rows_name_the_cpu_functions_that_moved() -> None:
    """Two sets whose runs are the recorded select-only profiles, simple and prepared
    protocol: the verdict row of the prepared set names the parser's function, whose share
    fell (a prepared statement is parsed once), in the terminal's table and the report's."""
    a_text, a_types = recorded("select-only-simple-pg18")
    b_text, b_types = recorded("select-only-prepared-pg18")
    a = cpu_profile(parse_script(a_text), a_types, 99)
    b = cpu_profile(parse_script(b_text), b_types, 99)
    assert a is not None and b is not None
    analysis = analyse(_outcomes({"a": [a] * 4, "b": [b] * 4}), ["a", "b"], "a", "sets")
    base, other = analysis.results
    assert base.cpu_changes == () and other.cpu_changes
    parser = next(c for c in other.cpu_changes if c.function == "base_yyparse")
    assert parser.change < 0
    assert other.cpu_changes == moved([a] * 4, [b] * 4)
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(verdict_table(analysis, "t"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert CPU_HEADING in text and other.cpu_changes[0].text() in text
    rows = summary_rows(analysis)
    assert rows[0]["cpu_moves"] == "" and rows[1]["cpu_moves"].startswith(
        other.cpu_changes[0].text()
    )


# -- the rule that a function "moved", by simulation ------------------------------------------

REPS = 2000
RUNS, SAMPLES = 3, 300  # per set: three 3 s runs of a busy 2-CPU server at 49 Hz (or 2 s at 99)


def _shares(text: str, types: dict[int, str]) -> tuple[list[str], np.ndarray]:
    found = cpu_profile(parse_script(text), types, 99, top_per_process=1000)
    assert found is not None
    names = [f.function for f in found.top]
    p = np.array([f.share for f in found.top])
    return names, p / p.sum()


def _profiles(names: list[str], counts: np.ndarray) -> list[CpuProfile]:
    """Runs as the profiler keeps them: each run's 15 largest functions (ties by name)."""
    found = []
    for row in counts:
        n = int(row.sum())
        kept = sorted(zip(names, row, strict=True), key=lambda kv: (-kv[1], kv[0]))[:15]
        top = tuple(FunctionShare(CLIENT_BACKEND, f, c / n) for f, c in kept if c)
        found.append(CpuProfile(99, n, 0.0, ((CLIENT_BACKEND, 1.0),), top))
    return found


def test_two_sets_of_the_same_server_show_no_move_in_under_5_percent() -> None:
    """A/A: both sets' runs draw their samples from one recorded profile (select-only, 40-odd
    functions); `moved`, the real rule, is asked for the functions that moved. Over 2,000
    comparisons the rate of any move must be under 5% with its 95% upper bound (Monte Carlo
    error of a rate near 1%: about 0.2 points). The samples are drawn independently: the rule
    accounts for sampling error only, not for differences between runs beyond it
    (docs/profiles.md)."""
    names, p = _shares(*recorded("select-only-simple-pg18"))
    rng = np.random.default_rng(34)
    alarms = 0
    for _ in range(REPS):
        a, b = (rng.multinomial(SAMPLES, p, size=RUNS) for _ in range(2))
        alarms += bool(moved(_profiles(names, a), _profiles(names, b)))
    rate = alarms / REPS
    upper = rate + 1.96 * math.sqrt(max(rate, 1 / REPS) * (1 - rate) / REPS)
    assert upper < 0.05, rate


def test_a_function_that_vanishes_is_named() -> None:
    """Power: the parser's function (base_yyparse, 4.5% of the recorded simple-protocol
    profile) vanishes in one set, as with prepared statements; with six runs of 300 samples a
    set it is named first in at least 80% of 500 comparisons (Monte Carlo error about 2
    points)."""
    names, p = _shares(*recorded("select-only-simple-pg18"))
    parser = names.index("base_yyparse")
    q = p.copy()
    q[parser] = 0.0
    q /= q.sum()
    rng = np.random.default_rng(35)
    named = 0
    for _ in range(500):
        a = rng.multinomial(SAMPLES, p, size=6)
        b = rng.multinomial(SAMPLES, q, size=6)
        found = moved(_profiles(names, a), _profiles(names, b))
        named += bool(found) and found[0].function == "base_yyparse"
    assert named / 500 >= 0.8, named


# -- the differential flame graph ------------------------------------------------------------


def _stacks(text: str, types: dict[int, str]) -> tuple[list[str], np.ndarray]:
    found = cpu_profile(parse_script(text), types, 99, max_stacks=100_000)
    assert found is not None and found.folded_other == 0
    counts = np.array([n for _, n in found.folded], dtype=float)
    return [stack for stack, _ in found.folded], counts / counts.sum()


def _stack_runs(stacks: list[str], counts: np.ndarray) -> list[CpuProfile]:
    """Runs as the profiler keeps them: each run's 300 largest call chains, the rest counted."""
    found = []
    for row in counts:
        n = int(row.sum())
        kept = sorted(
            ((s, int(c)) for s, c in zip(stacks, row, strict=True) if c),
            key=lambda kv: (-kv[1], kv[0]),
        )[:300]
        found.append(CpuProfile(99, n, 0.0, (), (), tuple(kept), n - sum(c for _, c in kept)))
    return found


def test_the_differential_flame_graph_colours_no_frame_in_under_5_percent_of_a_a() -> None:
    """A/A: both sets' runs draw their call chains from one recorded profile (select-only,
    192 chains); `frame_moves`, the real rule, colours a frame in under 5% of 1,000
    comparisons with its 95% upper bound (about 2% measured: Monte Carlo error 0.45 points).
    Frames along one chain share their samples, so they are far fewer independent tests than
    frames."""
    stacks, p = _stacks(*recorded("select-only-simple-pg18"))
    rng = np.random.default_rng(341)
    alarms = 0
    for _ in range(1000):
        a, b = (_stack_runs(stacks, rng.multinomial(SAMPLES, p, size=RUNS)) for _ in range(2))
        moves = frame_moves(a, b)
        assert moves and {m.path for m in moves if m.samples} <= {
            ";".join(s.split(";")[:d]) for s in stacks for d in range(1, len(s.split(";")) + 1)
        }
        alarms += any(m.change for m in moves)
    rate = alarms / 1000
    upper = rate + 1.96 * math.sqrt(max(rate, 1 / 1000) * (1 - rate) / 1000)
    assert upper < 0.05, rate


def test_the_differential_flame_graph_of_prepared_statements_names_the_parser_gone(
    tmp_path: Path,
) -> None:
    """The recorded simple and prepared protocol profiles: drawn in the prepared runs' shape,
    every frame's width is its samples there, the shares add up along each chain, and the
    parser's frame (gone: a prepared statement is parsed once) is named in the caption."""
    a_text, a_types = recorded("select-only-simple-pg18")
    b_text, b_types = recorded("select-only-prepared-pg18")
    a = cpu_profile(parse_script(a_text), a_types, 99)
    b = cpu_profile(parse_script(b_text), b_types, 99)
    assert a is not None and b is not None
    moves = {m.path: m for m in frame_moves([a], [b])}
    parser = next(m for path, m in moves.items() if path.endswith(";base_yyparse"))
    assert parser.samples == 0 and parser.after == 0 and parser.change == -parser.before < -0.01
    assert moves["client backend"].samples == b.samples - b.folded_other
    assert frame_moves([a], [a]) and not any(m.change for m in frame_moves([a], [a]))

    # In a report of a recorded comparison whose baseline's runs took the simple profile and
    # the other set's runs the prepared one: a graph per cell, its caption naming the parser.
    copy = tmp_path / "results.sqlite"
    shutil.copy(REPORT_FIXTURE, copy)  # opening migrates: never touch the recorded file
    with ResultsStore(copy) as store:
        data = load(store, Selection(comparison_id=1))
    runs = [replace(r, profile=a if r.set_name == "small-wal" else b) for r in data.runs]
    report = content.build(replace(data, runs=runs), "2026-11-28T00:00:00+00:00", "test")
    charts = report["cpu_flames"]
    assert len(charts) == len(report["cells"]) >= 1
    chart = charts[0]
    trace = chart["figure"]["data"][0]
    assert trace["type"] == "icicle" and "large-wal against small-wal" in str(chart["figure"])
    assert "base_yyparse (client backend;[unknown];[unknown]) -3.8 points" in chart["note"]
    children: dict[str, int] = {}
    for parent, value in zip(trace["parents"], trace["values"], strict=True):
        children[parent] = children.get(parent, 0) + value
    widths = dict(zip(trace["ids"], trace["values"], strict=True))
    assert all(total <= widths[parent] for parent, total in children.items() if parent)
    colours = trace["marker"]["colors"]
    assert len(colours) == len(trace["ids"]) and max(map(abs, colours)) > 0
    assert json.loads(json.dumps(chart, allow_nan=False)) == chart
    page = html.render(report)
    assert "Differential flame graphs" in page and 'id="flame-diff-1"' in page


def test_why_a_session_takes_no_profile_is_one_line(tmp_path: Path) -> None:
    """Over --ssh, for a server whose postmaster is not here, and with no perf on the PATH
    (an empty directory): one line each; with perf on the PATH, nothing to say."""
    no_perf = {"PATH": str(tmp_path)}
    assert unavailable(no_perf, 10, remote=True) == (
        "CPU profile not taken: perf runs on this host only, not over --ssh"
    )
    assert "postmaster is not a process of this host" in str(unavailable(no_perf, None, False))
    said = unavailable(no_perf, 10, remote=False)
    assert said is not None and "perf is not installed" in said and "\n" not in said
    (tmp_path / "perf").write_text("#!/bin/sh\n")
    (tmp_path / "perf").chmod(0o755)
    assert unavailable(no_perf, 10, remote=False) is None
