"""The arena's admin page (``/admin/arena``): the board with its intervals (a table and a
forest plot), the listing threshold, the voting-ring flags, the exclusions (with who, when,
why, and Undo) and the voters.

Why a page and not only the JSON routes: the admin of a public Space tunes the board while it
runs (how many votes a system needs before it is ranked, which voter to drop) and should not
have to restart the Space with another ``LISTENLAB_ARENA_MIN_VOTES`` to do it. The page is
admin-only like everything under ``/admin/`` (the middleware of :mod:`app.listening.routes`
answers others with the login form) and, in case it is mounted without that middleware, its
route requires the admin too. It reads and writes through ``/ll/arena/api/settings``,
``/ll/arena/api/leaderboard``, ``/ll/arena/api/audit``, ``/ll/arena/api/voters`` and the
exclusion routes; every value reaches the page as text (``textContent``), never as markup.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from app.web.admin import TooManyTries, require_admin
from app.web.openapi import DeclaredRoute, errors
from backends.errors import Forbidden

PATH = "/admin/arena"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>listenlab arena admin</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 64rem; margin: 2rem auto; padding: 0 1rem; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #ddd;
padding: .3rem .5rem; text-align: left; font-size: .95em; vertical-align: top; }
code { font-size: .9em; } .aa-muted { opacity: .7; font-size: .9em; }
#aa-status.err { color: #b91c1c; } .aa-prelim td { color: #666; }
#aa-forest { width: 100%; max-width: 46rem; display: block; }
.aa-undone td { color: #888; } .aa-excluded { font-weight: 600; color: #b45309; }
.aa-scroll { overflow-x: auto; max-width: 100%; } td { overflow-wrap: anywhere; }
input { max-width: 100%; box-sizing: border-box; } label { display: inline-block; max-width: 100%; }
</style></head>
<body><main id="aa-root" data-ready="0">
<h1>Arena admin</h1>
<p><a href="/arena/">The arena</a> · <a href="/ll/arena/api/leaderboard">leaderboard JSON</a>
 · <a href="/ll/arena/api/votes.csv">votes.csv</a> · <a href="/ll/arena/api/audit">audit JSON</a>
 · <a href="/admin/tests/">listening tests</a></p>
<p id="aa-status" role="status"></p>
<h2>Board</h2>
<p id="aa-method" class="aa-muted"></p>
<p id="aa-counts"></p>
<div class="aa-scroll"><table><thead><tr><th>rank</th><th>system</th><th>rating</th><th>95 % interval</th>
<th>votes</th><th>wins</th><th>losses</th><th>ties</th><th>both bad</th></tr></thead>
<tbody id="aa-board"></tbody></table></div>
<svg id="aa-forest" role="img" aria-label="Ratings with their 95 % intervals"></svg>
<h2>Listing threshold</h2>
<form id="aa-form">
<label>A system is ranked on the board from
<input id="aa-min" type="number" min="0" max="100000" step="1" required> votes;
with fewer it is listed apart as preliminary.</label>
<button type="submit">Save</button>
<button type="button" id="aa-reset">Use the default</button>
<p>Default of this deployment (<code>LISTENLAB_ARENA_MIN_VOTES</code>):
<b id="aa-default"></b>. Now: <b id="aa-now"></b>. Kept in the database: it survives a
restart.</p>
</form>
<h2>Voting-ring flags</h2>
<p class="aa-muted">Evidence, not proof: each signal also fits some honest voter. Exclude with
a reason; the votes stay stored, stop counting, and an undo brings them back.</p>
<p><label>Reason <input id="aa-reason" size="50" maxlength="500"
 placeholder="why (3 to 500 characters, kept in the record)"></label>
<label>Your name <input id="aa-by" size="16" maxlength="80" placeholder="admin"></label></p>
<div class="aa-scroll"><table><thead><tr><th>flag</th><th>voters</th><th>votes</th><th>what was seen</th></tr></thead>
<tbody id="aa-flags"></tbody></table></div>
<h2>Exclusions</h2>
<div class="aa-scroll"><table><thead><tr><th>voter</th><th>reason</th><th>flags</th><th>votes</th><th>by, when</th>
<th>undone</th><th></th></tr></thead><tbody id="aa-exclusions"></tbody></table></div>
<h2>Voters</h2>
<p>Votes per voter (a keyed hash of the Hugging Face login or the client address), how many
count (first use of a text), and whether excluded. <b>Exclude</b> keeps the votes and stops
counting them (reversible); <b>Drop</b> deletes them and refuses the voter for good.</p>
<div class="aa-scroll"><table><thead><tr><th>voter</th><th>votes</th><th>counted</th><th>first</th><th>last</th>
<th></th></tr></thead><tbody id="aa-voters"></tbody></table></div>
</main>
<script>
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const SVG = 'http://www.w3.org/2000/svg';
  function status(text, err) { $('aa-status').textContent = text; $('aa-status').className = err ? 'err' : ''; }
  async function call(path, body) {
    const r = await fetch(path, body === undefined ? {} : {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    let d = {}; try { d = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((d && (d.error || d.detail || d.message)) || ('HTTP ' + r.status));
    return d;
  }
  function cells(tr, values) {
    for (const x of values) {
      const td = document.createElement('td'); td.textContent = x == null ? '' : String(x); tr.append(td);
    }
    return tr;
  }
  function button(label, cls, onClick) {
    const b = document.createElement('button'); b.type = 'button'; b.textContent = label;
    b.className = cls; b.addEventListener('click', onClick); return b;
  }
  const why = () => ({ reason: $('aa-reason').value, by: $('aa-by').value });
  async function exclude(voter) {
    try { await call('/ll/arena/api/voters/' + encodeURIComponent(voter) + '/exclude', why());
      status('Excluded ' + voter); await refresh(); } catch (e) { status(e.message, true); }
  }
  function showSettings(s) {
    $('aa-min').value = String(s.min_votes); $('aa-now').textContent = String(s.min_votes);
    $('aa-default').textContent = String(s.default_min_votes);
  }
  function forest(rows) {
    const svg = $('aa-forest'); svg.replaceChildren();
    const h = 22 * rows.length + 30, w = 640, left = 170, right = 20;
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    if (!rows.length) return;
    const lo = Math.min(...rows.map((r) => r.ci_low)), hi = Math.max(...rows.map((r) => r.ci_high));
    const x = (v) => left + (hi > lo ? (v - lo) / (hi - lo) : 0.5) * (w - left - right);
    rows.forEach((r, i) => {
      const y = 15 + 22 * i, g = document.createElementNS(SVG, 'g');
      g.setAttribute('class', 'aa-bar'); g.dataset.system = r.system;
      const t = document.createElementNS(SVG, 'text');
      t.setAttribute('x', 4); t.setAttribute('y', y + 4); t.setAttribute('font-size', '12');
      t.textContent = r.system + (r.listed ? '' : ' (prelim.)'); g.append(t);
      const l = document.createElementNS(SVG, 'line');
      l.setAttribute('x1', x(r.ci_low)); l.setAttribute('x2', x(r.ci_high));
      l.setAttribute('y1', y); l.setAttribute('y2', y);
      l.setAttribute('stroke', r.listed ? '#2563eb' : '#999'); l.setAttribute('stroke-width', '2'); g.append(l);
      const c = document.createElementNS(SVG, 'circle');
      c.setAttribute('cx', x(r.rating)); c.setAttribute('cy', y); c.setAttribute('r', 4);
      c.setAttribute('fill', r.listed ? '#2563eb' : 'white'); c.setAttribute('stroke', '#2563eb'); g.append(c);
      svg.append(g);
    });
  }
  async function board() {
    const b = await call('/ll/arena/api/leaderboard');
    $('aa-method').textContent = b.method + '. Rank: ' + b.rank + '.';
    const nc = b.votes_not_counted || {};
    $('aa-counts').textContent = b.total_votes + ' votes count on the board of ' + b.votes_stored +
      ' stored (' + (nc.repeat_text || 0) + ' repeats of a text by its voter, ' +
      (nc.excluded_voter || 0) + ' from excluded voters).';
    const body = $('aa-board'); body.replaceChildren();
    const rows = b.listed.concat(b.preliminary);
    for (const r of rows) {
      const tr = cells(document.createElement('tr'), [r.listed ? r.rank : 'prelim.', r.system,
        r.rating, r.ci_low + ' – ' + r.ci_high, r.votes, r.wins, r.losses, r.ties, r.both_bad]);
      if (!r.listed) tr.className = 'aa-prelim';
      body.append(tr);
    }
    forest(rows);
  }
  async function audit() {
    const a = await call('/ll/arena/api/audit');
    const excluded = new Set(a.exclusions.filter((e) => e.active).map((e) => e.voter));
    const fb = $('aa-flags'); fb.replaceChildren();
    for (const f of a.flags) {
      const tr = document.createElement('tr'); tr.className = 'aa-flag'; tr.dataset.kind = f.kind;
      cells(tr, [f.kind]);
      const td = document.createElement('td');
      for (const v of f.voters) {
        const span = document.createElement('div'); span.textContent = v + ' ';
        if (excluded.has(v)) { span.className = 'aa-excluded'; span.append('(excluded)'); }
        else span.append(button('Exclude', 'aa-exclude', () => exclude(v)));
        td.append(span);
      }
      tr.append(td); cells(tr, [f.votes, f.detail]); fb.append(tr);
    }
    const eb = $('aa-exclusions'); eb.replaceChildren();
    for (const e of a.exclusions) {
      const tr = cells(document.createElement('tr'), [e.voter, e.reason, e.flags.join(', '),
        e.votes, e.excluded_by + ', ' + e.excluded_at,
        e.active ? '' : e.undone_by + ', ' + e.undone_at + ': ' + e.undo_reason]);
      tr.className = e.active ? 'aa-active' : 'aa-undone';
      const td = document.createElement('td');
      if (e.active) td.append(button('Undo', 'aa-undo', async () => {
        try { await call('/ll/arena/api/exclusions/' + encodeURIComponent(e.exclusion_id) + '/undo', why());
          status('Undone: ' + e.voter + ' counts again'); await refresh(); } catch (err) { status(err.message, true); }
      }));
      tr.append(td); eb.append(tr);
    }
  }
  async function voters() {
    const d = await call('/ll/arena/api/voters');
    const body = $('aa-voters'); body.replaceChildren();
    for (const v of d.voters) {
      const tr = cells(document.createElement('tr'), [v.voter, v.votes, v.counted, v.first_vote, v.last_vote]);
      const td = document.createElement('td');
      if (!v.excluded && v.voter) td.append(button('Exclude', 'aa-exclude-voter', () => exclude(v.voter)), ' ');
      td.append(button('Drop', 'aa-drop', async () => {
        if (!confirm('Drop every vote of ' + v.voter + '?')) return;
        try { const r = await call('/ll/arena/api/voters/' + encodeURIComponent(v.voter) + '/drop', {});
          status(r.votes_dropped + ' votes dropped'); await refresh(); } catch (e) { status(e.message, true); }
      }));
      tr.append(td); body.append(tr);
    }
  }
  async function refresh() { await Promise.all([board(), audit(), voters()]); }
  $('aa-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try { showSettings(await call('/ll/arena/api/settings', { min_votes: Number($('aa-min').value) })); status('Saved'); await board(); }
    catch (e) { status(e.message, true); }
  });
  $('aa-reset').addEventListener('click', async () => {
    try { showSettings(await call('/ll/arena/api/settings', { min_votes: null })); status('Back to the default'); await board(); }
    catch (e) { status(e.message, true); }
  });
  Promise.all([call('/ll/arena/api/settings').then(showSettings), refresh()])
    .catch((e) => status(e.message, true))
    .finally(() => { $('aa-root').dataset.ready = '1'; });
})();
</script></body></html>
"""


router = APIRouter(route_class=DeclaredRoute)
ADMIN_ONLY = errors(Forbidden, TooManyTries)
ADMIN_ONLY[403]["content"] = {**ADMIN_ONLY[403]["content"], "text/html": {}}
"""A browser that is not the admin gets the login form (403, :func:`app.listening.routes.admin_pages`)."""


@router.get(
    PATH,
    response_class=HTMLResponse,
    dependencies=[Depends(require_admin)],
    responses=ADMIN_ONLY,
)
async def arena_admin_page() -> HTMLResponse:
    """``GET /admin/arena``: the page above (admin only)."""
    return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})
