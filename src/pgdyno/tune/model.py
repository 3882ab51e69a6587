"""What `pgdyno tune` produces: one recommended value per setting and layer, with its reason.

A `Configuration` is the output of every source of advice alike (pgdyno's knowledge base,
pgtune, timescaledb-tune), so the renderers, the files, `--apply` and `--verify` treat them the
same way. Values are text as the target writes them: postgresql.conf text for PostgreSQL
(`"4GB"`, `"0.9"`, `"on"`), the kernel's text for sysctls and /sys files (`"67108864"`,
`"never"`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pgdyno.records.tune import TuneFacts

Layer = Literal["postgresql", "host", "device"]
LAYERS: tuple[Layer, ...] = ("postgresql", "host", "device")
TakesEffect = Literal["now", "reload", "restart", "reboot"]
# "apply": part of the configuration. "measure": the evidence conflicts (seeds disagree, or
# pgdyno's own measurements contradict a seed): offered as a ladder step for `tune --verify`,
# never applied without being measured. "review": right only on a dedicated host (overcommit):
# written to the files commented out, never applied by --apply. "todo": a step only the server's
# host can take (offline: reserve huge pages there), written commented out, never applied. These
# four are data/tune.toml's.
KnowledgeStatus = Literal["apply", "measure", "review", "todo"]
# "host": the server runs in a container, and a host or block-device setting belongs to the
# host's administrator (it affects every tenant): reported for them, never applied by --apply
# nor written into the files meant for the container.
Status = KnowledgeStatus | Literal["host"]
# "observability": settings that only make the server tell more (logging, I/O timing), shown
# and written apart from the "performance" ones, and left out by `tune --no-observability`.
Group = Literal["performance", "observability"]
GROUPS: tuple[Group, ...] = ("performance", "observability")


@dataclass(frozen=True, slots=True)
class Setting:
    """One recommended value.

    `name` is the setting as its layer names it: a PostgreSQL setting (`shared_buffers`), a
    dotted sysctl (`vm.dirty_bytes`), `transparent_hugepage/enabled`, or a block queue setting
    (`scheduler`, `read_ahead_kb`) of `device`. `current` is None when unknown (offline, or not
    readable here).
    """

    layer: Layer
    name: str
    value: str
    why: str
    current: str | None = None
    device: str | None = None
    evidence: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()  # the doctor rules that say the same, by id
    takes_effect: TakesEffect = "reload"
    status: Status = "apply"
    group: Group = "performance"

    @property
    def key(self) -> str:
        """Unique within a configuration: block settings are per device."""
        return f"{self.name}@{self.device}" if self.device else self.name

    @property
    def changes(self) -> bool:
        """The recommendation differs from what is in effect (or that is unknown)."""
        return self.current is None or self.current != self.value


@dataclass(frozen=True, slots=True)
class Configuration:
    """The advice of one source for one machine and server."""

    source: str  # "pgdyno", "pgtune" or "timescaledb-tune"
    profile: str
    settings: tuple[Setting, ...]
    facts: TuneFacts  # what it was computed from
    unknown: dict[str, str] = field(default_factory=dict)  # fact -> why it is not known
    notes: tuple[str, ...] = ()  # values dropped or changed by the version check, caveats

    def layer(self, layer: Layer) -> list[Setting]:
        return [s for s in self.settings if s.layer == layer]

    def to_apply(self, layers: tuple[Layer, ...] = LAYERS) -> list[Setting]:
        return [s for s in self.settings if s.layer in layers and s.status == "apply"]

    def pg_values(self) -> dict[str, str]:
        """PostgreSQL settings to apply, name -> postgresql.conf text."""
        return {s.name: s.value for s in self.to_apply(("postgresql",))}


@dataclass(frozen=True)
class Done:
    """One setting after --apply: what it was, what was asked, what is in effect."""

    layer: Layer
    name: str
    old: str | None
    requested: str
    effective: str | None
    device: str | None = None
    waiting_for_restart: bool = False

    @property
    def took_effect(self) -> bool:
        return self.effective == self.requested and not self.waiting_for_restart


@dataclass
class ApplyReport:
    done: list[Done] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    restarted: int = 0
    pg_old: dict[str, str] = field(default_factory=dict)  # PostgreSQL settings changed: old value
