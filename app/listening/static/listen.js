// listenlab rater page: consent, anonymous token (localStorage, resumable), headphone check,
// and the items, played through the one player (LLPlayer). What a rater answers is the test
// kind's: its page script (evaluation/listening/kinds/<kind>/page.js, served beside this one)
// registers window.LLKinds[kind] = { render(ctx) -> view }, and this page asks the view
// whether the answer is complete (view.ready()) and what to send (view.answer()). The server
// decides what plays (the page sends only the item and slot) and enforces listen-gating from
// play events; the buttons here only mirror it. Every text from the server is put on the page
// with textContent.
(function () {
  'use strict';
  const root = document.getElementById('lt-root');
  const TEST = root.dataset.testId;
  const KEY = 'listenlab:rater:' + TEST;
  const BASE = LLPlayer.base('listen');
  const API = BASE + 'll/listen/' + encodeURIComponent(TEST) + '/';
  const $ = (id) => document.getElementById(id);
  const S = (window.listenTest = { token: null, status: null, played: {}, errors: [], votes: [], view: null });
  const CROWD_KEYS = ['PROLIFIC_PID', 'workerId', 'crowd_id', 'participant'];
  // every text a rater reads comes from the server (app/listening/texts.py): status.test.texts
  const texts = () => (S.status && S.status.test && S.status.test.texts) || {};

  // The token and unsent answers live in localStorage so a reload resumes. Inside a page framed
  // by another site (huggingface.co frames a Space) a browser may refuse storage: the test then
  // still runs in memory, and the page says so and links to the test opened on its own.
  const STORE = (() => { try { const s = window.localStorage; s.getItem(KEY); return s; } catch (e) { return null; } })();
  const mem = {};
  const saved = {
    get: (k) => (STORE ? STORE.getItem(k) : (k in mem ? mem[k] : null)),
    set: (k, v) => { if (STORE) STORE.setItem(k, v); else mem[k] = v; },
    del: (k) => { if (STORE) STORE.removeItem(k); else delete mem[k]; },
  };
  function frameNote() {
    const crowd = CROWD_KEYS.some((k) => new URLSearchParams(location.search).get(k));
    const p = el('p', 'This browser keeps nothing for this page inside the page that frames it: '
      + (crowd
        ? 'after a reload, agree again and you are back at the clip you were on (your participant id '
          + 'finds your place), or '
        : 'finish without reloading (a reload starts again), or '), 'lt-note');
    p.id = 'lt-frame-note';
    const a = el('a', 'open the test on its own');
    a.id = 'lt-open-direct'; a.href = location.href; a.target = '_blank'; a.rel = 'noopener';
    p.append(a, '.');
    root.insertBefore(p, $('lt-status'));
  }

  function status(text, err) { const s = $('lt-status'); s.textContent = text || ''; s.className = 'lt-status' + (err ? ' err' : ''); }
  function show(id) { for (const s of ['lt-consent', 'lt-questionnaire', 'lt-headphones', 'lt-screenout', 'lt-familiar', 'lt-item', 'lt-done']) $(s).hidden = s !== id; }
  function el(tag, text, cls) { const e = document.createElement(tag); if (text != null) e.textContent = String(text); if (cls) e.className = cls; return e; }
  function randId() { return (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2) + Date.now()).replace(/-/g, ''); }

  async function api(path, body, method) {
    const headers = { 'Content-Type': 'application/json' };
    if (S.token) headers['X-Rater-Token'] = S.token;
    const r = await fetch(API + path, { method: method || (body ? 'POST' : 'GET'), headers, body: body ? JSON.stringify(body) : undefined });
    let data = null; try { data = await r.json(); } catch (e) { data = {}; }
    if (!r.ok) { const e = new Error((data && data.detail) || ('HTTP ' + r.status)); e.status = r.status; throw e; }
    return data;
  }

  // ---------------------------------------------------------------- the one player
  // The server sends each stimulus blind (one format for the whole test, equal frames, an
  // opaque stream id): the page knows a stream only by the token it asked with.
  const tokens = {};     // generation token -> {aid, slot}
  let playing = null;    // {aid, slot, token}
  const player = LLPlayer.create({ base: BASE, onEvent });
  S.player = player;

  function onEvent(type, d) {
    if (type === 'start' && tokens[d.token]) { S.lastStart = d; }
    else if (type === 'underrun') { S.underruns = (S.underruns || []).concat([d]); }
    else if (type === 'ended') {
      const g = player.current, info = g && tokens[g.token]; if (!info) return;   // emitted for the current stream
      S.lastEnded = d;
      reportPlay(info, d.played_ms || 0, d.underruns || 0, d.stall_ms || 0);
      markButton(info, false);
      if (playing && playing.aid === info.aid && playing.slot === info.slot) playing = null;
    } else if (type === 'error') {
      const cut = /connection to the server was lost/.test(d.message || '');
      status(cut ? (connText().cut || d.message) : 'Playback error: ' + d.message, true);
    } else if (type === 'message') onMessage(d);
    else if (type === 'connection') connection(d);
  }

  // While the socket is down the player reconnects (a timeout per try, a growing wait between
  // tries); the page says so, and what the rater can do, until it is back.
  const connText = () => texts().connection || {};
  let backTimer = null;
  function connection(d) {
    const box = $('lt-conn'), t = connText();
    root.dataset.connection = d.state;
    clearTimeout(backTimer);
    if (d.state === 'open') {
      if (!S.offline) { box.hidden = true; return; }
      S.offline = false;
      box.textContent = t.back || 'Connected to the server again.'; box.hidden = false;
      backTimer = setTimeout(() => { box.hidden = true; }, 4000);
      return;
    }
    if (d.state === 'connecting' && !S.offline) return;   // the first connect: nothing to say yet
    if (d.state === 'lost') S.offline = true;
    const tpl = d.state === 'lost' ? t.lost : t.connecting;
    box.textContent = String(tpl || 'Reconnecting to the server…')
      .replace('{n}', String(d.attempt || 1)).replace('{s}', String(Math.ceil((d.retry_ms || 0) / 1000)));
    box.hidden = false;
  }

  function onMessage(m) {
    if (m.type === 'play_saved') {
      const k = m.assignment_id + ':' + m.slot;
      S.played[k] = Math.max(S.played[k] || 0, m.played_ms || 0);
      refreshGate();
    } else if (m.type === 'listen_error') { S.errors.push(m); status(m.message, true); }
    else if (S.view && S.view.onMessage) S.view.onMessage(m);   // the kind's own replies
  }

  function reportPlay(info, playedMs, underruns, stallMs) {
    player.send({ type: 'play_event', test_id: TEST, rater_token: S.token, assignment_id: info.aid, slot: info.slot,
      played_ms: playedMs, underruns, stall_ms: stallMs });
  }

  function play(slot) {
    const it = S.status && S.status.item; if (!it) return;
    const info = { aid: it.assignment_id, slot };
    const g = player.current;
    if (playing && g && g.token === playing.token && !g.finished) {   // switched mid-play: what was heard counts
      reportPlay(playing, player.positionMs() || 0, g.underruns.count, g.underruns.stallMs);
    }
    const token = player.request({ type: 'stimulus', test_id: TEST, rater_token: S.token, assignment_id: it.assignment_id, slot });
    tokens[token] = info; playing = Object.assign({ token }, info);
    for (const b of document.querySelectorAll('.lt-play')) b.classList.remove('lt-on');
    markButton(info, true);
    status('');
  }
  function markButton(info, on) {
    const b = document.querySelector('.lt-play[data-slot="' + info.slot + '"]');
    if (b) b.classList.toggle('lt-on', on);
  }


  // ---------------------------------------------------------------- flow
  async function start() {
    if (!STORE) frameNote();
    S.token = saved.get(KEY);
    if (S.token) {
      try { await refresh(); return; } catch (e) {
        if (e.status === 403 && /token/.test(e.message)) { saved.del(KEY); S.token = null; }
        else { status(e.message, true); root.dataset.ready = '1'; return; }
      }
    }
    try {
      const info = await api('info');
      $('lt-title').textContent = info.name || 'Listening test';
      $('lt-consent-text').textContent = info.consent;
      if (info.status !== 'open') { status('This test is ' + info.status + '.', true); root.dataset.ready = '1'; return; }
      show('lt-consent');
    } catch (e) { status(e.message, true); }
    root.dataset.ready = '1';
  }

  $('lt-agree').addEventListener('click', async () => {
    $('lt-agree').disabled = true;
    try {
      const q = new URLSearchParams(location.search);
      const src = CROWD_KEYS.find((k) => q.get(k));
      const j = await api('join', { crowd_id: src ? q.get(src) : null, source: src || null,
        study_id: q.get('STUDY_ID') || null, session_id: q.get('SESSION_ID') || null });
      S.token = j.token; saved.set(KEY, j.token);
      await api('consent', {});
      await refresh();
    } catch (e) { status(e.message, true); $('lt-agree').disabled = false; }
  });

  async function refresh() {
    const st = await api('status');
    S.status = st;
    $('lt-title').textContent = st.test.name || 'Listening test';
    render();
    root.dataset.ready = '1';
    return st;
  }

  function render() {
    const st = S.status;
    // the counter runs only while rating: it counts the clips rated, not the screen's trials
    $('lt-progress').hidden = st.stage !== 'item';
    $('lt-bar').max = st.total || 1; $('lt-bar').value = st.answered;
    $('lt-count').textContent = (texts().counter || 'Clip {n} of {total}')
      .replace('{n}', String(Math.min(st.answered + 1, st.total))).replace('{total}', String(st.total));
    root.dataset.position = st.item ? st.item.position : 'done';
    root.dataset.stage = st.stage;
    // the screen's outcome ("passed ... the test starts now") until the first answer, not after
    if ((st.stage !== 'item' && st.stage !== 'familiarise') || st.answered > 0) $('lt-hp-outcome').hidden = true;
    if (st.stage === 'consent') { $('lt-consent-text').textContent = st.test.consent; show('lt-consent'); return; }
    if (st.stage === 'questionnaire') return renderQuestionnaire();
    if (st.stage === 'screened_out') return screen.renderScreenout(st);
    if (st.stage === 'screen') return screen.renderScreen(st);
    if (st.stage === 'familiarise') return screen.renderFamiliar(st);
    if (st.finished) return renderDone();
    renderItem();
  }

  // ---------------------------------------------------------------- questionnaire
  function renderQuestionnaire() {
    show('lt-questionnaire');
    const q = texts().questionnaire || { intro: '', questions: [] };
    $('lt-q-intro').textContent = q.intro;
    const form = $('lt-q-form'); form.replaceChildren();
    for (const item of q.questions) {
      const fs = el('fieldset'); fs.append(el('legend', item.question));
      for (const opt of item.options) {
        const lab = el('label'); const r = el('input'); r.type = 'radio'; r.name = item.key; r.value = opt;
        r.addEventListener('change', () => { $('lt-q-send').disabled = !q.questions.every((x) => form.querySelector('input[name="' + x.key + '"]:checked')); });
        lab.append(r, ' ' + opt); fs.append(lab);
      }
      form.append(fs);
    }
    $('lt-q-send').disabled = true;
  }
  $('lt-q-send').addEventListener('click', async () => {
    const answers = {};
    for (const r of $('lt-q-form').querySelectorAll('input:checked')) answers[r.name] = r.value;
    $('lt-q-send').disabled = true;
    try { await api('questionnaire', { answers }); await refresh(); }
    catch (e) { status(e.message, true); $('lt-q-send').disabled = false; }
  });

  // the headphone screen, familiarisation and screen-out pages (screen.js)
  const screen = LLScreen.create({ api, base: API, token: () => S.token, player, show, refresh,
    status, root, current: () => S.status });

  // ---------------------------------------------------------------- items
  // The kind's page script draws the answer (window.LLKinds[kind].render(ctx) -> view); these
  // are the helpers it gets, so every kind's buttons look and behave alike.
  function playButtons() {   // one Play button per slot; the server gates the vote on them
    const it = S.status.item, slots = $('lt-slots');
    for (let i = 0; i < it.slots; i++) {
      const row = el('div', null, 'lt-slot');
      const b = el('button', it.labels[i] === 'Play' ? 'Play' : 'Play ' + it.labels[i], 'lt-play');
      b.type = 'button'; b.dataset.slot = String(i);
      b.addEventListener('click', () => play(i));
      row.append(b, el('span', '', 'lt-played'));
      slots.append(row);
    }
  }
  function choiceButtons(labels, fill) {   // one button per [value, label]; returns the chosen value (null: none)
    const vote = $('lt-vote'); let chosen = null;
    for (const [v, label] of labels) {
      const b = el('button', null, 'lt-choice'); b.type = 'button'; b.dataset.value = String(v);
      fill(b, v, label);
      b.addEventListener('click', () => { chosen = v; for (const x of vote.children) x.classList.toggle('lt-on', x === b); refreshGate(); });
      vote.append(b);
    }
    return () => chosen;
  }
  function dropView() { if (S.view && S.view.destroy) S.view.destroy(); S.view = null; }

  function renderItem() {
    const it = S.status.item;
    show('lt-item');
    dropView();
    const tx = texts();
    // the built-in instructions always; the researcher's own below them, never instead
    $('lt-instructions').textContent = tx.instructions || '';
    $('lt-admin-label').textContent = tx.admin_instructions_label || '';
    $('lt-admin-text').textContent = tx.admin_instructions || '';
    $('lt-admin-instructions').hidden = !tx.admin_instructions;
    $('lt-question').textContent = (tx.scale && tx.scale.question) || '';
    // the prompt's text, when the test shows it: always as text, never as markup
    $('lt-text').textContent = typeof it.text === 'string' ? it.text : '';
    $('lt-text').hidden = typeof it.text !== 'string' || !it.text;
    const slots = $('lt-slots'); slots.replaceChildren();
    const vote = $('lt-vote'); vote.replaceChildren(); vote.className = '';
    const kind = (window.LLKinds || {})[it.kind];
    if (!kind) { status('This page has no script for this test\'s type.', true); return; }
    S.view = kind.render({
      item: it, test: S.status.test, scale: tx.scale || {}, slots, vote, player, testId: TEST, token: S.token,
      el, randId, playButtons, choiceButtons, play, playing: () => playing,
      changed: refreshGate, error: (m) => status(m, true),
    });
    $('lt-submit').textContent = S.view.submitLabel || 'Submit';
    refreshGate();
  }

  function gateOk() {
    const it = S.status && S.status.item; if (!it) return false;
    let ok = true;
    const rows = document.querySelectorAll('#lt-slots .lt-slot');
    for (let i = 0; i < it.slots; i++) {
      const p = S.played[it.assignment_id + ':' + i] || 0;
      if (rows[i]) rows[i].querySelector('.lt-played').textContent = p ? 'played ' + (p / 1000).toFixed(1) + ' s' : '';
      if (p + 1e-6 < it.need_ms[i]) ok = false;
    }
    return ok;
  }
  function refreshGate() {
    if (!S.status || !S.status.item) return;
    const chosen = !!S.view && S.view.ready();
    $('lt-submit').disabled = !(gateOk() && chosen) || S.sending;
  }

  $('lt-submit').addEventListener('click', async () => {
    const it = S.status && S.status.item; if (!it || S.sending) return;
    S.sending = true; $('lt-submit').disabled = true;
    const akey = KEY + ':answer:' + it.assignment_id;
    let answer_id = saved.get(akey);
    if (!answer_id) { answer_id = randId(); saved.set(akey, answer_id); }   // re-sends are idempotent
    const body = Object.assign(S.view ? S.view.answer() : {}, { answer_id, assignment_id: it.assignment_id });
    try {
      const r = await api('vote', body);
      S.votes.push(r);
      saved.del(akey);
      player.stop();
      dropView();
      await refresh();
    } catch (e) {
      status(e.message, true);
      if (e.status === 409 && /already answered/.test(e.message)) { saved.del(akey); await refresh(); }
    } finally { S.sending = false; refreshGate(); }
  });

  function renderDone() {
    show('lt-done');
    $('lt-code').textContent = S.status.completion_code || '';
    const url = S.status.redirect_url;
    if (url && /^https:\/\//.test(url)) { $('lt-redirect').hidden = false; setTimeout(() => { location.href = url; }, 3000); }
  }

  start();
})();
