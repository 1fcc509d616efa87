"""HTML of the Lakehouse view (Jinja2, autoescaped; the templates, styles and scripts are in
``templates/``): the tables page, a table's page and an instant's page.

They look like the rest of Airflow 3's UI: its design tokens (Chakra semantic tokens: ``bg``,
``fg``, ``fg.muted``, ``border``, ``bg.muted``, the brand palette; values from Airflow's theme),
its fonts and small striped tables, in light and dark. The mode follows Airflow's: embedded,
the page watches the ``dark`` class next-themes puts on the UI's ``<html>``; alone, the ``theme``
key next-themes keeps in localStorage, else the system's preference. Airflow's iframe is
sandboxed without top navigation, so links to Airflow pages move the UI's own router
(history.pushState and a popstate event) instead of navigating the frame. Times read as Airflow
shows them: a date and time (UTC, Airflow's default) and how long ago; states as Airflow's
state pills; long tables sort, filter and page in the browser (``view.js``).
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from lakehouse.inspect.describe import human_bytes, what
from lakehouse.timeline.instant_time import parse_instant_time
from lakehouse.timeline.tags import task_run

def _size(n: Any) -> str:
    return human_bytes(n)


def _clock(t: Any) -> str:
    """An ISO time from the timeline rows (or epoch seconds) as the page shows it (UTC)."""
    if t is None:
        return "-"
    if isinstance(t, (int, float)):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
    return str(t).replace("T", " ").removesuffix("Z")[:19]


def _when(t: Any) -> Markup:
    """An instant time (17 digits) or ISO time as a ``<time>`` element: the date and time (UTC),
    to which the page's script adds how long ago it was."""
    if not t:
        return Markup('<span class="muted">-</span>')
    s = str(t)
    if s.isdigit():
        try:
            d = parse_instant_time(s)
        except ValueError:
            return Markup(f'<span class="mono">{escape(s)}</span>')
        iso = d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
    else:
        iso = s
    return Markup(f'<time datetime="{escape(iso)}">{escape(_clock(iso))}</time>')


def airflow_link(path: str, label: str) -> Markup:
    """A link to an Airflow UI page that works inside Airflow's sandboxed iframe."""
    return Markup(f'<a href="{escape(path)}" onclick="return goAirflow(this.getAttribute(\'href\'))">'
                  f'{escape(label)}</a>')


def run_link(r: dict | None) -> Markup:
    if not r:
        return Markup('<span class="muted">-</span>')
    href = f"/dags/{r['dag_id']}/runs/{r['run_id']}/tasks/{r['task_id']}"
    if r.get("try_number"):
        href += f"?try_number={r['try_number']}"
    label = f"{r['dag_id']}.{r['task_id']} (try {r['try_number']})" if r.get("try_number") else \
        f"{r['dag_id']}.{r['task_id']}"
    return airflow_link(href, label)


@lru_cache(maxsize=1)
def _env():
    env = Environment(loader=PackageLoader("lakehouse.airflow.ui", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["size"] = _size
    env.filters["clock"] = _clock
    env.filters["when"] = _when
    # JSON for a <script type="application/json"> island: "<" escaped, so no "</script>" ends it early.
    env.filters["tojson"] = lambda v: Markup(json.dumps(v, default=str).replace("<", "\\u003c"))
    env.globals.update(run_link=run_link, airflow_link=airflow_link, what=what, task=task_run)
    return env


def render(page: str, **ctx: Any) -> str:
    return _env().get_template(f"{page}.html").render(**ctx)


__all__ = ["render", "run_link", "airflow_link"]
