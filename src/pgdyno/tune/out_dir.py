"""Writing `pgdyno tune --out` files: atomically, and never over a file pgdyno did not write."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from pgdyno.errors import OutputError, UsageError
from pgdyno.tune.files import FILE_NAMES, MARKER


def write_files(out_dir: Path, files: Mapping[str, str]) -> list[Path]:
    """Write `files` into `out_dir` (created with mode 0755), each atomically, mode 0644.

    A file already there is replaced only when pgdyno wrote it (its first line carries MARKER);
    pgdyno's files from an earlier run that this configuration no longer has are removed, so
    the directory never mixes two runs. Returns the paths written.
    """
    _make_dir(out_dir)
    for name in files:
        if Path(name).name != name or name in ("", ".", ".."):
            raise UsageError(
                f"{name!r} is not a plain file name: pgdyno writes files by name only."
            )
        if not _free_or_ours(out_dir / name):
            raise UsageError(
                f"{out_dir / name} exists and was not written by pgdyno: pick another --out "
                "directory or remove that file."
            )
    stale = [out_dir / n for n in FILE_NAMES if n not in files and _ours(out_dir / n)]
    written = [_write_atomically(out_dir / name, text) for name, text in files.items()]
    for path in stale:
        _io(path, path.unlink)
    return written


def _make_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is not a directory: give --out a directory.")
    if not out_dir.exists():
        _io(out_dir, lambda: out_dir.mkdir(mode=0o755, parents=True))
        _io(out_dir, lambda: out_dir.chmod(0o755))  # mkdir's mode is masked by the umask


def _free_or_ours(path: Path) -> bool:
    return not (path.exists() or path.is_symlink()) or _ours(path)


def _ours(path: Path) -> bool:
    """A regular file (not a link) whose first line carries pgdyno's marker."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return MARKER in f.readline(512)
    except OSError:
        return False


def _write_atomically(path: Path, text: str) -> Path:
    """Temp file in the same directory, fsync, rename: a reader sees the old file or the new."""

    def write() -> None:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        temp = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            temp.chmod(0o644)
            temp.replace(path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    _io(path, write)
    return path


def _io(path: Path, action: Callable[[], object]) -> None:
    try:
        action()
    except OSError as exc:
        raise OutputError(
            f"cannot write {path} ({exc.strerror or exc}): pick another --out directory or check "
            "its permissions."
        ) from exc
