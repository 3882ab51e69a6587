"""The constants C of NURand(A, x, y) (TPC-C v5.11, 2.1.6): one per A, chosen once.

C_LAST_LOAD is the loader's C for customer last names; the pgbench scripts use C_LAST_RUN,
which must differ from it by a delta in 65..119 other than 96 and 112 (2.1.6.1), so that the
names drawn at run time do not simply repeat the load's distribution. The C of customer ids and
item ids has no such rule. Fixed values keep every run's scripts identical, so that two runs
differ only by what pgdyno compares.
"""

from typing import Final

C_LAST_LOAD: Final = 157  # A = 255, customer last names (4.3.2.3)
C_LAST_RUN: Final = 243  # delta 86
C_ID: Final = 259  # A = 1023, customer ids 1..3000
C_ITEM: Final = 7911  # A = 8191, item ids 1..100,000


def valid_last_name_delta(load: int, run: int) -> bool:
    """Whether a run-time C for last names may follow the load's (2.1.6.1).

    >>> valid_last_name_delta(C_LAST_LOAD, C_LAST_RUN)
    True
    >>> valid_last_name_delta(100, 196), valid_last_name_delta(100, 130)
    (False, False)
    """
    delta = abs(run - load)
    return 65 <= delta <= 119 and delta not in (96, 112)
