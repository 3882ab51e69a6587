"""`pgdyno tune --out DIR`: the files rendered from a Configuration, and the writer's guard.

Configurations are built by hand: files.py is a pure function of them. That PostgreSQL really
accepts the PostgreSQL files is checked in tests/integration/test_tune_files_live.py.
"""

from __future__ import annotations

import datetime
import stat
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.records.tune import TuneFacts
from pgdyno.tune.files import (
    ALTER_SQL,
    MARKER,
    PG_CONF,
    README,
    SYSCTL,
    THP,
    UDEV,
    WIDTH,
    render_files,
)
from pgdyno.tune.model import Configuration, Setting
from pgdyno.tune.out_dir import write_files

DAY = datetime.date(2026, 5, 1)
FACTS = TuneFacts("oltp", connections=300)  # the files do not read the facts


def pg(name: str, value: str, **kw: object) -> Setting:
    return Setting("postgresql", name, value, f"why {name}", **kw)  # type: ignore[arg-type]


def host(name: str, value: str, **kw: object) -> Setting:
    return Setting("host", name, value, f"why {name}", takes_effect="now", **kw)  # type: ignore[arg-type]


def disk(name: str, value: str, device: str, **kw: object) -> Setting:
    return Setting("device", name, value, f"why {name}", device=device, takes_effect="now", **kw)  # type: ignore[arg-type]


def config(*settings: Setting, **kw: object) -> Configuration:
    return Configuration("pgdyno", "oltp", settings, FACTS, **kw)  # type: ignore[arg-type]


MIXED = config(
    pg("shared_buffers", "4GB", current="128MB", takes_effect="restart"),
    pg("huge_pages", "on", takes_effect="restart"),
    pg("work_mem", "16MB"),
    pg("io_method", "worker", takes_effect="restart"),
    pg("io_method", "io_uring", status="measure", takes_effect="restart"),
    host("vm.nr_hugepages", "2200", current="0"),
    host("vm.dirty_bytes", "536870912", current="0"),
    host("vm.swappiness", "1", current="60"),
    host("vm.overcommit_memory", "2", status="review"),
    host("kernel.sched_autogroup_enabled", "0", status="measure"),
    host("transparent_hugepage/enabled", "never", current="always"),
    host("transparent_hugepage/defrag", "never"),
    disk("scheduler", "mq-deadline", "vda", current="none"),
    disk("read_ahead_kb", "4096", "vda", current="128"),
    disk("scheduler", "none", "nvme0n1"),
    notes=("pgtune's io_method = io_uring left out: this build has no io_uring",),
)


def render(cfg: Configuration) -> dict[str, str]:
    return render_files(cfg, generated_by="pgdyno tune 0.1.0", generated_on=DAY)


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_a_mixed_configuration_writes_every_file_each_with_its_header() -> None:
    files = render(MIXED)
    assert list(files) == [PG_CONF, ALTER_SQL, SYSCTL, UDEV, THP, README]
    for name, text in files.items():
        first = text.splitlines()[0]
        assert MARKER in first, name
        assert "pgdyno tune 0.1.0, 2026-05-01. Review before deploying." in first
        assert "Advice of pgdyno for the profile oltp." in text
        assert "Install:" in text
        assert text.endswith("\n") and not text.endswith("\n\n")


def test_the_include_file_has_each_setting_with_its_why_and_when_it_takes_effect() -> None:
    text = render(MIXED)[PG_CONF]
    assert "include_if_exists = 'postgresql.pgdyno.conf'" in text
    assert "postgresql.auto.conf (ALTER SYSTEM) overrides include files" in text
    body = lines(text)
    at = body.index("shared_buffers = '4GB'")
    assert body[at - 2 : at] == [
        "# why shared_buffers (in effect now: 128MB)",
        "# takes effect: restart",
    ]
    at = body.index("work_mem = '16MB'")
    assert body[at - 1] == "# takes effect: reload"
    assert "io_method = 'worker'" in body
    assert "# measure first: io_method = 'io_uring'" in body
    assert not [line for line in body if "io_uring" in line and not line.startswith("#")]


def test_the_alter_system_script_says_the_same_and_reloads() -> None:
    body = lines(render(MIXED)[ALTER_SQL])
    statements = [line for line in body if line and not line.startswith("--")]
    assert statements == [
        "SET standard_conforming_strings = on;",
        "ALTER SYSTEM SET shared_buffers = '4GB';  -- takes effect: restart",
        "ALTER SYSTEM SET huge_pages = 'on';  -- takes effect: restart",
        "ALTER SYSTEM SET work_mem = '16MB';  -- takes effect: reload",
        "ALTER SYSTEM SET io_method = 'worker';  -- takes effect: restart",
        "SELECT pg_reload_conf();",
    ]
    assert (
        "-- measure first: ALTER SYSTEM SET io_method = 'io_uring';  -- takes effect: restart"
        in body
    )
    assert (
        body[-1]
        == "-- Restart PostgreSQL for these to take effect: shared_buffers, huge_pages, io_method."
    )


def test_the_sysctl_file_has_sysctls_only_and_comments_out_what_needs_a_look() -> None:
    body = lines(render(MIXED)[SYSCTL])
    settings = [line for line in body if line and not line.startswith("#")]
    assert settings == [
        "vm.nr_hugepages = 2200",
        "vm.dirty_bytes = 536870912",
        "vm.swappiness = 1",
    ]
    assert "# review first: vm.overcommit_memory = 2" in body
    assert "# measure first: kernel.sched_autogroup_enabled = 0" in body
    assert "#   install -m 644 99-pgdyno.conf /etc/sysctl.d/ && sysctl --system" in body
    assert not [line for line in body if "transparent_hugepage" in line]
    at = body.index("vm.swappiness = 1")
    assert body[at - 1] == "# why vm.swappiness (in effect now: 60)"


def test_the_udev_rule_sets_both_queue_settings_of_each_disk() -> None:
    body = lines(render(MIXED)[UDEV])
    rules = [line for line in body if line and not line.startswith("#")]
    assert rules == [
        'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="vda", '
        'ATTR{queue/scheduler}="mq-deadline", ATTR{queue/read_ahead_kb}="4096"',
        'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="nvme0n1", ATTR{queue/scheduler}="none"',
    ]
    assert "udevadm trigger --subsystem-match=block" in "\n".join(body)


def test_the_tmpfiles_entry_turns_thp_off_and_names_the_boot_option() -> None:
    text = render(MIXED)[THP]
    entries = [line for line in lines(text) if line and not line.startswith("#")]
    assert entries == [
        "w /sys/kernel/mm/transparent_hugepage/enabled - - - - never",
        "w /sys/kernel/mm/transparent_hugepage/defrag - - - - never",
    ]
    assert "transparent_hugepage=never on the kernel command line" in text
    assert "systemd-tmpfiles --create pgdyno-thp.conf" in text


def test_the_readme_gives_the_order_and_a_rollback_for_each_file() -> None:
    text = render(MIXED)[README]
    install = text.index("Install:")
    sysctl, thp, udev, postgres = (
        text.index(f"install -m 644 {SYSCTL}", install),
        text.index(f"install -m 644 {THP}", install),
        text.index(f"install -m 644 {UDEV}", install),
        text.index(f"psql -v ON_ERROR_STOP=1 -f {ALTER_SQL}", install),
    )
    restart = text.index("restart PostgreSQL (needed by shared_buffers, huge_pages, io_method)")
    assert sysctl < thp < udev < postgres < restart
    assert "huge pages must be reserved before PostgreSQL restarts" in text
    for line in (
        "    ALTER SYSTEM RESET shared_buffers;",
        "    ALTER SYSTEM RESET io_method;",
        "    sysctl -w vm.nr_hugepages=0",
        "    sysctl -w vm.swappiness=60",
        "    sysctl -w vm.dirty_ratio=PREVIOUS  (vm.dirty_bytes was 0: the ratio was in effect)",
        "    echo always > /sys/kernel/mm/transparent_hugepage/enabled",
        "    echo PREVIOUS > /sys/kernel/mm/transparent_hugepage/defrag  (previous value unknown)",
        "    echo none > /sys/block/vda/queue/scheduler",
        "    echo 128 > /sys/block/vda/queue/read_ahead_kb",
        "  pgtune's io_method = io_uring left out: this build has no io_uring",
    ):
        assert line in lines(text), line
    assert lines(text).count("    ALTER SYSTEM RESET io_method;") == 1
    assert "vm.overcommit_memory" not in text  # commented out: nothing to roll back
    assert "pgdyno tune --apply" in text and "pgdyno rollback" in text


def test_a_postgresql_only_configuration_writes_no_host_files() -> None:
    files = render(config(pg("work_mem", "16MB"), pg("jit", "off")))
    assert list(files) == [PG_CONF, ALTER_SQL, README]
    readme = files[README]
    assert SYSCTL not in readme and UDEV not in readme and THP not in readme
    assert "restart PostgreSQL" not in readme
    assert "Restart PostgreSQL" not in files[ALTER_SQL]


def test_a_quote_or_a_backslash_is_quoted_as_each_syntax_needs() -> None:
    files = render(config(pg("application_name", "it's"), pg("search_path", "a\\b")))
    assert "application_name = 'it''s'" in lines(files[PG_CONF])
    assert "search_path = 'a\\\\b'" in lines(files[PG_CONF])  # the conf parser reads \\ as \
    sql = lines(files[ALTER_SQL])
    assert "ALTER SYSTEM SET application_name = 'it''s';  -- takes effect: reload" in sql
    assert "ALTER SYSTEM SET search_path = 'a\\b';  -- takes effect: reload" in sql


def test_comments_are_wrapped_and_cannot_start_a_line_of_their_own() -> None:
    why = "a long reason " * 20 + "\nvm.swappiness = 100"
    text = render(config(Setting("host", "vm.dirty_bytes", "1", why)))[SYSCTL]
    body = lines(text)
    assert "vm.swappiness = 100" not in body
    comments = [line for line in body[4:] if line.startswith("# ")]
    assert len(comments) > 2
    assert all(len(line) <= WIDTH for line in comments)


@pytest.mark.parametrize(
    "device",
    ["vda*", "sd[a-z]", 'vda", RUN+="/bin/sh -c reboot', "vda\n", "", None, "../vda", "vd a"],
)
def test_a_disk_name_that_could_inject_udev_syntax_is_refused(device: str | None) -> None:
    cfg = config(Setting("device", "scheduler", "none", "why", device=device))
    with pytest.raises(UsageError, match="is not a disk name a udev rule can match safely"):
        render(cfg)


@pytest.mark.parametrize(
    "setting",
    [
        pg("work_mem", "4MB\nshared_buffers = '1TB'"),
        pg("work_mem", "4MB\r"),
        host("vm.swappiness", "1\n"),
        host("vm.swappiness", " 1"),
        pg("work_mem", ""),
    ],
)
def test_a_value_with_a_control_character_or_padding_is_refused(setting: Setting) -> None:
    with pytest.raises(UsageError, match="no configuration file can hold"):
        render(config(setting))


@pytest.mark.parametrize(
    "setting",
    [
        disk("scheduler", 'none" RUN+="x', "vda"),
        disk("scheduler", "none x", "vda"),
        host("transparent_hugepage/enabled", "never x"),
    ],
)
def test_a_udev_or_tmpfiles_value_must_be_one_plain_word(setting: Setting) -> None:
    with pytest.raises(UsageError, match="not a plain word"):
        render(config(setting))


def test_a_name_postgresql_cannot_hold_is_refused() -> None:
    with pytest.raises(UsageError, match="is not a PostgreSQL setting name"):
        render(config(pg("work_mem = 1; DROP", "4MB")))


def test_a_host_setting_no_file_can_carry_is_listed_in_the_readme() -> None:
    files = render(config(host("cpu_governor", "performance")))
    assert list(files) == [README]
    assert "  cpu_governor = performance: why cpu_governor" in lines(files[README])


# -- write_files --------------------------------------------------------------------------------


def test_files_are_written_readable_into_a_new_directory(tmp_path: Path) -> None:
    out = tmp_path / "a" / "tune"
    files = render(MIXED)
    written = write_files(out, files)
    assert written == [out / name for name in files]
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    for path in written:
        assert path.read_text() == files[path.name]
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in out.iterdir()) == sorted(files)  # no temp file left


def test_a_file_pgdyno_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / SYSCTL).write_text("vm.swappiness = 10\n")
    with pytest.raises(UsageError, match=f"{SYSCTL} exists and was not written by pgdyno"):
        write_files(tmp_path, render(MIXED))
    assert (tmp_path / SYSCTL).read_text() == "vm.swappiness = 10\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [SYSCTL]  # nothing else written either


def test_a_link_or_a_directory_in_the_way_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text(f"# {MARKER} looks like ours\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / README).symlink_to(target)
    (out / PG_CONF).mkdir()
    for name in (README, PG_CONF):
        with pytest.raises(UsageError, match="was not written by pgdyno"):
            write_files(out, {name: "x\n"})
    assert (out / README).is_symlink() and target.read_text().endswith("looks like ours\n")


def test_files_of_an_earlier_run_are_replaced_and_stale_ones_removed(tmp_path: Path) -> None:
    write_files(tmp_path, render(MIXED))
    (tmp_path / "notes.txt").write_text("mine\n")
    files = render(config(pg("work_mem", "32MB")))
    write_files(tmp_path, files)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, "notes.txt"])
    assert "work_mem = '32MB'" in (tmp_path / PG_CONF).read_text()
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_out_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is not a directory"):
        write_files(tmp_path / "file", {README: "x\n"})


def test_a_name_with_a_final_line_break_is_refused() -> None:
    with pytest.raises(UsageError, match="is not a PostgreSQL setting name"):
        render(config(pg("work_mem\n", "4MB")))
    with pytest.raises(UsageError, match="is not a block queue setting"):
        render(config(disk("scheduler\n", "none", "vda")))
    files = render(config(host("vm.swappiness\n", "1")))  # not a sysctl name: README only
    assert list(files) == [README]
    assert "  vm.swappiness = 1: why vm.swappiness" in lines(files[README])


# -- no value starts a line of its own, whatever the template shows ------------------------------

INJECTED = "INJECTED = 1"


@pytest.mark.parametrize("field", ["name", "value", "why", "current", "device", "takes_effect"])
@pytest.mark.parametrize("break_", ["\n", "\r", "\r\n", "\x0b", "\x1b"])
@pytest.mark.parametrize("layer", ["postgresql", "host", "device"])
def test_a_line_break_in_any_field_never_starts_a_line(field: str, break_: str, layer: str) -> None:
    """Each field of each layer's setting, with a line break and a line after it: the files are
    refused, or that text stays inside the line it was in."""
    name = {"postgresql": "work_mem", "host": "vm.swappiness", "device": "scheduler"}[layer]
    fields: dict[str, str] = {"name": name, "value": "4", "why": "a reason", "current": "1",
                              "device": "vda", "takes_effect": "reload"}  # fmt: skip
    fields[field] += break_ + INJECTED
    setting = Setting(layer, fields["name"], fields["value"], fields["why"],  # type: ignore[arg-type]
                      current=fields["current"], device=fields["device"],
                      takes_effect=fields["takes_effect"])  # type: ignore[arg-type]  # fmt: skip
    try:
        files = render(config(setting))
    except UsageError:
        return
    for text in files.values():
        assert not any(line.startswith(INJECTED) for line in text.splitlines()), text


def test_takes_effect_with_a_line_break_is_refused_in_the_alter_system_script() -> None:
    """Before the templates, ALTER SYSTEM's trailing comment wrote takes_effect unchecked."""
    setting = pg("work_mem", "4MB", takes_effect="reload\nALTER SYSTEM SET fsync = off;")
    with pytest.raises(UsageError, match="would start a line of its own in a configuration file"):
        render(config(setting))
