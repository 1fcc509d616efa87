"""HTML of the Lakehouse view (Jinja2, autoescaped): the tables page, a table's page and an
instant's page.

They look like the rest of Airflow 3's UI: its design tokens (Chakra semantic tokens: ``bg``,
``fg``, ``fg.muted``, ``border``, ``bg.muted``, the brand palette; values from Airflow's theme),
its fonts and small striped tables, in light and dark. The mode follows Airflow's: embedded,
the page watches the ``dark`` class next-themes puts on the UI's ``<html>``; alone, the ``theme``
key next-themes keeps in localStorage, else the system's preference. Airflow's iframe is
sandboxed without top navigation, so links to Airflow pages move the UI's own router
(history.pushState and a popstate event) instead of navigating the frame.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

from jinja2 import DictLoader, Environment, select_autoescape
from markupsafe import Markup, escape

from lakehouse.inspect.describe import human_bytes, what
from lakehouse.timeline.tags import task_run

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}Lakehouse{% endblock %}</title>
<meta name="color-scheme" content="light dark">
<style>
:root{--bg:#ffffff;--fg:#161d2d;--muted:#3e5873;--border:#dee3ea;--border-em:#c7cfd8;--bg-muted:#edf0f4;
--panel:#ffffff;--brand:#3c5b89;--brand-fg:#1d3358;--brand-subtle:#edf3fa;--link:#155dfc;--bad:#c53030;--warn:#b7791f;
--c1:#5b7aa8;--c2:#dd6b20;--c3:#3182ce;--c4:#2f855a;color-scheme:light}
html.dark{--bg:#161d2d;--fg:#f8fafd;--muted:#a3afbe;--border:#1c2a3a;--border-em:#293c51;--bg-muted:#07121e;
--panel:#01050c;--brand:#3c5b89;--brand-fg:#c1d5ec;--brand-subtle:#152242;--link:#8ec5ff;--bad:#fc8181;--warn:#f6e05e;
--c1:#85a2c9;--c2:#f6ad55;--c3:#63b3ed;--c4:#68d391;color-scheme:dark}
body{font:14px/1.5 Inter,-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;padding:16px 20px;
background:var(--bg);color:var(--fg)}
h1{font-size:1.5rem;font-weight:600;margin:4px 0 8px}h2{font-size:1.05rem;font-weight:600;margin:22px 0 6px}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
code,.mono{font:12px SFMono-Regular,Menlo,Monaco,Consolas,"Liberation Mono","Courier New",monospace}
table{border-collapse:collapse;margin:6px 0 16px;font-size:.875rem;width:100%}
th,td{border-bottom:1px solid var(--border);padding:6px 8px;text-align:start;vertical-align:top}
th{font-weight:500;position:sticky;top:0;background:var(--bg)}
tbody tr:nth-child(odd){background:var(--bg-muted)}td.n{text-align:end;font-variant-numeric:tabular-nums}
.muted{color:var(--muted)}.bad{color:var(--bad)}.warn{color:var(--warn)}
nav.crumbs{font-size:.875rem;color:var(--muted);margin-bottom:4px}
button{font:inherit;font-size:.875rem;font-weight:500;margin:0 8px 6px 0;padding:5px 12px;cursor:pointer;border-radius:6px;
border:1px solid var(--brand);background:var(--brand);color:#fff}button:hover{filter:brightness(1.1)}
.card{border:1px solid var(--border);border-radius:8px;background:var(--panel);padding:10px 12px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:12px}
.facts{display:flex;flex-wrap:wrap;gap:8px 22px;margin:6px 0}.facts div{font-size:.875rem}.facts b{font-weight:600}
.alert{border:1px solid var(--border-em);border-left:4px solid var(--warn);border-radius:6px;padding:8px 12px;margin:6px 0;
background:var(--bg-muted)}.alert.critical{border-left-color:var(--bad)}.alert small{color:var(--muted);display:block}
.badge{display:inline-block;border-radius:999px;padding:0 8px;font-size:.75rem;font-weight:500;background:var(--brand-subtle);
color:var(--brand-fg)}.badge.pending{background:transparent;border:1px solid var(--warn);color:var(--warn)}
#message{margin:6px 0;font-weight:500}
svg.lh-chart{width:100%;height:auto;color:var(--fg)}svg.lh-timeline{color:var(--fg);max-width:100%;height:auto}
.lh-grid{stroke:var(--border);stroke-width:1}.lh-axis{fill:var(--muted);font-size:10px}.lh-s2t{fill:var(--c2)}
.lh-s1{fill:var(--c1)}.lh-s3{fill:var(--c3)}.lh-s4{fill:var(--c4)}.lh-s2l{stroke:var(--c2);stroke-width:2}
.lh-mark{stroke:var(--c2);stroke-dasharray:3 3;stroke-width:1.5}
</style>
<script>
(function () {
  // Follow Airflow's colour mode (next-themes: a "dark" class on the UI's <html>, "theme" in localStorage).
  var root = document.documentElement;
  function own() {
    var t = null; try { t = localStorage.getItem("theme"); } catch (e) {}
    return t === "dark" || (t !== "light" && matchMedia("(prefers-color-scheme: dark)").matches);
  }
  function apply(dark) { root.classList.toggle("dark", dark); root.classList.toggle("light", !dark); }
  var host = null;
  try { if (window.parent !== window) host = window.parent.document.documentElement; } catch (e) {}
  if (host) {
    var sync = function () { apply(host.classList.contains("dark")); };
    sync(); new MutationObserver(sync).observe(host, {attributes: true, attributeFilter: ["class"]});
  } else {
    apply(own()); addEventListener("storage", function (e) { if (e.key === "theme") apply(own()); });
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", function () { apply(own()); });
  }
})();
function goAirflow(path) {
  // Airflow's iframe may not navigate the top window: move the UI's router instead.
  try {
    if (window.top !== window && window.top.location.origin === location.origin) {
      window.top.history.pushState({}, "", path);
      window.top.dispatchEvent(new PopStateEvent("popstate", {state: {}}));
      return false;
    }
  } catch (e) {}
  location.href = path; return false;
}
</script></head><body>
<nav class="crumbs"><a href="{{ prefix }}/">Lakehouse</a>{% block crumbs %}{% endblock %}</nav>
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
<td class="mono">{{ t.last_commit or "-" }}</td><td class="n">{{ t.pending_compactions }}</td><td class="n">{{ t.pending_cleans }}</td>
<td class="n">{{ t.log_files }} files, {{ t.log_bytes|size }}</td>
{% else %}<td colspan="7" class="muted">not created yet (its first ingest creates it)</td>{% endif %}
</tr>{% endfor %}</tbody></table>
{% endblock %}"""

_TABLE = """{% extends "base" %}
{% block title %}{{ t.name }} - Lakehouse{% endblock %}
{% block crumbs %} / {{ t.name }}{% endblock %}
{% block body %}
<h1 id="table-name">{{ t.name }}</h1>
<p><code>{{ t.path }}</code></p>
{% if t.exists %}<div class="facts" id="facts">
<div>type <b>{{ t.table_type }}</b></div><div>size <b>{{ t.size_bytes|size }}</b></div>
<div>file groups <b data-stat="file_groups">{{ t.stats.file_groups }}</b></div>
<div>base files <b data-stat="base_files">{{ t.stats.base_files }}</b> (<span data-stat="base_bytes">{{ t.stats.base_bytes }}</span> B)</div>
<div>log files <b data-stat="log_files">{{ t.stats.log_files }}</b> (<span data-stat="log_bytes">{{ t.stats.log_bytes }}</span> B)</div>
<div>partitions <b data-stat="partitions">{{ t.stats.partitions }}</b></div>
<div>last commit <b class="mono" data-stat="last_commit">{{ t.stats.last_commit or "-" }}</b></div>
<div>instants <b>{{ t.instants }}</b>{% if t.archived_instants %} ({{ t.archived_instants }} archived){% endif %}</div>
</div>{% else %}<p class="muted">Not created yet: its first ingest creates it.</p>{% endif %}
<div id="alerts">{% for a in t.alerts %}<div class="alert {{ a.severity }}" data-alert="{{ a.kind }}">
<b>{{ a.kind|replace("_", " ") }}</b>: {{ a.message }}<small>What to do: {{ a.help }}</small></div>{% endfor %}</div>
<h2>Services</h2>
<div id="services">{% for s in services %}
<button data-service="{{ s }}" onclick="trigger('{{ s }}')">Run {{ s }}</button>{% endfor %}
<span class="muted">DAGs: {% for s, d in dags.items() %}{{ airflow_link("/dags/" ~ d, d) }}{% if not loop.last %}, {% endif %}{% endfor %}
<span id="assets"></span></span>
</div><div id="message" role="status"></div>
<table id="runs"><thead><tr><th>service</th><th>task run</th><th>state</th><th>started</th><th>why</th></tr></thead>
<tbody><tr><td colspan="5" class="muted">loading the recent runs from Airflow ...</td></tr></tbody></table>
{% if t.exists %}<h2>Health</h2>
<div class="grid" id="charts">{% for name, c in charts.items() %}<div class="card" id="chart-{{ name }}">
<div><b>{{ c.title }}</b></div>{{ c.svg|safe }}
<script type="application/json" class="chart-data" data-chart="{{ name }}">{{ c.data|tojson }}</script></div>{% endfor %}</div>
{% endif %}
<h2>Timeline</h2>
<div id="chart" class="card">{{ chart|safe }}</div>
<table id="timeline"><thead><tr><th>instant</th><th>action</th><th>state</th><th>started</th><th>completed</th>
<th>took</th><th>what</th><th>made by</th><th>committed by</th></tr></thead><tbody>
{% for i in t.timeline|reverse %}<tr data-instant="{{ i.time }}"><td><a class="mono" href="{{ prefix }}/tables/{{ t.name }}/instants/{{ i.time }}">{{ i.time }}</a></td>
<td>{{ i.action }}</td><td><span class="badge{% if i.state != 'completed' %} pending{% endif %}">{{ i.state }}</span></td>
<td class="mono">{{ i.start|clock }}</td><td class="mono">{{ i.end|clock }}</td>
<td class="n">{{ "%.1f s"|format(i.duration_s) if i.duration_s is not none else "-" }}</td>
<td>{{ what(i) }}</td><td>{{ run_link(i.made_by) }}</td><td>{{ run_link(i.committed_by) }}</td></tr>{% endfor %}
</tbody></table>
<h2>File groups</h2>
<table id="file-groups"><thead><tr><th>partition</th><th>file group</th><th>base instant</th><th>base size</th>
<th>log files</th><th>log bytes</th></tr></thead><tbody>
{% for g in t.groups %}<tr><td>{{ g.partition or "(none)" }}</td><td><code>{{ g.file_id }}</code></td>
<td class="mono">{{ g.base_instant }}</td><td class="n">{{ g.base_bytes|size }}</td><td class="n">{{ g.log_files }}</td>
<td class="n">{{ g.log_bytes|size }}</td></tr>{% endfor %}</tbody></table>
<h2>Clean history</h2>
<table id="cleans"><thead><tr><th>instant</th><th>files deleted</th><th>bytes freed</th></tr></thead><tbody>
{% for c in t.cleans|reverse %}<tr><td><a class="mono" href="{{ prefix }}/tables/{{ t.name }}/instants/{{ c.instant }}">{{ c.instant }}</a></td>
<td class="n">{{ c.files_deleted }}</td><td class="n">{{ c.bytes_freed|size if c.bytes_freed is not none else "-" }}</td></tr>
{% else %}<tr><td colspan="3" class="muted">no clean yet</td></tr>{% endfor %}</tbody></table>
<script>
function cell(text, cls) { const td = document.createElement("td"); td.textContent = text || "-"; if (cls) td.className = cls; return td; }
async function loadRuns() {
  const body = document.querySelector("#runs tbody");
  const r = await fetch("{{ prefix }}/api/tables/{{ t.name }}/runs?limit=8", {credentials: "same-origin"});
  const runs = r.ok ? await r.json() : [];
  body.replaceChildren();
  if (!r.ok || !runs.length) { body.append(Object.assign(document.createElement("tr"), {}));
    body.lastChild.append(cell(r.ok ? "no service run yet" : "Airflow's API did not answer (" + r.status + ")", "muted"));
    body.lastChild.firstChild.colSpan = 5; return; }
  for (const ti of runs) {
    const tr = document.createElement("tr"); tr.dataset.state = ti.state || ""; tr.dataset.dag = ti.dag_id;
    tr.dataset.task = ti.task_id;
    const link = document.createElement("a");
    link.href = "/dags/" + ti.dag_id + "/runs/" + encodeURIComponent(ti.run_id) + "/tasks/" + ti.task_id;
    link.textContent = ti.dag_id + "." + ti.task_id + " (try " + ti.try_number + ")";
    link.onclick = () => goAirflow(link.getAttribute("href"));
    const run = document.createElement("td"); run.append(link);
    tr.append(cell(ti.service), run, cell(ti.state, ti.state === "failed" ? "bad" : ""),
              cell((ti.start || "").replace("T", " ").slice(0, 19), "mono"), cell(ti.reason, "reason"));
    body.append(tr);
  }
}
loadRuns();
async function loadAssets() {
  const r = await fetch("{{ prefix }}/api/tables/{{ t.name }}/assets", {credentials: "same-origin"});
  if (!r.ok) return;
  const box = document.getElementById("assets");
  const assets = await r.json();
  if (assets.length) box.append("; Assets: ");
  assets.forEach((a, n) => {
    const link = Object.assign(document.createElement("a"), {href: "/assets/" + a.id, textContent: a.name});
    link.dataset.asset = a.name; link.onclick = () => goAirflow(link.getAttribute("href"));
    if (n) box.append(", ");
    box.append(link);
  });
}
loadAssets();
async function trigger(service) {
  const box = document.getElementById("message");
  box.textContent = "triggering " + service + " ...";
  const r = await fetch("{{ prefix }}/api/tables/{{ t.name }}/trigger/" + service,
                        {method: "POST", credentials: "same-origin", headers: {"X-Lakehouse-Trigger": "1"}});
  const body = await r.json().catch(() => ({}));
  box.textContent = r.ok ? ("triggered " + body.dag_id + ": " + body.dag_run_id)
                         : ("could not trigger " + service + ": " + (body.detail || r.status));
  setTimeout(loadRuns, 3000);
}
</script>
{% endblock %}"""

_INSTANT = """{% extends "base" %}
{% set i = e.instant %}
{% block title %}{{ i.time }} - {{ table }} - Lakehouse{% endblock %}
{% block crumbs %} / <a href="{{ prefix }}/tables/{{ table }}">{{ table }}</a> / {{ i.time }}{% endblock %}
{% block body %}
<h1 id="instant">{{ i.action }} <span class="mono">{{ i.time }}</span>
<span class="badge{% if i.state != 'completed' %} pending{% endif %}">{{ i.state }}</span></h1>
<div class="facts"><div>started <b class="mono">{{ i.start or "-" }}</b></div><div>completed <b class="mono">{{ i.end or "-" }}</b></div>
<div>took <b>{{ "%.1f s"|format(i.duration_s) if i.duration_s is not none else "-" }}</b></div>
<div>{{ what(i) }}</div>{% if i.archived %}<div class="muted">archived</div>{% endif %}</div>
{% if e.note %}<p class="warn" id="note">{{ e.note }}</p>{% endif %}
{% set made = task(e.tags, "airflow.") %}{% set committed = task(e.tags, "airflow.commit.") %}
{% if made or committed %}<p>Made by {{ run_link(made) }}{% if committed %}, committed by {{ run_link(committed) }}{% endif %}</p>{% endif %}
{% if e.write %}<h2>What it wrote ({{ e.write.operation }})</h2>
<table id="partitions"><thead><tr><th>partition</th><th>inserted</th><th>updated</th>
<th title="records appended to an existing file group's log: new and updated keys, not told apart (the bucket index routes a key without looking it up; Hudi counts them as updates)">appended &#9432;</th>
<th>deleted</th><th>records written</th>
<th>files added</th><th>files rewritten</th><th>logs written</th><th>bytes written</th><th>file groups replaced</th></tr></thead><tbody>
{% for p in e.write.partitions %}<tr data-partition="{{ p.partition }}"><td>{{ p.partition or "(none)" }}</td><td class="n">{{ p.inserted }}</td>
<td class="n">{{ p.updated }}</td><td class="n">{{ p.appended }}</td><td class="n">{{ p.deleted }}</td><td class="n">{{ p.written }}</td><td class="n">{{ p.files_added }}</td>
<td class="n">{{ p.files_rewritten }}</td><td class="n">{{ p.logs_written }}</td><td class="n">{{ p.bytes_written|size }}</td>
<td class="n">{{ p.file_groups_replaced or 0 }}</td></tr>{% endfor %}</tbody></table>
<h2>Files</h2><table id="files"><thead><tr><th>file</th><th>change</th><th>previous version</th><th>records</th><th>size</th></tr></thead><tbody>
{% for f in e.write.files %}<tr><td><code>{{ f.path }}</code></td><td>{{ f.change }}</td><td class="mono">{{ f.previous or "-" }}</td>
<td class="n">{{ f.records }}</td><td class="n">{{ f.bytes|size }}</td></tr>{% endfor %}</tbody></table>{% endif %}
{% if e.compaction %}<h2 id="compaction-plan">Compaction plan: {{ e.compaction.operations }} file group(s)</h2>
<table id="plan"><thead><tr><th>partition</th><th>file group</th><th>base instant</th><th>base file</th><th>log files</th><th>log bytes</th></tr></thead><tbody>
{% for o in e.compaction.plan %}<tr><td>{{ o.partition or "(none)" }}</td><td><code>{{ o.file_id }}</code></td><td class="mono">{{ o.base_instant }}</td>
<td><code>{{ o.base_file or "-" }}</code></td><td class="n">{{ o.log_files }}</td><td class="n">{{ o.log_bytes|size }}</td></tr>{% endfor %}</tbody></table>
{% if e.compaction.result %}<p>Wrote {{ e.compaction.result.files|length }} base file(s), {{ e.compaction.result.partitions|sum(attribute="written") }} records.</p>{% endif %}{% endif %}
{% if e.clean %}{% set c = e.clean.plan if e.clean.plan is defined and e.clean.plan else e.clean %}<h2>Clean</h2>
<p>{% if e.clean.plan is defined %}Plans, with policy {{ c.policy }}, to delete{% else %}Deleted {{ c.files_deleted }} file(s){% endif %};
earliest commit retained <span class="mono">{{ c.earliest_retained or "-" }}</span>.</p>
<table id="clean-partitions"><thead><tr><th>partition</th><th>files</th></tr></thead><tbody>{% for p in c.partitions %}<tr><td>{{ p.partition or "(none)" }}</td>
<td class="n">{{ p.files if p.files is defined else p.deleted }}</td></tr>{% endfor %}</tbody></table>{% endif %}
{% if e.rollback %}<h2>Rollback</h2><p>Rolls back <span class="mono">{{ e.rollback.rolled_back|join(", ") }}</span>{% if e.rollback.files_deleted is defined %}: {{ e.rollback.files_deleted }} file(s) deleted{% endif %}.</p>{% endif %}
{% if e.savepoint %}<h2>Savepoint</h2><p>Keeps {{ e.savepoint.files }} file(s) from cleaning.</p>{% endif %}
{% endblock %}"""


def _size(n: Any) -> str:
    return human_bytes(n)


def _clock(t: Any) -> str:
    """An ISO time from the timeline rows (or epoch seconds) as the page shows it (UTC)."""
    if t is None:
        return "-"
    if isinstance(t, (int, float)):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
    return str(t).replace("T", " ").removesuffix("Z")[:19]


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
    env = Environment(loader=DictLoader({"base": _BASE, "tables": _TABLES, "table": _TABLE, "instant": _INSTANT}),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["size"] = _size
    env.filters["clock"] = _clock
    # JSON for a <script type="application/json"> island: "<" escaped, so no "</script>" ends it early.
    env.filters["tojson"] = lambda v: Markup(json.dumps(v, default=str).replace("<", "\\u003c"))
    env.globals.update(run_link=run_link, airflow_link=airflow_link, what=what, task=task_run)
    return env


def render(page: str, **ctx: Any) -> str:
    return _env().get_template(page).render(**ctx)


__all__ = ["render", "run_link", "airflow_link"]
