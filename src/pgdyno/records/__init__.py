"""Frozen records that flow from collectors to compute, the store and the renderers.

The bottom layer: these modules import nothing from pgdyno (the `records` contract in
pyproject.toml keeps it so), so any layer may take them and a renderer needs nothing else.
Import from here: ``from pgdyno.records import RunRecord``. Add a record to the module named
after what produces it (run.py, devices.py, pgbench.py, postgres.py, scripts.py, tpcc.py,
tune.py) and list it below.
"""

from pgdyno.records.devices import DeviceLayout, RunDevice
from pgdyno.records.pgbench import ScriptSummary, StatementLatency, Summary
from pgdyno.records.postgres import Available, Status
from pgdyno.records.run import Event, Percentiles, RunCell, RunRecord, Sample, SecondRow
from pgdyno.records.scripts import ScriptLatency
from pgdyno.records.tpcc import TpccResult, TpccTransaction
from pgdyno.records.tune import Disk, TuneFacts

__all__ = [
    "Available",
    "DeviceLayout",
    "Disk",
    "Event",
    "Percentiles",
    "RunCell",
    "RunDevice",
    "RunRecord",
    "Sample",
    "ScriptLatency",
    "ScriptSummary",
    "SecondRow",
    "StatementLatency",
    "Status",
    "Summary",
    "TpccResult",
    "TpccTransaction",
    "TuneFacts",
]
