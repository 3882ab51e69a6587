"""The layer under a PostgreSQL data or WAL directory: a filesystem pgdyno builds itself.

As root, pgdyno makes a filesystem (ext4, xfs, btrfs, ext3) with the plan's mkfs and mount
options on a loop image in its work directory, or on a block device the user names with
`destroy_device = true`, mounts it, and takes it all down again after use. Every step goes
through the storage journal first, so `pgdyno rollback` finishes the job after a crash.

Module map, one external system each: `model` (the request and what was built: pure),
`filesystems` (data/filesystems.toml), `kernel` (/proc/filesystems and the module lists),
`blkid` (signatures on a device), `loop` (losetup and /sys/block/loop*), `mkfs`, `mounts`
(mount, umount, /proc/self/mountinfo), `device_checks` (whether a named device may be used),
`check` (what `plan check` says) and `layer` (the context managers the runner uses). The
storage journal, taking steps back and `rollback_storage` are pgdyno.undo.filesystems'.
"""
