"""The use cases: one function per command, over experiment/, tune/, doctor/, report/ and the
drivers, each returning a record the command renders.

cli/ only parses options, calls one function here and renders, as sqlite-utils' command line
does over its library. The commands that measure (`bench`, `compare`, `noise`, `tune --verify`)
open their lab with `pgdyno.lab.open.open_lab` (the results store, the progress display, the run
context: where run files go, which /proc and /sys are read, an existing server's lock). This
layer sits below cli/ and above experiment/, tune/ and report/, which never import each other:
`tune --verify` meets `compare` here, and the doctor gets its sandbox opened here.
"""
