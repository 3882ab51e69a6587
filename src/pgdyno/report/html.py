"""The report as one self-contained HTML page: data, plotly.js, script and styles inline.

The page needs no network: plotly.js comes from the `plotly` wheel's bundled copy and is
embedded whole. Every string from plans or results passes through Jinja's autoescaping; the
report's JSON is embedded in a ``<script type="application/json">`` with ``<``, ``>`` and ``&``
escaped so no value can close the element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

import jinja2

from pgdyno.formatting import fmt
from pgdyno.records.stored import ComparisonSet
from pgdyno.results.encode import to_json
from pgdyno.templating import template_environment
from pgdyno.textsafe import strict_json


def _finite(value: Any) -> Any:
    """NaN and infinities as null: JSON.parse accepts neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def script_json(data: Any) -> str:
    """JSON safe inside a script element.

    >>> script_json({"x": "</script><b>&", "y": float("nan")})
    '{"x":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026","y":null}'
    """
    text = strict_json(_finite(data), indent=None, compact=True)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):  # fmt: skip
        text = text.replace(char, escaped)
    return text


@cache
def plotly_js() -> str:
    """plotly.min.js from the plotly package, safe to inline in a script element."""
    # Imported here: only reports need the 4 MB bundle.
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

    return str(get_plotlyjs()).replace("</script", "<\\/script")


def _asset(name: str) -> str:
    return files("pgdyno.report").joinpath("templates", name).read_text(encoding="utf-8")


def settings_text(s: Mapping[str, Any]) -> str:
    """A set's settings as the plan asked and, where it differs, as read back.

    >>> settings_text({"requested": {"pg": {"work_mem": "64MB"}, "host": {"vm.swappiness": "10"},
    ...                              "postgres": "18.1"},
    ...                "effective": {"pg": {"work_mem": "64MB"}, "host": {"vm.swappiness": "1"}}})
    'PostgreSQL 18.1; work_mem=64MB; vm.swappiness=10 (in effect: 1)'
    """
    requested = s.get("requested") or {}
    effective = s.get("effective") or {}
    parts = [f"PostgreSQL {requested['postgres']}"] if requested.get("postgres") else []
    for layer in ("pg", "host"):
        got = effective.get(layer) or {}
        for name, value in (requested.get(layer) or {}).items():
            actual = got.get(name)
            moved = actual is not None and str(actual) != str(value)
            parts.append(f"{name}={value}" + (f" (in effect: {actual})" if moved else ""))
    return "; ".join(parts) or "defaults"


def _verdict_class(verdict: str | None) -> str:
    return {"better": "better", "worse": "worse", "baseline": "baseline"}.get(verdict or "", "")


@cache
def _template() -> jinja2.Template:
    env = template_environment(
        html=True,
        filters={
            "fmt": lambda v, digits=1: fmt(v, digits),
            "settings_text": settings_text,
            "verdict_class": _verdict_class,
        },
    )
    return env.from_string(_asset("report.html.j2"))


def render(report: Mapping[str, Any], sets: Mapping[str, ComparisonSet] | None = None) -> str:
    """The page for a report built by `report.content.build`; `sets` by name, as stored."""
    return _template().render(
        r=report,
        sets={name: to_json(s) for name, s in (sets or {}).items()},
        colours={g["name"]: g["colour"] for g in report["groups"]},
        css=_asset("report.css"),
        report_js=_asset("report.js"),
        plotly_js=plotly_js(),
        data_json=script_json(report),
    )
