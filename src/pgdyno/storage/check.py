"""What `plan check` says of a storage request, without creating anything: the request's own
shape and options, root, the programs (with the Debian package to install), the kernel's
support for the filesystem, free space for a loop image, and a named device's state.

Each problem is one sentence naming what is wrong and what to do; notes say what a request
really gets when that is not what it names (ext3 mounted by the ext4 driver).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgdyno.storage import kernel
from pgdyno.storage.device_checks import device_problems
from pgdyno.storage.filesystems import KINDS, FsKind, mkfs_option_problems, mount_option_problems
from pgdyno.storage.loop import loop_support_problem
from pgdyno.storage.model import FsRequest, Roots, request_shape_problems
from pgdyno.storage.tools import find, missing
from pgdyno.undo.filesystems import contents, unclean

MIB = 2**20


@dataclass(frozen=True)
class RequestCheck:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mount_type: str | None = None  # what mount -t will be given


def mkfs_command(kind: FsKind) -> tuple[str, ...] | None:
    """The first of the filesystem's mkfs commands found on this host."""
    return next((command for command in kind.mkfs if find(command[0]) is not None), None)


def free_bytes(directory: Path) -> int:
    """The space a file may still take (f_bavail) on the nearest existing directory."""
    for candidate in (directory, *directory.parents):
        try:
            stats = os.statvfs(candidate)
        except OSError:
            continue
        return stats.f_bavail * stats.f_frsize
    return 0


def _tool_problems(request: FsRequest, kind: FsKind) -> list[str]:
    problems = []
    if mkfs_command(kind) is None:
        problems.append(missing(kind.mkfs[0][0], kind.package))
    programs = ["mount", "umount", "blkid", *(["losetup"] if request.device is None else [])]
    problems.extend(missing(program) for program in programs if find(program) is None)
    return problems


def _kernel(request: FsRequest, kind: FsKind, roots: Roots) -> RequestCheck:
    found = kernel.support(kind, roots)
    if found.mount_type is None:
        lists = "" if found.modules_known else f" (and {roots.modules / roots.release} is missing)"
        return RequestCheck(
            [
                f"this kernel offers no {kind.name} filesystem: it is not in "
                f"{roots.proc}/filesystems and no module {' or '.join(kind.modules)} is "
                f"installed{lists}; load it (`modprobe {kind.modules[-1]}`) or choose another "
                "filesystem."
            ]
        )
    notes = [kernel.ext3_note(roots.release, found.mount_type)] if kind.name == "ext3" else []
    return RequestCheck([], notes, found.mount_type)


def _image_problems(request: FsRequest, kind: FsKind, workdir: Path, roots: Roots) -> list[str]:
    size = request.size_bytes or 0
    problems = []
    if size < kind.min_size_bytes:
        problems.append(
            f"the {size / MIB:,.0f} MiB image for {request.role} is smaller than the "
            f"{kind.min_size_bytes / MIB:,.0f} MiB {kind.name} needs: give at least "
            f"{kind.min_size_bytes / MIB:,.0f} MiB."
        )
    free = free_bytes(workdir)
    if size > free:
        problems.append(
            f"the work directory {workdir} has {free / MIB:,.0f} MiB free, less than the "
            f"{size / MIB:,.0f} MiB image for {request.role}: free space, give a smaller size "
            "or another --workdir."
        )
    loop_problem = loop_support_problem(roots)
    return [*problems, *([loop_problem] if loop_problem else [])]


def inspect_request(request: FsRequest, workdir: Path, roots: Roots | None = None) -> RequestCheck:
    """Problems and notes for one request; nothing is created or changed."""
    roots = roots or Roots()
    problems = request_shape_problems(request)
    kind = KINDS.get(request.filesystem)
    if kind is None or problems:
        return RequestCheck(problems)
    problems += mkfs_option_problems(kind, request.mkfs_options, request.role)
    problems += mount_option_problems(request.mount_options, request.role)
    if os.geteuid() != 0:
        problems.append(
            f"building the {kind.name} filesystem for {request.role} (losetup, mkfs, mount) "
            "needs root: run pgdyno as root."
        )
    problems += _tool_problems(request, kind)
    support = _kernel(request, kind, roots)
    problems += support.problems
    if request.device is None:
        problems += _image_problems(request, kind, workdir, roots)
    elif os.geteuid() == 0:  # a device's holders and signatures are for root to read
        problems += device_problems(request, roots, kind.min_size_bytes)
    return RequestCheck(problems, support.notes, support.mount_type)


def check_request(request: FsRequest, workdir: Path) -> list[str]:
    """What `plan check` says of one request: one sentence per problem; [] when it is fine."""
    return inspect_request(request, workdir).problems


def check_requests(requests: Sequence[FsRequest], workdir: Path) -> RequestCheck:
    """All of a plan's requests: each one's problems and notes, then what they ask together
    (one role or device each, images that fit side by side) and a clean storage journal."""
    problems: list[str] = []
    notes: list[str] = []
    for request in requests:
        found = inspect_request(request, workdir)
        problems += found.problems
        notes += found.notes
    roles = [request.role for request in requests]
    problems += [f"two storage requests name the role {r}: give each its own." for r in
                 sorted({r for r in roles if roles.count(r) > 1})]  # fmt: skip
    devices = [str(request.device) for request in requests if request.device is not None]
    problems += [f"two storage requests name the device {d}: give each its own." for d in
                 sorted({d for d in devices if devices.count(d) > 1})]  # fmt: skip
    images = [request.size_bytes or 0 for request in requests if request.device is None]
    free = free_bytes(workdir)
    if len(images) > 1 and sum(images) > free:
        problems.append(
            f"the loop images take {sum(images) / MIB:,.0f} MiB together, more than the "
            f"{free / MIB:,.0f} MiB free in {workdir}: free space or give smaller sizes."
        )
    left = contents(workdir)
    if left.pending or left.unreadable:
        problems.append(str(unclean(workdir, left)))
    return RequestCheck(problems, notes)
