"""The use cases: one function per command, over experiment/, tune/, doctor/, report/ and the
drivers, each returning a record the command renders.

cli/ only parses options, calls one function here and renders, as sqlite-utils' command line
does over its library. This layer sits below cli/ and above experiment/ and tune/, which never
import each other: what needs both, or needs the sandbox opened for a package that sits below
experiment/ (the doctor), meets here.
"""
