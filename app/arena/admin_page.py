"""The arena's admin page (``/admin/arena``): the listing threshold and the voters.

Why a page and not only the JSON routes: the admin of a public Space tunes the board while it
runs (how many votes a system needs before it is ranked, which voter to drop) and should not
have to restart the Space with another ``LISTENLAB_ARENA_MIN_VOTES`` to do it. The page is
admin-only like everything under ``/admin/`` (the middleware of :mod:`app.listening.routes`
answers others with the login form) and, in case it is mounted without that middleware, its
route requires the admin too. It reads and writes through ``/ll/arena/api/settings`` and
``/ll/arena/api/voters``; every value on the page is escaped (voter hashes are validated anyway).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from app.web.admin import require_admin

PATH = "/admin/arena"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>listenlab arena admin</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #ddd;
padding: .3rem .5rem; text-align: left; font-size: .95em; } code { font-size: .9em; }
#aa-status.err { color: #b91c1c; }
</style></head>
<body><main id="aa-root" data-ready="0">
<h1>Arena admin</h1>
<p><a href="/arena/">The arena</a> · <a href="/ll/arena/api/leaderboard">leaderboard JSON</a>
 · <a href="/ll/arena/api/votes.csv">votes.csv</a> · <a href="/admin/tests/">listening tests</a></p>
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
<p id="aa-status" role="status"></p>
<h2>Voters</h2>
<p>Votes per voter (a keyed hash of the Hugging Face login or the client address). Dropping a
voter deletes all their votes and refuses their later ones; the board recomputes.</p>
<table><thead><tr><th>voter</th><th>votes</th><th>first</th><th>last</th><th></th></tr></thead>
<tbody id="aa-voters"></tbody></table>
</main>
<script>
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  function status(text, err) { $('aa-status').textContent = text; $('aa-status').className = err ? 'err' : ''; }
  async function call(path, body) {
    const r = await fetch(path, body === undefined ? {} : {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    let d = {}; try { d = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((d && (d.detail || d.message)) || ('HTTP ' + r.status));
    return d;
  }
  function showSettings(s) {
    $('aa-min').value = String(s.min_votes); $('aa-now').textContent = String(s.min_votes);
    $('aa-default').textContent = String(s.default_min_votes);
  }
  async function voters() {
    const d = await call('/ll/arena/api/voters');
    const body = $('aa-voters'); body.replaceChildren();
    for (const v of d.voters) {
      const tr = document.createElement('tr');
      for (const x of [v.voter, v.votes, v.first_vote, v.last_vote]) {
        const td = document.createElement('td'); td.textContent = x == null ? '' : String(x); tr.append(td);
      }
      const td = document.createElement('td'); const b = document.createElement('button');
      b.type = 'button'; b.textContent = 'Drop'; b.className = 'aa-drop';
      b.addEventListener('click', async () => {
        if (!confirm('Drop every vote of ' + v.voter + '?')) return;
        try { const r = await call('/ll/arena/api/voters/' + encodeURIComponent(v.voter) + '/drop', {});
          status(r.votes_dropped + ' votes dropped'); await voters(); } catch (e) { status(e.message, true); }
      });
      td.append(b); tr.append(td); body.append(tr);
    }
  }
  $('aa-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try { showSettings(await call('/ll/arena/api/settings', { min_votes: Number($('aa-min').value) })); status('Saved'); }
    catch (e) { status(e.message, true); }
  });
  $('aa-reset').addEventListener('click', async () => {
    try { showSettings(await call('/ll/arena/api/settings', { min_votes: null })); status('Back to the default'); }
    catch (e) { status(e.message, true); }
  });
  Promise.all([call('/ll/arena/api/settings').then(showSettings), voters()])
    .catch((e) => status(e.message, true))
    .finally(() => { $('aa-root').dataset.ready = '1'; });
})();
</script></body></html>
"""


router = APIRouter()


@router.get(PATH, response_class=HTMLResponse, dependencies=[Depends(require_admin)])
async def arena_admin_page() -> HTMLResponse:
    """``GET /admin/arena``: the page above (admin only)."""
    return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})
