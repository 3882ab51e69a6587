"""The on-CPU profile from recorded `perf script` output (tests/data/perf/, see its README):
the parser, the process types from recorded titles, the profile and its stored form."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pgdyno.host.perf import CLIENT_BACKEND, parse_script, process_type
from pgdyno.records.profile import KERNEL_DSO
from pgdyno.results.decode import profile
from pgdyno.results.encode import profile_json
from pgdyno.stats.cpu_profile import cpu_profile, moved, symbols_missing

DATA = Path(__file__).parent.parent / "data" / "perf"


def recorded(name: str) -> tuple[str, dict[int, str]]:
    titles = {}
    for line in (DATA / f"{name}.titles").read_text().splitlines():
        pid, _, title = line.partition(" ")
        titles[int(pid)] = process_type(title)
    return (DATA / f"{name}.script").read_text(), titles


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
    text, types = recorded("select-only-pg18")
    found = cpu_profile(parse_script(text), types, 99)
    assert found is not None
    blob = json.loads(json.dumps(profile_json(found), allow_nan=False))
    assert profile(blob) == found


def test_a_binary_without_symbols_is_told() -> None:
    text, _ = recorded("select-only-pg18")
    assert not symbols_missing(parse_script(text))
    # what `strip` would leave: the same addresses in the same binary, no names
    stripped = re.sub(r"^(\s+[0-9a-f]+) \S+ (\(\S+/bin/postgres\))$", r"\1 [unknown] \2", text,
                      flags=re.MULTILINE)  # fmt: skip
    assert stripped != text
    assert symbols_missing(parse_script(stripped))


def test_moves_between_two_workloads_rank_the_largest_first() -> None:
    a_text, a_types = recorded("select-only-pg18")
    b_text, b_types = recorded("tpcb-pg18")
    a = cpu_profile(parse_script(a_text), a_types, 99)
    b = cpu_profile(parse_script(b_text), b_types, 99)
    assert a is not None and b is not None
    found = moved([a], [b])
    assert found and moved([a], [a]) == ()
    sizes = [abs(m.change) for m in found]
    assert sizes == sorted(sizes, reverse=True)
