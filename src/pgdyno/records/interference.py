"""What processes outside the experiment, and the hypervisor, took of the machine during a run
(collect/interference.py measures it; a run keeps it only when it crossed a threshold)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interference:
    """Foreign CPU and steal over a run, in % of the machine; `top`: the biggest foreign
    commands, (command, % of the machine), biggest first."""

    foreign_cpu_pct: float
    steal_pct: float
    top: tuple[tuple[str, float], ...] = ()

    def text(self) -> str:
        """What the run's interference was, in one line (the command names as recorded).

        >>> Interference(48.2, 0.0, (("yes", 47.5), ("make", 0.7))).text()
        'other processes took 48.2% of the CPUs (yes 47.5%, make 0.7%)'
        >>> Interference(0.4, 9.9).text()
        'other processes took 0.4% of the CPUs; the hypervisor stole 9.9% of the CPU time'
        """
        text = f"other processes took {self.foreign_cpu_pct:.1f}% of the CPUs"
        if self.top:
            text += " (" + ", ".join(f"{command} {pct:.1f}%" for command, pct in self.top) + ")"
        if self.steal_pct > 0:
            text += f"; the hypervisor stole {self.steal_pct:.1f}% of the CPU time"
        return text

    def warning(self) -> str:
        """The run's health warning (a warning's text up to ':' is its kind).

        >>> Interference(48.2, 0.0, (("yes", 47.5),)).warning()
        'interference: other processes took 48.2% of the CPUs (yes 47.5%)'
        """
        return "interference: " + self.text()
