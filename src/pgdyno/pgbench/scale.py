"""Dataset scale presets (seed 002, Vondra) and the free-disk cap: pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from pgdyno.errors import DatasetError, UsageError

MIB = 1024**2
GIB = 1024**3
# Seed 002: every 100,000 pgbench_accounts rows (one scale unit) take about 15 MB with indexes.
BYTES_PER_SCALE = 15 * MIB
# On disk at once: the template, the bench copy, and room for WAL and temporary files.
DISK_FACTOR = 2.2
DISK_RESERVE = 1 * GIB
PRESETS = ("small", "medium", "large")


@dataclass(frozen=True)
class ScaleChoice:
    scale: int
    preset: str | None  # small / medium / large, or None for an absolute scale
    note: str | None = None  # why the scale differs from what the preset asked for


def estimated_bytes(scale: int) -> int:
    return scale * BYTES_PER_SCALE


def preset_scale(preset: str, memory_bytes: int, shared_buffers_bytes: int) -> int:
    """The scale a preset means on this host.

    small: half of shared_buffers (the data fits in it: contention-bound);
    medium: ~50% of RAM (fits in the page cache); large: ~200% of RAM (I/O-bound).

    >>> preset_scale("small", 8 * GIB, 128 * MIB)
    4
    >>> preset_scale("medium", 8 * GIB, 2 * GIB), preset_scale("large", 8 * GIB, 2 * GIB)
    (273, 1092)
    """
    target = {
        "small": shared_buffers_bytes // 2,
        "medium": memory_bytes // 2,
        "large": memory_bytes * 2,
    }[preset]
    return max(1, target // BYTES_PER_SCALE)


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
        f"--scale {spec!r} is not valid: use small, medium, large or a whole number >= 1."
    )


def choose_scale(
    spec: str | int, memory_bytes: int, shared_buffers_bytes: int, free_disk: int | None
) -> ScaleChoice:
    """Resolve a preset and cap it by free disk space, saying so when capped.

    >>> print(choose_scale("large", 24 * GIB, 128 * MIB, 20 * GIB).note)  # doctest: +ELLIPSIS
    large: scale 3276 (~48.0 GiB) needs ~106.6 GiB ... 20.0 GiB is free: using scale 589 (~8.6 GiB)
    >>> choose_scale(10, 24 * GIB, 128 * MIB, 100 * GIB)
    ScaleChoice(scale=10, preset=None, note=None)
    """
    preset = spec if isinstance(spec, str) else None
    scale = preset_scale(preset, memory_bytes, shared_buffers_bytes) if preset else int(spec)
    if free_disk is None:
        return ScaleChoice(scale, preset)
    needed = int(estimated_bytes(scale) * DISK_FACTOR) + DISK_RESERVE
    if needed <= free_disk:
        return ScaleChoice(scale, preset)
    capped = int((free_disk - DISK_RESERVE) / DISK_FACTOR) // BYTES_PER_SCALE
    if capped < 1:
        raise DatasetError(
            f"only {free_disk / GIB:.1f} GiB of disk is free, too little for even scale 1: "
            "free some space or choose another --workdir."
        )
    wanted = (
        f"scale {scale} (~{estimated_bytes(scale) / GIB:.1f} GiB) needs ~{needed / GIB:.1f} GiB "
        f"of free disk but {free_disk / GIB:.1f} GiB is free"
    )
    if preset is None:
        raise DatasetError(f"{wanted}; choose --scale {capped} or less, or free some space.")
    note = f"{preset}: {wanted}: using scale {capped} (~{estimated_bytes(capped) / GIB:.1f} GiB)"
    return ScaleChoice(capped, preset, note)
