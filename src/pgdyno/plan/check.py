"""Check a plan against the machine and the PostgreSQL versions it names, changing nothing.

Every PostgreSQL setting is checked against the target version's own pg_settings (read from
its sandbox, started for a moment if it is not running), every sysctl and block-device setting
against the running kernel. The first problem becomes one sentence naming the plan's file,
line and key, so an invalid plan fails in seconds rather than after an hour of runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.errors import PgdynoError, UsageError
from pgdyno.host.knobs import Knob, validate
from pgdyno.plan.load import Plan
from pgdyno.plan.model import SetSpec, applied_sets
from pgdyno.postgres.binaries import Binaries, resolve
from pgdyno.postgres.settings_meta import SettingMeta, check_setting

DEFAULT_PG_VERSION = 18  # the bundled version: a plan that names none runs the same everywhere

MetaLoader = Callable[[Binaries], Mapping[str, SettingMeta]]


@dataclass(frozen=True)
class CheckedSet:
    """A set as it will be applied: binaries found, values normalised."""

    spec: SetSpec  # as applied (a ladder step holds the steps before it)
    binaries: Binaries
    pg: dict[str, str]  # postgresql.conf text per setting
    host: list[tuple[Knob, str]] = field(default_factory=list)  # sysctls, then block settings

    @property
    def name(self) -> str:
        return self.spec.name

    def requested(self) -> dict[str, object]:
        return {
            "pg": self.pg,
            "host": {str(knob): value for knob, value in self.host},
            "postgres": self.binaries.version,
        }


def _located(plan: Plan, path: tuple[str | int, ...], exc: PgdynoError) -> UsageError:
    message = str(exc)
    return UsageError(f"{plan.where(path)}: {message}")


def set_binaries(plan: Plan, index: int, spec: SetSpec, cache_dir: Path) -> Binaries:
    source = "pg_bin" if spec.pg_bin else "pg_version"
    try:
        if spec.pg_bin:
            return resolve(Path(spec.pg_bin), None, cache_dir)
        return resolve(None, spec.pg_version or DEFAULT_PG_VERSION, cache_dir)
    except PgdynoError as exc:
        own = source in plan.spec.sets[index].model_fields_set
        raise _located(plan, ("set", index, source) if own else (source,), exc) from None


def check_plan(
    plan: Plan,
    *,
    cache_dir: Path,
    meta_for: MetaLoader,
    data_disk: str | None,
    is_root: bool,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
) -> list[CheckedSet]:
    """The plan's sets, checked and ready to apply; UsageError at the first problem.

    `data_disk` is the whole disk under the sandbox data directory (None when it has no block
    device, e.g. tmpfs); `meta_for` reads pg_settings of a version.
    """
    applied = applied_sets(plan.spec)
    binaries = [set_binaries(plan, i, s, cache_dir) for i, s in enumerate(applied)]
    metas: dict[str, Mapping[str, SettingMeta]] = {}
    for b in binaries:
        if b.version not in metas:
            metas[b.version] = meta_for(b)
    # Values are checked where they are written (each step's own table); a ladder step then
    # applies them on every version its own and later steps run.
    checked_pg: list[dict[str, str]] = [{} for _ in applied]
    checked_host: list[dict[Knob, str]] = [{} for _ in applied]
    for i, own in enumerate(plan.spec.sets):
        users = range(i, len(applied)) if plan.spec.mode == "ladder" else range(i, i + 1)
        for name, value in own.pg.items():
            for j in users:
                meta, version = metas[binaries[j].version], str(binaries[j].major)
                try:
                    text = check_setting(meta, name, value, version)
                except PgdynoError as exc:
                    raise _located(plan, ("set", i, "pg", name), exc) from None
                checked_pg[j][name] = text
        knobs: list[tuple[tuple[str | int, ...], Knob, object]] = []
        for name, value in own.sysctl.items():
            path: tuple[str | int, ...] = ("set", i, "sysctl", name)
            try:
                knobs.append((path, Knob.sysctl(name, proc_root=proc_root), value))
            except PgdynoError as exc:
                raise _located(plan, path, exc) from None
        for name, value in own.block_settings.items():
            path = ("set", i, "block", name)
            if data_disk is None:
                raise UsageError(
                    f"{plan.where(path)}: the sandbox data directory is not on a block device "
                    "(tmpfs, overlay?), so there is no queue setting to change; remove the "
                    "block table or use a --workdir on a disk."
                )
            knobs.append((path, Knob.block(data_disk, name, sys_root=sys_root), value))
        for path, knob, raw in knobs:
            try:
                text = validate(knob, raw, is_root=is_root)
            except PgdynoError as exc:
                raise _located(plan, path, exc) from None
            for j in users:
                checked_host[j][knob] = text
    return [
        CheckedSet(spec, binaries[j], checked_pg[j], list(checked_host[j].items()))
        for j, spec in enumerate(applied)
    ]
