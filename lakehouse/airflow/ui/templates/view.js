// Times as Airflow shows them: the date and time, and how long ago ("3 min ago"), kept fresh.
function lhAgo(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 45) return "just now";
  if (s < 90) return "1 min ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 5400) return "1 hour ago";
  if (s < 86400) return Math.round(s / 3600) + " hours ago";
  if (s < 172800) return "1 day ago";
  return Math.round(s / 86400) + " days ago";
}
function lhTimes(root) {
  for (const el of (root || document).querySelectorAll("time[datetime]")) {
    const ms = Date.parse(el.getAttribute("datetime"));
    if (isNaN(ms)) continue;
    const ago = el.querySelector(".ago") || el.appendChild(Object.assign(document.createElement("span"), {className: "ago"}));
    ago.textContent = " (" + lhAgo(ms) + ")";
  }
}
// A <time> element for an ISO time, as the server renders them (UTC, Airflow's default).
function lhTime(iso) {
  const el = document.createElement("time");
  el.setAttribute("datetime", iso);
  const d = new Date(iso);
  const p = n => String(n).padStart(2, "0");
  el.textContent = isNaN(d) ? iso : d.getUTCFullYear() + "-" + p(d.getUTCMonth() + 1) + "-" + p(d.getUTCDate()) + " " +
    p(d.getUTCHours()) + ":" + p(d.getUTCMinutes()) + ":" + p(d.getUTCSeconds());
  return el;
}
lhTimes();
setInterval(lhTimes, 30000);

// Tables with many rows (class lh-data): sort by a column header, filter by text, page through.
// The rows are all in the page; these only reorder and hide them.
function lhDataTable(table) {
  const size = parseInt(table.dataset.pageSize || "50", 10);
  const body = table.tBodies[0];
  const all = [...body.rows].filter(r => !r.classList.contains("empty"));
  let order = all, shown = all, query = "", page = 0, sortCol = -1, sortDir = 1;
  const bar = document.createElement("div");
  bar.className = "lh-bar";
  const filter = Object.assign(document.createElement("input"), {type: "search", placeholder: "Filter rows"});
  filter.setAttribute("aria-label", "Filter " + (table.getAttribute("aria-label") || table.id));
  const info = Object.assign(document.createElement("span"), {className: "muted lh-info"});
  const prev = Object.assign(document.createElement("button"), {type: "button", textContent: "Previous", className: "ghost"});
  const next = Object.assign(document.createElement("button"), {type: "button", textContent: "Next", className: "ghost"});
  bar.append(filter, info, prev, next);
  table.before(bar);
  function key(row, col) {
    const cell = row.cells[col];
    if (!cell) return "";
    return cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
  }
  function render() {
    const pages = Math.max(1, Math.ceil(shown.length / size));
    page = Math.min(page, pages - 1);
    const from = page * size, to = Math.min(shown.length, from + size);
    const visible = new Set(shown.slice(from, to));
    for (const r of all) r.hidden = !visible.has(r);
    // One fragment, not append(...shown): a spread of 100,000 rows overflows the call stack.
    const frag = document.createDocumentFragment();
    for (const r of shown) frag.appendChild(r);
    body.appendChild(frag);
    info.textContent = shown.length ? (from + 1).toLocaleString() + "\u2013" + to.toLocaleString() + " of " +
      shown.length.toLocaleString() + (shown.length < all.length ? " (filtered from " + all.length.toLocaleString() + ")" : "")
      : all.length ? "no rows match" : "no rows";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
    table.dataset.page = String(page + 1);
    table.dataset.pages = String(pages);
  }
  function sort(col, numeric) {
    sortDir = col === sortCol ? -sortDir : 1;
    sortCol = col;
    const cmp = numeric ? (a, b) => (parseFloat(key(a, col)) || 0) - (parseFloat(key(b, col)) || 0)
                        : (a, b) => key(a, col).localeCompare(key(b, col), undefined, {numeric: true});
    order = [...all].sort((a, b) => sortDir * cmp(a, b));
    apply();
    for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
    table.tHead.rows[0].cells[col].setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
  }
  function apply() {
    shown = query ? order.filter(r => r.textContent.toLowerCase().includes(query)) : order;
    page = 0;
    render();
  }
  [...table.tHead.rows[0].cells].forEach((th, col) => {
    if (th.dataset.sort === undefined) return;
    th.classList.add("sortable");
    th.tabIndex = 0;
    const go = () => sort(col, th.dataset.sort === "num");
    th.addEventListener("click", go);
    th.addEventListener("keydown", e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); } });
  });
  filter.addEventListener("input", () => { query = filter.value.trim().toLowerCase(); apply(); });
  prev.addEventListener("click", () => { page -= 1; render(); });
  next.addEventListener("click", () => { page += 1; render(); });
  render();
}
document.querySelectorAll("table.lh-data").forEach(lhDataTable);

// Copy buttons of the Query panel.
document.querySelectorAll("button[data-copy]").forEach(b => b.addEventListener("click", async () => {
  const code = document.getElementById(b.dataset.copy).textContent;
  try { await navigator.clipboard.writeText(code); b.textContent = "Copied"; }
  catch (e) { b.textContent = "Select and copy"; }
  setTimeout(() => { b.textContent = "Copy"; }, 2000);
}));
