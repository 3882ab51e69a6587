"""Dataset scale presets (seed 002, Vondra) and the free-disk cap: pure functions.

The presets and the sizes they rest on are data, in ``data/scales.toml``. The same presets size
the TPC-C-like workload's dataset, whose scale is its number of warehouses (their size:
pgdyno.tpcc.load.dataset_bytes).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pgdyno.errors import DatasetError, UsageError
from pgdyno.tpcc.load import dataset_bytes as tpcc_bytes

MIB = 1024**2
GIB = 1024**3
SCALES_FILE = Path(str(resources.files("pgdyno") / "data" / "scales.toml"))


@dataclass(frozen=True)
class Preset:
    """`fraction` of the host's usable RAM (`of` = "memory") or of shared_buffers."""

    name: str
    of: Literal["memory", "shared_buffers"]
    fraction: Fraction
    why: str


def _preset(name: str, row: dict[str, Any]) -> Preset:
    if row.get("of") not in ("memory", "shared_buffers"):
        raise ValueError(f"{SCALES_FILE}: preset {name!r} needs of = 'memory' or 'shared_buffers'")
    # From the decimal text, so that 0.5 of an odd byte count rounds down as `// 2` would.
    return Preset(name, row["of"], Fraction(str(row["fraction"])), str(row.get("why", "")))


_DATA = tomllib.loads(SCALES_FILE.read_text())
# Seed 002: every 100,000 pgbench_accounts rows (one scale unit) take about 15 MB with indexes.
BYTES_PER_SCALE: int = _DATA["mib_per_scale"] * MIB
# On disk at once: the template, the bench copy, and room for WAL and temporary files.
DISK_FACTOR: float = _DATA["disk_factor"]
DISK_RESERVE: int = _DATA["disk_reserve_gib"] * GIB
PRESET_TABLE: dict[str, Preset] = {n: _preset(n, r) for n, r in _DATA["presets"].items()}
PRESETS = tuple(PRESET_TABLE)


@dataclass(frozen=True)
class ScaleChoice:
    scale: int
    preset: str | None  # small / medium / large, or None for an absolute scale
    note: str | None = None  # why the scale differs from what the preset asked for
    kind: str = "pgbench"  # the dataset: pgbench's, or the TPC-C-like one (scale: warehouses)

    def describe(self) -> str:
        """
        >>> ScaleChoice(4, None, kind="tpcc").describe()  # doctest: +ELLIPSIS
        'dataset tpcc: 4 warehouses, about ... MiB'
        >>> ScaleChoice(10, "small").describe()
        'dataset pgbench: scale 10 (small), about 150 MiB'
        """
        size = estimated_bytes(self.scale, self.kind) / MIB
        what = f"{self.scale} warehouses" if self.kind == "tpcc" else f"scale {self.scale}"
        preset = f" ({self.preset})" if self.preset else ""
        return f"dataset {self.kind}: {what}{preset}, about {size:,.0f} MiB"


DEFAULT_SHARED_BUFFERS = 128 * 1024**2  # PostgreSQL's, when nothing sets it


def estimated_bytes(scale: int, kind: str = "pgbench") -> int:
    """The dataset's size on disk, tables and indexes: pgbench's at a scale, or the TPC-C-like
    one's at a number of warehouses."""
    return tpcc_bytes(scale) if kind == "tpcc" else scale * BYTES_PER_SCALE


def unit_name(kind: str) -> str:
    return "warehouses" if kind == "tpcc" else "scale"


def _largest_within(budget: int, kind: str) -> int:
    """The largest scale (>= 0) whose estimated size is at most `budget` bytes."""
    per_unit = estimated_bytes(2, kind) - estimated_bytes(1, kind)
    fixed = estimated_bytes(1, kind) - per_unit
    return max(0, (budget - fixed) // per_unit)


def preset_scale(
    preset: str, memory_bytes: int, shared_buffers_bytes: int, kind: str = "pgbench"
) -> int:
    """The scale a preset means on this host.

    As data/scales.toml defines them: small is half of shared_buffers (the data fits in it:
    contention-bound); medium ~50% of RAM (fits in the page cache); large ~200% (I/O-bound).

    >>> preset_scale("small", 8 * GIB, 128 * MIB)
    4
    >>> preset_scale("medium", 8 * GIB, 2 * GIB), preset_scale("large", 8 * GIB, 2 * GIB)
    (273, 1092)
    """
    chosen = PRESET_TABLE[preset]
    basis = memory_bytes if chosen.of == "memory" else shared_buffers_bytes
    target = int(basis * chosen.fraction)
    return max(1, _largest_within(target, kind))


def parse_scale_spec(spec: str) -> str | int:
    """
    >>> parse_scale_spec("medium"), parse_scale_spec("50")
    ('medium', 50)
    """
    spec = spec.strip().lower()
    if spec in PRESETS:
        return spec
    if spec.isdigit() and int(spec) >= 1:
        return int(spec)
    raise UsageError(
        f"--scale {spec!r} is not valid: use {', '.join(PRESETS)} or a whole number >= 1."
    )


def choose_scale(
    spec: str | int,
    memory_bytes: int,
    shared_buffers_bytes: int,
    free_disk: int | None,
    kind: str = "pgbench",
) -> ScaleChoice:
    """Resolve a preset and cap it by free disk space, saying so when capped.

    >>> print(choose_scale("large", 24 * GIB, 128 * MIB, 20 * GIB).note)  # doctest: +ELLIPSIS
    large: scale 3276 (~48.0 GiB) needs ~106.6 GiB ... 20.0 GiB is free: using scale 589 (~8.6 GiB)
    >>> choose_scale(10, 24 * GIB, 128 * MIB, 100 * GIB)
    ScaleChoice(scale=10, preset=None, note=None, kind='pgbench')
    """
    preset = spec if isinstance(spec, str) else None
    scale = preset_scale(preset, memory_bytes, shared_buffers_bytes, kind) if preset else int(spec)
    if free_disk is None:
        return ScaleChoice(scale, preset, kind=kind)
    needed = int(estimated_bytes(scale, kind) * DISK_FACTOR) + DISK_RESERVE
    if needed <= free_disk:
        return ScaleChoice(scale, preset, kind=kind)
    capped = _largest_within(int((free_disk - DISK_RESERVE) / DISK_FACTOR), kind)
    unit = unit_name(kind)
    if capped < 1:
        raise DatasetError(
            f"only {free_disk / GIB:.1f} GiB of disk is free, too little for even {unit} 1: "
            "free some space or choose another --workdir."
        )
    wanted = (
        f"{unit} {scale} (~{estimated_bytes(scale, kind) / GIB:.1f} GiB) needs "
        f"~{needed / GIB:.1f} GiB of free disk but {free_disk / GIB:.1f} GiB is free"
    )
    if preset is None:
        raise DatasetError(f"{wanted}; choose --scale {capped} or less, or free some space.")
    size = estimated_bytes(capped, kind) / GIB
    note = f"{preset}: {wanted}: using {unit} {capped} (~{size:.1f} GiB)"
    return ScaleChoice(capped, preset, note, kind)
