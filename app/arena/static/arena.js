// listenlab open arena page, built on the player core (window.LLPlayer, player-core.js).
// Runs as the body of gr.HTML(js_on_load=player_core_js() + arena_js()): `element` is the
// component's root. The page never names a system: it asks the server for a battle and for a
// *side*; the server picks the backend and streams it through the one player. The vote buttons
// unlock when the server says both sides were played to the end (it refuses an early vote
// anyway). Every string from the server reaches the page through textContent.
(() => {
  const root = element.querySelector('#ll-arena') || element;
  const $ = (id) => root.querySelector('#' + id);
  // the page lives at <prefix>/arena/: the player's routes are at <prefix>/ll/...
  const BASE = LLPlayer.base('arena');
  const SIDES = ['a', 'b'];
  const CHOICES = ['a', 'tie', 'both_bad', 'b'];
  const AUTO_NEXT_MS = 500;     // pause between A's end and B's start (as TTS Arena V2)

  const S = { battle: null, played: { a: false, b: false }, ready: false, voted: null,
    current: null, reqSeq: 0, pendingReq: null, maxChars: 300, events: [] };
  const api = (window.listenlab = window.listenlab || {});
  api.arena = S;

  function status(text, cls) { const s = $('ar-status'); s.textContent = text; s.className = 'ar-status ' + (cls || ''); }
  function sideState(side, text) { $('ar-state-' + side).textContent = text; }
  function log(type, detail) { S.events.push({ type, t: performance.now(), detail }); if (S.events.length > 500) S.events.shift(); }

  function setVoteEnabled(on) { for (const c of CHOICES) $('ar-vote-' + c).disabled = !on; }
  function setPlayEnabled(on) { for (const s of SIDES) $('ar-play-' + s).disabled = !on; }
  function updateCount() {
    const n = $('ar-text').value.trim().length;
    $('ar-count').textContent = n + ' / ' + S.maxChars;
    $('ar-start').disabled = !S.sessionOk || n < 2 || n > S.maxChars || S.pendingReq !== null;
  }

  function resetBattle() {
    S.battle = null; S.played = { a: false, b: false }; S.ready = false; S.voted = null; S.current = null;
    for (const s of SIDES) {
      sideState(s, 'not played');
      $('ar-name-' + s).textContent = 'hidden until you vote';
      $('ar-side-' + s).classList.remove('ar-playing');
    }
    setVoteEnabled(false); setPlayEnabled(false);
  }

  let player = null;

  function speak(side) {
    if (!S.battle || !player) return;
    for (const s of SIDES) $('ar-side-' + s).classList.toggle('ar-playing', s === side);
    sideState(side, 'requesting…');
    const token = player.request({ type: 'arena_speak', battle_id: S.battle.battle_id, side });
    S.current = { side, token, battleId: S.battle.battle_id };
  }

  function onEvent(type, d) {
    log(type, d);
    const cur = S.current;
    const mine = cur && player && player.current && player.current.token === cur.token;
    switch (type) {
      case 'queued': if (mine) sideState(cur.side, 'waiting for the server…'); break;
      case 'start': if (mine) sideState(cur.side, 'streaming…'); break;
      case 'playing': if (mine) sideState(cur.side, 'playing…'); break;
      case 'underrun': if (mine) sideState(cur.side, 'playing (the stream stalled)…'); break;
      case 'error':
        if (mine) { sideState(cur.side, 'failed'); status('Side ' + cur.side.toUpperCase() + ': ' + d.message, 'ar-error'); setPlayEnabled(!!S.battle && !S.voted); }
        break;
      case 'ended':
        if (!mine) break;
        $('ar-side-' + cur.side).classList.remove('ar-playing');
        if (d.complete && !d.stopped && d.take_id) {
          sideState(cur.side, 'played — checking…');
          player.send({ type: 'arena_played', battle_id: cur.battleId, side: cur.side,
            take_id: d.take_id, played_ms: d.played_ms });
        } else if (!S.played[cur.side]) {
          sideState(cur.side, 'not played to the end — play it again');
        }
        setPlayEnabled(!!S.battle && !S.voted);
        break;
      case 'message': onMessage(d); break;
      case 'close': if (S.battle && !S.voted) status('Connection lost; reconnecting…', 'ar-error'); break;
      default: break;
    }
  }

  function onMessage(m) {
    if (m.type === 'arena_battle') {
      if (m.req !== S.pendingReq) return;            // an answer to an older click
      S.pendingReq = null; updateCount();
      resetBattle();
      S.battle = { battle_id: String(m.battle_id), text: String(m.text) };
      status('Battle started: listen to A, then B. The vote unlocks after both played to the end.');
      speak('a');
    } else if (m.type === 'arena_played') {
      if (!S.battle || m.battle_id !== S.battle.battle_id) return;
      for (const s of SIDES) { S.played[s] = !!(m.played && m.played[s]); if (S.played[s]) sideState(s, 'played ✓'); }
      S.ready = !!m.ready;
      if (S.ready && !S.voted) { setVoteEnabled(true); status('Both played. Which one sounds better?'); }
      else if (m.side === 'a' && !S.played.b) setTimeout(() => { if (S.battle && S.battle.battle_id === m.battle_id && !S.played.b) speak('b'); }, AUTO_NEXT_MS);
    } else if (m.type === 'arena_voted') {
      if (!S.battle || m.battle_id !== S.battle.battle_id) return;
      S.voted = String(m.choice);
      setVoteEnabled(false); setPlayEnabled(false);
      for (const s of SIDES) $('ar-name-' + s).textContent = String((m.systems || {})[s] || '?');
      const label = { a: 'A is better', b: 'B is better', tie: 'a tie', both_bad: 'both bad' }[S.voted] || S.voted;
      status('Vote recorded (' + label + ')' + (m.counted ? '' : ' — it was already counted once') + '. Type or draw another text for the next battle.');
      refreshBoard();
    } else if (m.type === 'arena_error') {
      if (m.reason === 'rate_limited' || m.battle_id == null) { S.pendingReq = null; updateCount(); }
      if (m.battle && S.battle && m.battle.battle_id === S.battle.battle_id && m.battle.systems) {
        S.voted = String(m.battle.voted);
        for (const s of SIDES) $('ar-name-' + s).textContent = String(m.battle.systems[s]);
        setVoteEnabled(false);
      }
      status(String(m.message), 'ar-error');
    }
  }

  function refreshBoard() {
    const b = document.querySelector('#arena-refresh');
    if (b) b.click();
  }

  function start() {
    const text = $('ar-text').value.trim();
    if (!text || !player) return;
    if (player.current && !player.current.finished) player.stop();
    S.reqSeq += 1; S.pendingReq = S.reqSeq; updateCount();
    resetBattle();
    status('Starting a battle…');
    player.send({ type: 'arena_new', text, req: S.reqSeq });
  }

  async function randomPrompt() {
    try {
      const r = await fetch(BASE + 'll/arena/api/prompt', { credentials: 'same-origin' });
      const j = await r.json();
      if (!r.ok) throw new Error(j.error || r.statusText);
      $('ar-text').value = String(j.text).slice(0, S.maxChars);
      updateCount();
    } catch (e) { status('No random prompt: ' + e.message, 'ar-error'); }
  }

  function cookieNote() {
    const note = document.createElement('p');
    note.id = 'ar-cookie-note';
    note.className = 'ar-note';
    note.textContent = 'This browser keeps no cookie for this site inside the page that frames it: '
      + 'a battle lasts only while this page is open, and Hugging Face login cannot work here. ';
    const a = document.createElement('a');
    a.id = 'ar-open-direct'; a.href = location.href; a.target = '_blank'; a.rel = 'noopener';
    a.textContent = 'Open the arena on its own';
    note.append(a);
    root.prepend(note);
  }

  function vote(choice) {
    if (!S.battle || S.voted) return;
    setVoteEnabled(false);                               // the server counts one vote anyway
    player.send({ type: 'arena_vote', battle_id: S.battle.battle_id, choice });
  }

  $('ar-text').addEventListener('input', updateCount);
  $('ar-random').addEventListener('click', randomPrompt);
  $('ar-start').addEventListener('click', start);
  for (const s of SIDES) $('ar-play-' + s).addEventListener('click', () => speak(s));
  for (const c of CHOICES) $('ar-vote-' + c).addEventListener('click', () => vote(c));

  (async () => {
    // the session cookie must exist before the player's WebSocket opens (it names the owner)
    try {
      const r = await fetch(BASE + 'll/arena/session', { method: 'POST', credentials: 'same-origin' });
      const j = await r.json();
      if (!r.ok) throw new Error(j.error || r.statusText);
      S.maxChars = j.max_chars; S.sessionOk = j.ready;
      if (!j.ready) status('The arena needs at least two systems on this server.', 'ar-error');
      // a second call tells whether the browser kept the cookie the first one set: inside a page
      // framed by another site (huggingface.co frames a Space) some browsers keep none
      const again = await (await fetch(BASE + 'll/arena/session', { method: 'POST', credentials: 'same-origin' })).json();
      S.cookieKept = !again.new_session;
      if (!S.cookieKept) cookieNote();
    } catch (e) { status('Cannot start an arena session: ' + e.message, 'ar-error'); return; }
    player = LLPlayer.create({ base: BASE, onEvent });
    api.player = player;
    updateCount();
    root.dataset.ready = '1';
  })();
})();
