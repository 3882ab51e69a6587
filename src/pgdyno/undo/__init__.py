"""Every change pgdyno makes to a machine, journalled before it is made and undone after use or
after a crash (issue 32).

`journal` is the one journal (a codec per kind); one module per kind of change holds its
record, its journalled apply and its undo: `host` (sysctls, transparent huge pages, block-device
queue settings), `server` (PostgreSQL settings by ALTER SYSTEM, reloads and restarts),
`filesystems` (loop images and devices, mkfs, mounts). `handles` says how a server is reached
and restarted, `signals` holds SIGINT and SIGTERM while a change is half done, `hostlock` keeps
one command at a time on a host's settings, and `rollback` finishes everything in order:
servers, then the host, then storage.
"""
