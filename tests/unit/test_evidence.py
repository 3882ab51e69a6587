"""pgdyno's own figures cited as evidence: each from a resolved verdict of the current method,
with its command, machine and date, quoted exactly where it is cited.

The registry is src/pgdyno/data/evidence.toml. When the verdict method changes
(`pgdyno.stats.levels.VERDICT_METHOD`), every figure fails here until it is measured again;
`python -m pytest tests/unit/test_evidence.py -rA` lists them with their commands.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pgdyno.stats.levels import VERDICT_METHOD

ROOT = Path(__file__).parent.parent.parent
REGISTRY = ROOT / "src" / "pgdyno" / "data" / "evidence.toml"
FIGURES = tomllib.loads(REGISTRY.read_text()).get("figure", [])
RULES = sorted((ROOT / "src" / "pgdyno" / "doctor" / "rules").glob("*.toml"))
TUNE = ROOT / "src" / "pgdyno" / "data" / "tune.toml"


@pytest.mark.parametrize("figure", FIGURES, ids=[f["id"] for f in FIGURES])
def test_figure_is_current_resolved_and_quoted(figure: dict[str, object]) -> None:
    command = figure["command"]
    assert figure["method"] == VERDICT_METHOD, f"re-run `{command}`: the verdict method changed"
    assert figure["verdict"] in ("better", "worse"), "only a resolved verdict is evidence"
    for key in ("command", "machine", "date", "text"):
        assert str(figure[key]).strip(), key
    for cited in figure["cited_in"]:  # type: ignore[attr-defined]
        assert str(figure["text"]) in (ROOT / str(cited)).read_text(), cited


def test_every_doctor_citation_of_pgdyno_is_registered() -> None:
    texts = [str(f["text"]) for f in FIGURES]
    for path in RULES:
        for rule in tomllib.loads(path.read_text()).get("rule", []):
            for line in rule.get("evidence", []):
                if line.startswith("pgdyno"):
                    assert any(text in line for text in texts), (path.name, rule["id"], line)


def test_every_tune_citation_of_pgdyno_is_registered() -> None:
    texts = [str(f["text"]) for f in FIGURES]
    for entry in tomllib.loads(TUNE.read_text())["setting"]:
        for line in entry.get("evidence", []):
            if line.startswith("pgdyno"):
                assert any(text in line for text in texts), (entry["key"], line)
