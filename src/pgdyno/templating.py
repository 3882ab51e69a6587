"""The one place that builds a Jinja2 environment: the HTML report, `tune`'s files and the
TPC-C-like pgbench scripts all render with it.

Every environment refuses an undefined name (StrictUndefined: a typo in a template is an error,
not an empty string) and drops the newline after a block tag and the spaces before one
(trim_blocks, lstrip_blocks). HTML is autoescaped; text (config files, scripts) is not, and
keeps its last newline. See https://jinja.palletsprojects.com/en/stable/api/#jinja2.Environment
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2


def template_environment(
    package: str | None = None,
    folder: str = "templates",
    *,
    html: bool = False,
    filters: Mapping[str, Callable[..., Any]] | None = None,
    finalize: Callable[[Any], Any] | None = None,
) -> jinja2.Environment:
    """An environment loading templates from `folder` of `package` (none: templates given as
    strings); `finalize` is applied to every value a template shows.

    >>> env = template_environment(filters={"twice": lambda v: v * 2})
    >>> env.from_string("{% if 1 %}\\n  {{ 3 | twice }}\\n{% endif %}\\n").render()
    '  6\\n'
    >>> template_environment(html=True).from_string("{{ x }}").render(x="<b>")
    '&lt;b&gt;'
    """
    env = jinja2.Environment(
        loader=None if package is None else jinja2.PackageLoader(package, folder),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=not html,
        finalize=finalize,
    )
    env.filters.update(filters or {})
    return env
