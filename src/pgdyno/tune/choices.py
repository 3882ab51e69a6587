"""The choices of pgtune's form, shared by pgdyno's own advice and the baselines (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Profile = Literal["web", "oltp", "dw", "mixed", "desktop"]
PROFILES: tuple[Profile, ...] = ("web", "oltp", "dw", "mixed", "desktop")
Storage = Literal["hdd", "ssd", "san", "nvme"]
STORAGES: tuple[Storage, ...] = ("hdd", "ssd", "san", "nvme")
DataSize = Literal["less_ram", "mid_ram", "greater_ram"]
DATA_SIZES: tuple[DataSize, ...] = ("less_ram", "mid_ram", "greater_ram")

# The connections a profile plans for when neither the user nor the server says (pgtune's too).
PROFILE_CONNECTIONS: Mapping[Profile, int] = {
    "web": 200, "oltp": 300, "dw": 40, "desktop": 20, "mixed": 100,
}  # fmt: skip
# What a data-size class means as data / RAM, for rules that need a ratio.
DATA_RATIOS: Mapping[DataSize, float] = {"less_ram": 0.3, "mid_ram": 1.0, "greater_ram": 2.0}
