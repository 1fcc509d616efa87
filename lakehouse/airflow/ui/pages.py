"""HTML of the Lakehouse view (Jinja2, autoescaped): the tables page and a table's page."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from jinja2 import DictLoader, Environment, select_autoescape
from markupsafe import Markup, escape

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}Lakehouse{% endblock %}</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}
th{background:#f4f6f8}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00}.muted{color:#777}button{margin-right:8px;padding:4px 10px;cursor:pointer}
#message{margin:8px 0;font-weight:600}code{font-size:12px}
</style></head><body>
<nav><a href="{{ prefix }}/">Lakehouse tables</a></nav>
{% block body %}{% endblock %}
</body></html>"""

_TABLES = """{% extends "base" %}
{% block body %}
<h1>Lakehouse tables</h1>
<p class="muted">From the table registry <code>{{ registry }}</code>.</p>
<table id="tables"><thead><tr><th>table</th><th>type</th><th>size</th><th>file groups</th>
<th>last commit</th><th>pending compactions</th><th>pending cleans</th><th>log backlog</th></tr></thead>
<tbody>{% for t in tables %}<tr data-table="{{ t.name }}">
<td><a href="{{ prefix }}/tables/{{ t.name }}">{{ t.name }}</a></td>
{% if t.exists %}<td>{{ t.table_type }}</td><td class="n">{{ t.size_bytes|size }}</td><td class="n">{{ t.file_groups }}</td>
<td>{{ t.last_commit or "-" }}</td><td class="n">{{ t.pending_compactions }}</td><td class="n">{{ t.pending_cleans }}</td>
<td class="n">{{ t.log_files }} files, {{ t.log_bytes|size }}</td>
{% else %}<td colspan="7" class="muted">not created yet (its first ingest creates it)</td>{% endif %}
</tr>{% endfor %}</tbody></table>
{% endblock %}"""

_TABLE = """{% extends "base" %}
{% block title %}{{ t.name }} - Lakehouse{% endblock %}
{% block body %}
<h1 id="table-name">{{ t.name }}</h1>
<p><code>{{ t.path }}</code>{% if t.exists %}: {{ t.table_type }}, {{ t.size_bytes|size }},
{{ t.file_groups }} file groups in {{ t.partitions }} partitions, last commit {{ t.last_commit or "-" }}{% endif %}</p>
<div id="services">{% for s in services %}
<button data-service="{{ s }}" onclick="trigger('{{ s }}')">Run {{ s }}</button>{% endfor %}
</div><div id="message" role="status"></div>
<h2>Timeline</h2>
<div id="chart">{{ chart|safe }}</div>
<table id="timeline"><thead><tr><th>instant</th><th>action</th><th>state</th><th>start</th><th>end</th>
<th>duration</th><th>made by</th><th>committed by</th></tr></thead><tbody>
{% for i in t.timeline|reverse %}<tr data-instant="{{ i.instant }}"><td>{{ i.instant }}</td><td>{{ i.action }}</td>
<td{% if i.state != "COMPLETED" %} class="bad"{% endif %}>{{ i.state }}</td><td>{{ i.start|clock }}</td><td>{{ i.end|clock }}</td>
<td class="n">{{ "%.1f s"|format(i.duration_s) if i.duration_s is not none else "-" }}</td>
<td>{{ run_link(i.made_by) }}</td><td>{{ run_link(i.committed_by) }}</td></tr>{% endfor %}
</tbody></table>
<h2>File groups</h2>
<table id="file-groups"><thead><tr><th>partition</th><th>file group</th><th>base instant</th><th>base size</th>
<th>log files</th><th>log bytes</th></tr></thead><tbody>
{% for g in t.groups %}<tr><td>{{ g.partition or "(none)" }}</td><td><code>{{ g.file_id }}</code></td>
<td>{{ g.base_instant }}</td><td class="n">{{ g.base_bytes|size }}</td><td class="n">{{ g.log_files }}</td>
<td class="n">{{ g.log_bytes|size }}</td></tr>{% endfor %}</tbody></table>
<h2>Clean history</h2>
<table id="cleans"><thead><tr><th>instant</th><th>files deleted</th><th>bytes freed</th><th>earliest retained</th></tr></thead><tbody>
{% for c in t.cleans|reverse %}<tr><td>{{ c.instant }}</td><td class="n">{{ c.files_deleted }}</td>
<td class="n">{{ c.bytes_freed|size if c.bytes_freed is not none else "-" }}</td><td>{{ c.earliest_retained or "-" }}</td></tr>
{% else %}<tr><td colspan="4" class="muted">no clean yet</td></tr>{% endfor %}</tbody></table>
<script>
async function trigger(service) {
  const box = document.getElementById("message");
  box.textContent = "triggering " + service + " ...";
  const r = await fetch("{{ prefix }}/api/tables/{{ t.name }}/trigger/" + service,
                        {method: "POST", credentials: "same-origin", headers: {"X-Lakehouse-Trigger": "1"}});
  const body = await r.json().catch(() => ({}));
  box.textContent = r.ok ? ("triggered " + body.dag_id + ": " + body.dag_run_id)
                         : ("could not trigger " + service + ": " + (body.detail || r.status));
}
</script>
{% endblock %}"""


def _size(n: Any) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _clock(t: Any) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


@lru_cache(maxsize=1)
def _env():
    env = Environment(loader=DictLoader({"base": _BASE, "tables": _TABLES, "table": _TABLE}),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["size"] = _size
    env.filters["clock"] = _clock
    return env


def render(page: str, **ctx: Any) -> str:
    def run_link(r: dict | None) -> Markup:
        if not r:
            return Markup('<span class="muted">-</span>')
        href = f"/dags/{r['dag_id']}/runs/{r['run_id']}/tasks/{r['task_id']}"
        label = f"{r['dag_id']}.{r['task_id']} (try {r['try_number']})" if r.get("try_number") else \
            f"{r['dag_id']}.{r['task_id']}"
        return Markup(f'<a href="{escape(href)}" target="_top">{escape(label)}</a>')
    return _env().get_template(page).render(run_link=run_link, **ctx)


__all__ = ["render"]
