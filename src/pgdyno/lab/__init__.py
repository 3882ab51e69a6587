"""The use cases of the commands that measure: `bench`, `compare`, `noise` and `tune --verify`,
one function each, over experiment/ (the run loop) and tune/ (the advice).

Each opens its lab with `pgdyno.lab.open.open_lab` (the results store, the progress display,
the run context: where run files go, which /proc and /sys are read, an existing server's lock)
and returns a record the command renders; cli/ only parses options, calls one function here and
renders, as sqlite-utils' command line does over its library. This layer sits below cli/ and
above experiment/, tune/ and report/, which never import each other: `tune --verify` meets
`compare` here.
"""
