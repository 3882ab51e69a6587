"""The dependency lock (requirements/*.txt, installed by scripts/bootstrap) covers every
dependency pyproject.toml names, at a version pyproject.toml allows: a dependency added to one
and not the other fails here, not on a fresh machine."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def locked(name: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        text = line.split(";")[0].strip()
        if text and not text.startswith("#") and "==" in text:
            package, _, version = text.partition("==")
            pins[canonicalize_name(package)] = version.strip()
    return pins


def declared(extra: bool) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    if extra:
        names += project["optional-dependencies"]["dev"]
    return [Requirement(name) for name in names]


def problems(pins: dict[str, str], requirements: list[Requirement], lock: str) -> list[str]:
    found = []
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name not in pins:
            found.append(f"{name} is in pyproject.toml but not in requirements/{lock}")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            found.append(f"requirements/{lock} pins {name}=={pins[name]}, outside "
                         f"{requirement.specifier}")  # fmt: skip
    return found


@pytest.mark.parametrize(("lock", "extra"), [("run.txt", False), ("dev.txt", True)])
def test_the_lock_pins_every_declared_dependency_within_its_range(lock: str, extra: bool) -> None:
    pins = locked(lock)
    assert len(pins) >= 10  # a lock read as empty would let everything pass
    assert problems(pins, declared(extra), lock) == []


def test_a_dependency_missing_or_out_of_range_is_caught() -> None:
    pins = locked("run.txt")
    wanted = [Requirement("no-such-dependency>=1"), Requirement("psycopg<1")]
    assert problems(pins, wanted, "run.txt") == [
        "no-such-dependency is in pyproject.toml but not in requirements/run.txt",
        f"requirements/run.txt pins psycopg=={pins['psycopg']}, outside <1",
    ]
