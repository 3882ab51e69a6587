"""The policy data a reviewer reads (data/host_settings.toml, data/pg_settings_policy.toml) is
well-formed, names real settings, and decides as documented."""

from __future__ import annotations

import pytest

from pgdyno.errors import UsageError
from pgdyno.host.knobs import BLOCK_SETTINGS
from pgdyno.plan.model import BlockSpec
from pgdyno.plan.policy import (
    Allowed,
    check_pg_name,
    check_sysctl_name,
    check_sysctl_value,
    host_policy,
    integer_range,
    refused_pg_settings,
    sysctl_rule,
)
from pgdyno.postgres.settings_catalog import recorded_majors, recorded_settings

C_TYPES = {
    "int": (-(2**31), 2**31 - 1),
    "uint": (0, 2**32 - 1),
    "long": (-(2**63), 2**63 - 1),
    "ulong": (0, 2**64 - 1),
}


def test_types_are_the_c_types():
    assert host_policy().types == C_TYPES


def test_every_rule_says_why_and_has_a_range_inside_its_type():
    for rule in host_policy().rules:
        assert rule.why.strip(), rule.pattern
        if not rule.allow:
            assert rule.type is None, rule.pattern  # refused: nothing to bound
            continue
        assert rule.type in C_TYPES, rule.pattern
        _name, low, high = integer_range(rule)
        assert C_TYPES[rule.type][0] <= low <= high <= C_TYPES[rule.type][1], rule.pattern


def test_exact_names_come_before_the_patterns_that_hold_them():
    rules = host_policy().rules
    for i, rule in enumerate(rules):
        if "*" in rule.pattern:
            continue
        assert sysctl_rule(rule.pattern) == rule, f"{rule.pattern} is shadowed by an earlier rule"
        assert all(r.pattern != rule.pattern for r in rules[:i])


def test_block_settings_are_those_pgdyno_changes():
    assert host_policy().block == BLOCK_SETTINGS
    assert set(BlockSpec.model_fields) == set(BLOCK_SETTINGS)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("vm.dirty_ratio", True), ("vm/dirty_ratio", True), ("vm.some_future_knob", True),
        ("kernel.sched_autogroup_enabled", True), ("kernel.sched_migration_cost_ns", True),
        ("kernel.numa_balancing", True), ("kernel.shmmax", True), ("kernel.shmall", True),
        ("kernel.shmmni", True), ("fs.file-max", True),
        ("kernel.core_pattern", False), ("kernel.modprobe", False), ("kernel.poweroff_cmd", False),
        ("kernel.numa_balancing_promote_rate_limit_MBps", False), ("kernel.shm_rmid_forced", False),
        ("fs.suid_dumpable", False), ("fs.file-nr", False), ("net.core.somaxconn", False),
        ("VM.dirty_ratio", False), ("vm.mmap_min_addr", False), ("vm.drop_caches", False),
        ("kernel.printk", False), ("dev.tty.ldisc_autoload", False),
    ],
)  # fmt: skip
def test_which_sysctls_a_plan_may_change(name: str, allowed: bool):
    if allowed:
        check_sysctl_name(name, Allowed())
    else:
        with pytest.raises(UsageError, match=f"--allow-sysctl {name.replace('/', '.')} to allow"):
            check_sysctl_name(name, Allowed())
        check_sysctl_name(name, Allowed.of((name,)))  # allowed on the command line


@pytest.mark.parametrize(
    ("name", "text", "ok"),
    [
        ("vm.dirty_ratio", "0", True), ("vm.dirty_ratio", "100", True),
        ("vm.dirty_ratio", "101", False), ("vm.swappiness", "200", True),
        ("vm.swappiness", "201", False), ("vm.dirty_bytes", "8191", False),
        ("vm.dirty_bytes", "18446744073709551615", True),
        ("vm.dirty_bytes", "18446744073709551616", False),
        ("vm.lowmem_reserve_ratio", "256 256 32 0 0", True),
        ("vm.lowmem_reserve_ratio", "256 2147483648", False),
        ("vm.dirty_ratio", "twenty", False),
        ("kernel.sched_rt_runtime_us", "-1", True), ("kernel.sched_rt_runtime_us", "-2", False),
        ("kernel.some_other", "99999999999999999999999", False),  # allowed: still 64 bits at most
        ("kernel.some_other", "some text", True),  # no type known: the kernel check decides
    ],
)  # fmt: skip
def test_sysctl_values_are_held_to_the_kernel_type(name: str, text: str, ok: bool):
    rule = sysctl_rule(name)
    if ok:
        check_sysctl_value(name, rule, text)
    else:
        with pytest.raises(UsageError, match=f"sysctl {name}"):
            check_sysctl_value(name, rule, text)


def test_refused_pg_settings_are_real_settings():
    known = {name.lower() for major in recorded_majors() for name in recorded_settings(major)}
    distribution_only = {"extension_destdir"}  # Debian's builds (postgres --describe-config)
    for name, why in refused_pg_settings().items():
        assert name in known | distribution_only, f"{name}: no such setting in 14-18"
        assert why.strip() and not why.endswith("."), name  # the message adds its own stop


def test_pg_settings_refused_unless_allowed():
    with pytest.raises(UsageError, match=r"pass --allow-pg-setting archive_command to allow it\.$"):
        check_pg_name("Archive_Command", Allowed())
    check_pg_name("Archive_Command", Allowed.of(pg_settings=("archive_command",)))
    check_pg_name("work_mem", Allowed())
