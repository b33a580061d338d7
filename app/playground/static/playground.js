// listenlab Playground page, built on the player core (window.LLPlayer, player-core.js).
// Runs as the body of gr.HTML(js_on_load=player_core_js() + playground_js()): `element` is the
// component's root. Every string from the server, a backend or the DB reaches the page through
// textContent (never innerHTML with data).
(() => {
  const root = element.querySelector('#ll-root') || element;
  const $ = (id) => root.querySelector('#' + id);
  const BASE = LLPlayer.base();   // the page's data-base (player-core.js: one helper)
  let config = null;

  const player = LLPlayer.create({ base: BASE, onEvent });

  // window.listenlab: what tests and benchmarks read (the current generation, the context...)
  const api = (window.listenlab = window.listenlab || {});
  api.player = player;
  api.gens = player.gens;
  Object.defineProperties(api, {
    last: { get: () => player.current, configurable: true },
    ctx: { get: () => player.ctx, configurable: true },
    session: { get: () => player.session, configurable: true },
    underrunsSaved: { get: () => player.underrunsSaved, configurable: true },
    firstScheduledMs: { get: () => player.firstScheduledMs, configurable: true },
  });
  api.positionMs = () => player.positionMs() || 0;
  api.pcmBase64 = (g) => player.pcmBase64(g);

  // ------------------------------------------------------------------ UI helpers
  function status(text, cls) { const s = $('ll-status'); s.textContent = text; s.className = 'll-status ' + (cls || ''); }
  function setMetric(id, v) { const e = $(id); if (e) e.textContent = v; }
  const fmtMs = (v) => (v == null || !isFinite(v) ? '–' : Math.round(v) + ' ms');
  const option = (value, text) => { const o = document.createElement('option'); o.value = value; o.textContent = text; return o; };
  function selectedBackend() { return config && config.backends.find((b) => b.label === $('ll-backend').value); }

  function fillBackends() {
    const sel = $('ll-backend');
    // a model's system says what it streams like: its rate, channels and chunk schedule
    const about = (b) => (b.model ? ' · ' + b.model.title + ': ' + b.model.schedule : '');
    sel.replaceChildren(...config.backends.map((b) => option(b.label, b.label + '  (' + b.spec + ')' + about(b))));
    sel.value = config.default;
    applyCaps();
  }

  function applyCaps() {
    const b = selectedBackend(); if (!b) return;
    const c = b.capabilities;
    const vs = $('ll-voice'); const prev = vs.value;
    const opts = [];
    // a model that only clones has no voice of its own: a saved (cloned) voice must be chosen
    const builtins = c.clone_required ? [] : (b.voices.length ? b.voices : [{ name: 'default', kind: 'builtin' }]);
    if (c.clone_required) { const o = option('', 'choose a saved voice ★ (this model only clones)'); o.disabled = true; opts.push(o); }
    for (const v of builtins) opts.push(option(v.name === 'default' ? '' : v.name, v.name + (v.kind === 'uploaded' ? ' (server voice)' : '')));
    for (const v of config.library) {
      const o = option('lib:' + v.voice_id, '★ ' + v.name + ' (cloned)'); o.disabled = !b.can_clone; opts.push(o);
    }
    vs.replaceChildren(...opts);
    if ([...vs.options].some((o) => o.value === prev && !o.disabled)) vs.value = prev;
    else if (c.clone_required) { const lib = [...vs.options].find((o) => o.value && !o.disabled); vs.value = lib ? lib.value : ''; }
    const langs = c.languages || [];
    $('ll-language-wrap').hidden = langs.length === 0;
    $('ll-language').replaceChildren(option('', 'Auto'), ...langs.map((l) => option(String(l), String(l))));
    $('ll-instructions-wrap').hidden = !c.instructions;
    $('ll-seed-wrap').hidden = !c.seed;
    const streaming = $('ll-streaming');
    streaming.disabled = !c.streaming; if (!c.streaming) streaming.checked = false;
    const speedOk = c.speed && (c.speed_streaming || !streaming.checked);
    $('ll-speed').disabled = !speedOk; if (!speedOk) { $('ll-speed').value = 1; $('ll-speed-val').textContent = '1.00'; }
    $('ll-speed-wrap').title = speedOk ? '' : 'speed applies only to non-streaming output on this backend';
    const notes = [];
    if (!b.can_clone) notes.push(b.clone_note);
    if (c.clone_required) notes.push(b.label + ' speaks only in a cloned voice: choose a saved voice, or save a clip below');
    if (b.voice_error) notes.push('voices unavailable: ' + b.voice_error);
    if (b.model && b.model.stand_in) notes.push(b.model.stand_in);
    $('ll-caps-note').textContent = notes.join(' · ');
    $('ll-clone-note').textContent = b.can_clone ? 'Saved voices can be used with ' + b.label + '.' : b.clone_note;
    const g = player.current;
    if (c.sample_rate && (!g || g.finished)) player.prepare(c.sample_rate);
  }

  function fillExamples() {
    const box = $('ll-examples'); box.replaceChildren();
    for (const ex of config.examples) {
      const bt = document.createElement('button'); bt.type = 'button'; bt.className = 'll-chip'; bt.textContent = ex.title;
      bt.onclick = () => { $('ll-text').value = ex.text; };
      box.appendChild(bt);
    }
    if (!$('ll-text').value && config.examples.length) $('ll-text').value = config.examples[0].text;
  }

  // ------------------------------------------------------------------ speak / stop
  function speak() {
    const clickT = performance.now();
    const b = selectedBackend();
    if (b && b.capabilities.clone_required && !String($('ll-voice').value).startsWith('lib:')) {
      status(b.label + ' speaks only in a cloned voice: choose a saved voice (or save a clip under Voices) first.', 'error');
      return;
    }
    resetCard();
    status('Requesting…', 'busy');
    $('ll-stop').disabled = false; $('ll-glitch').disabled = true; $('ll-replay').disabled = true; $('ll-download').hidden = true;
    player.request({
      type: 'speak', backend: $('ll-backend').value, text: $('ll-text').value,
      voice: $('ll-voice').value || null, language: $('ll-language').value || null,
      instructions: $('ll-instructions-wrap').hidden ? null : $('ll-instructions').value || null,
      seed: $('ll-seed-wrap').hidden || $('ll-seed').value === '' ? null : Number($('ll-seed').value),
      speed: Number($('ll-speed').value), mode: $('ll-streaming').checked ? 'stream' : 'whole',
    }, { clickT, sampleRate: b && b.capabilities.sample_rate });
  }

  // ------------------------------------------------------------------ player events
  function onEvent(type, d) {
    const g = player.current;
    switch (type) {
      case 'message':
        if (d.type === 'report_error') $('ll-glitch-log').textContent = String(d.message);
        else if (d.type === 'error') status(String(d.message), 'error');
        break;
      case 'queued':
        status('Queued: position ' + d.position + ' for ' + $('ll-backend').value, 'busy'); setMetric('ll-m-queue', String(d.position));
        break;
      case 'generating': status('Generating…', 'busy'); setMetric('ll-m-queue', '–'); break;
      case 'start': showFormat(d); break;
      case 'chunk':
        setMetric('ll-m-chunks', String(d.count));
        if (d.count === 1) { setMetric('ll-m-ttfa', fmtMs(d.server_ms)); status('Buffering…', 'busy'); }
        break;
      case 'first_sound': setMetric('ll-m-first', fmtMs(d.click_to_first_ms)); break;
      case 'playing':
        if (!g.error) status('Playing…', 'play');
        $('ll-glitch').disabled = false;
        setMetric('ll-m-stall', Math.round(d.total_stall_ms) + ' ms');
        break;
      case 'underrun': setMetric('ll-m-under', String(d.count)); status('Buffering (stall)…', 'warn'); break;
      case 'done': setMetric('ll-m-ttfa', fmtMs(d.ttfa_ms)); setMetric('ll-m-rtf', d.rtf == null ? '–' : Number(d.rtf).toFixed(3)); break;
      case 'error':
        if (d.clone === 'unavailable') status(d.message, 'error');
        else status('Error: ' + d.message + (d.partial ? ' — partial audio (' + d.partial_s.toFixed(2) + ' s), not a complete take' : ''), 'error');
        $('ll-stop').disabled = true;
        break;
      case 'ended': onEnded(g, d); break;
      case 'findings': showFindings(g); break;
      case 'glitch_saved': onGlitchSaved(d); break;
      case 'replay': if (d.ended && player.current && player.current.finished) setMetric('ll-m-pos', '–'); break;
      default: break;
    }
  }

  function onEnded(g, d) {
    $('ll-stop').disabled = true;
    const partial = !d.complete;
    if (d.stopped) status('Stopped' + (g.framesRecv ? ' — partial audio (' + (g.framesRecv / g.sr).toFixed(2) + ' s)' : ''), 'warn');
    else if (!(partial && g.error)) status('Done — ' + (g.framesRecv / g.sr).toFixed(2) + ' s in ' + g.chunks.length + ' chunks', 'ok');
    if (g.framesRecv) {
      $('ll-replay').disabled = false;
      const a = $('ll-download');
      if (a.href) URL.revokeObjectURL(a.href);
      a.href = URL.createObjectURL(new Blob([player.wav(g)], { type: 'audio/wav' }));
      a.download = (g.takeId || 'take') + (partial ? '.partial' : '') + '.wav';
      a.textContent = partial ? 'Download partial WAV' : 'Download WAV';
      a.hidden = false;
    }
    $('ll-glitch').disabled = !g.framesRecv || !g.takeId;
    setMetric('ll-m-under', String(d.underruns)); setMetric('ll-m-stall', Math.round(d.stall_ms) + ' ms');
    showStart(g, d);
    drawWave(g); drawTimeline(g);
  }

  // The format, and whether it was read from the stream or assumed (and from what).
  function showFormat(d) {
    setMetric('ll-m-format', d.sample_rate + ' Hz × ' + d.channels + (d.assumed ? ' (assumed)' : ''));
    const note = $('ll-format-note');
    note.textContent = d.assumed ? 'Format assumed, not read from the stream: ' + String(d.assumed) : '';
    note.className = 'll-muted' + (d.assumed ? ' ll-assumed' : '');
  }

  // Ideal start (the earliest start that never runs dry, from the recorded arrivals) vs actual.
  function showStart(g, d) {
    setMetric('ll-m-ideal', fmtMs(d.ideal_start_ms));
    setMetric('ll-m-actual', fmtMs(d.actual_start_ms));
    const parts = [];
    if (d.late_by_ms != null) parts.push('Started ' + Math.round(Math.abs(d.late_by_ms)) + ' ms ' + (d.late_by_ms >= 0 ? 'after' : 'before') + ' the ideal start (max over chunks of arrival − audio before it)');
    for (const s of d.stalls || []) parts.push('stall of ' + Math.round(s.stall_ms) + ' ms at ' + (s.position_ms / 1000).toFixed(2) + ' s');
    const learnt = g.start && g.start.learnt;
    if (learnt && learnt.takes) parts.push('learnt from ' + learnt.takes + ' past take(s): ' + (learnt.sec_per_char ? (1 / learnt.sec_per_char).toFixed(1) + ' chars/s' : 'no text rate') + (learnt.rate ? ', generation ' + Number(learnt.rate).toFixed(2) + '× real time' : ''));
    $('ll-start-note').textContent = parts.join(' · ');
  }

  function glitch() {
    const g = player.current; if (!g || $('ll-glitch').disabled) return;
    const r = player.glitch($('ll-glitch-kind').value || null);
    if (r) $('ll-glitch-log').textContent = 'Glitch marked at ' + (r.position_ms / 1000).toFixed(2) + ' s (saving…)';
  }
  function onGlitchSaved(m) {
    const g = player.gens.find((x) => x.takeId === m.take_id);
    if (g && g.finished) drawWave(g);
    $('ll-glitch-log').textContent = 'Glitch saved at ' + (m.position_ms / 1000).toFixed(2) + ' s' +
      (m.boundary_index == null ? ' (single-chunk take: no boundary)' :
        ' → chunk boundary #' + (m.boundary_index + 1) + ' at ' + (m.boundary_ms / 1000).toFixed(2) + ' s');
  }
  document.addEventListener('keydown', (e) => {
    if ((e.key === 'g' || e.key === 'G') && !e.ctrlKey && !e.metaKey && !e.altKey) {
      const t = e.target; if (t && (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || t.isContentEditable)) return;
      e.preventDefault(); glitch();
    }
  });
  setInterval(() => {
    const g = player.current;
    if ((g && g.state === 'play') || player.replaying) setMetric('ll-m-pos', ((player.positionMs() || 0) / 1000).toFixed(2) + ' s');
  }, 50);

  // ------------------------------------------------------------------ metrics card drawings
  function resetCard() {
    for (const id of ['ll-m-ttfa', 'll-m-first', 'll-m-rtf', 'll-m-chunks', 'll-m-under', 'll-m-stall', 'll-m-queue', 'll-m-format', 'll-m-pos', 'll-m-margin', 'll-m-ideal', 'll-m-actual']) setMetric(id, '–');
    for (const id of ['ll-format-note', 'll-start-note']) $(id).textContent = '';
    $('ll-checks').replaceChildren();
    setMetric('ll-m-chunks', '0'); setMetric('ll-m-under', '0'); setMetric('ll-m-stall', '0 ms');
    $('ll-findings').textContent = ''; $('ll-glitch-log').textContent = '';
    for (const id of ['ll-wave', 'll-timeline']) { const c = $(id); c.getContext('2d').clearRect(0, 0, c.width, c.height); }
  }

  function drawWave(g) {
    const cv = $('ll-wave'); if (!g.framesRecv) return;
    const w = cv.width = cv.clientWidth || 760, h = cv.height = 120, c = cv.getContext('2d');
    const pcm = player.pcm(g), per = Math.max(1, Math.floor(g.framesRecv / w));
    c.clearRect(0, 0, w, h); c.fillStyle = '#5b7bd5';
    for (let x = 0; x < w; x++) {
      let lo = 0, hi = 0; const f0 = x * per;
      for (let f = f0; f < Math.min(g.framesRecv, f0 + per); f++) { const v = pcm[f * g.ch] / 32768; if (v < lo) lo = v; if (v > hi) hi = v; }
      c.fillRect(x, h / 2 - hi * h / 2, 1, Math.max(1, (hi - lo) * h / 2));
    }
    const X = (frames) => (frames / g.framesRecv) * w;
    c.strokeStyle = '#999'; c.setLineDash([3, 3]);
    for (const ch of g.chunks.slice(1)) { c.beginPath(); c.moveTo(X(ch.offset), 0); c.lineTo(X(ch.offset), h); c.stroke(); }
    c.setLineDash([]);
    const mark = (ms, color, label) => { const x = X(ms / 1000 * g.sr); c.fillStyle = color; c.fillRect(x - 1, 0, 3, h); if (label) c.fillText(String(label), x + 3, 12); };
    for (const p of g.underruns.positions) mark(p, '#a040c0', 'stall');
    for (const r of g.glitches) mark(r.position_ms, '#e08000', r.kind || 'glitch');
    const f = g.findings && g.findings.findings;
    if (f) for (const x of f) if (x.time_s != null) mark(x.time_s * 1000, '#d02020', x.kind);
    cv.dataset.boundaries = String(Math.max(0, g.chunks.length - 1));
  }

  function drawTimeline(g) {
    // x: audio position; y: ms since the click. Per chunk, its arrival (orange) and its
    // playback deadline (green); the vertical gap between them is the buffer margin.
    const cv = $('ll-timeline'); if (!g.chunks.length) return;
    const w = cv.width = cv.clientWidth || 760, h = cv.height = 150, c = cv.getContext('2d');
    const pts = g.chunks.filter((x) => x.deadlineMs != null);
    const maxT = Math.max(...g.chunks.map((x) => x.arrivalMs), ...pts.map((x) => x.deadlineMs + (x.frames / g.sr) * 1000), 1);
    const L = 44, R = 10, T = 18, B = 18;
    const X = (frames) => L + (frames / g.framesRecv) * (w - L - R), Y = (ms) => h - B - (ms / maxT) * (h - T - B);
    c.clearRect(0, 0, w, h); c.font = '10px sans-serif'; c.fillStyle = '#556'; c.strokeStyle = '#ccd';
    c.beginPath(); c.moveTo(L, T); c.lineTo(L, h - B); c.lineTo(w - R, h - B); c.stroke();
    c.fillText(Math.round(maxT) + ' ms', 2, T + 4); c.fillText('0', L - 10, h - B);
    c.fillText('audio position → ' + (g.framesRecv / g.sr).toFixed(2) + ' s', w - R - 130, h - 4);
    c.strokeStyle = '#2a9d4b'; c.lineWidth = 2; c.beginPath();
    pts.forEach((p) => { c.moveTo(X(p.offset), Y(p.deadlineMs)); c.lineTo(X(p.offset + p.frames), Y(p.deadlineMs + (p.frames / g.sr) * 1000)); });
    c.stroke(); c.lineWidth = 1;
    for (const p of pts) {
      const margin = p.deadlineMs - p.arrivalMs;
      c.strokeStyle = margin >= 0 ? 'rgba(42,157,75,.35)' : 'rgba(200,30,30,.7)';
      c.beginPath(); c.moveTo(X(p.offset), Y(p.arrivalMs)); c.lineTo(X(p.offset), Y(p.deadlineMs)); c.stroke();
    }
    c.fillStyle = '#d05020';
    for (const p of g.chunks) c.fillRect(X(p.offset) - 3, Y(p.arrivalMs) - 3, 6, 6);
    c.fillStyle = '#2a9d4b'; c.fillText('— playback deadline', L + 8, 11); c.fillStyle = '#d05020'; c.fillText('■ chunk arrival', L + 120, 11);
    c.fillStyle = '#556'; c.fillText('gap = buffer margin', L + 210, 11);
    const later = pts.length > 1 ? pts.slice(1) : pts;   // chunk 0's margin is just the start lead
    const margins = later.map((p) => p.deadlineMs - p.arrivalMs);
    if (margins.length) setMetric('ll-m-margin', Math.round(Math.min(...margins)) + ' ms');
  }

  function showFindings(g) {
    const m = g.findings, box = $('ll-findings');
    const list = Array.isArray(m.findings) ? m.findings : [];
    const fmtF = (f) => String(f.kind) + ' @ ' + (typeof f.time_s === 'number' ? f.time_s.toFixed(2) + ' s' : '?') +
      (typeof f.boundary_index === 'number' ? ' (seam #' + (f.boundary_index + 1) + ')' : '') +
      (f.count > 1 ? ' ×' + f.count : '') +
      (f.kind === 'underrun' && f.evidence && f.evidence.prebuffer_ms != null ? ' [simulated player with a ' + Math.round(Number(f.evidence.prebuffer_ms)) + ' ms prebuffer, not this one]' : '') +
      (f.evidence && typeof f.evidence.note === 'string' ? ' — ' + f.evidence.note : '');
    if (!m.available) box.textContent = 'Automatic glitch findings: ' + String(m.note || 'not available');
    else if (!list.length) box.textContent = 'Automatic glitch findings: none';
    else box.textContent = 'Automatic glitch findings (red on the waveform): ' + mergeFindings(list).map(fmtF).join(', ');
    // which checks ran and which were skipped (and why), when the detector says so
    const ul = $('ll-checks'); ul.replaceChildren();
    for (const c of Array.isArray(m.checks) ? m.checks : []) {
      const li = document.createElement('li');
      li.className = c.ran ? 'll-ran' : 'll-skipped';
      li.textContent = (c.ran ? '✓ ' : '– ') + String(c.name) + (c.ran ? ' ran' : ' skipped') + (c.why ? ': ' + String(c.why) : '');
      ul.appendChild(li);
    }
    if (g.finished) drawWave(g);
  }

  // The same finding twice (same kind at the same place) is shown once, with a count.
  function mergeFindings(list) {
    const out = [], seen = new Map();
    for (const f of list) {
      const key = String(f.kind) + '|' + (typeof f.time_s === 'number' ? f.time_s.toFixed(2) : '?') + '|' + f.boundary_index;
      if (seen.has(key)) { seen.get(key).count += 1; continue; }
      const c = Object.assign({}, f, { count: 1 }); seen.set(key, c); out.push(c);
    }
    return out;
  }

  // ------------------------------------------------------------------ voice cloning + library
  let recorder = null, recChunks = [], recBlob = null;
  async function toggleRecord() {
    const bt = $('ll-rec');
    if (recorder) { recorder.stop(); return; }
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 } });
      recChunks = []; recorder = new MediaRecorder(stream);
      recorder.ondataavailable = (e) => { if (e.data.size) recChunks.push(e.data); };
      recorder.onstop = () => {
        stream.getTracks().forEach((t) => t.stop());
        recBlob = new Blob(recChunks, { type: recorder.mimeType || 'audio/webm' }); recorder = null;
        bt.textContent = 'Record'; $('ll-rec-status').textContent = 'Recorded ' + Math.round(recBlob.size / 1024) + ' kB (processing off)';
      };
      recorder.start(); bt.textContent = 'Stop recording'; $('ll-rec-status').textContent = 'Recording… (echo cancellation, noise suppression, auto gain: off)';
    } catch (e) { $('ll-rec-status').textContent = 'Microphone unavailable: ' + e.message; }
  }

  function vmsg(text, cls) { const e = $('ll-vmsg'); e.textContent = text; e.className = 'll-status ' + (cls || ''); }

  async function saveVoice() {
    const file = $('ll-clip').files[0];
    const blob = file || recBlob;
    if (!blob) { vmsg('Choose a clip to upload, or record one.', 'error'); return; }
    const fd = new FormData();
    fd.append('file', blob, file ? file.name : 'recording.webm');
    fd.append('name', $('ll-vname').value || (file ? file.name.replace(/\.[^.]*$/, '') : 'my voice'));
    fd.append('ref_text', $('ll-vtext').value);
    fd.append('consent', $('ll-consent').checked ? 'yes' : '');
    vmsg('Checking the clip…', 'busy');
    const r = await fetch(BASE + 'll/api/voices', { method: 'POST', body: fd });
    const j = await r.json().catch(() => ({ error: 'the server answered ' + r.status }));
    if (!r.ok) { vmsg('Rejected: ' + (j.error || j.detail || r.status), 'error'); return; }
    vmsg('Saved voice "' + j.voice.name + '" (' + j.clip.duration_s.toFixed(2) + ' s after trimming ' + j.clip.trimmed_s.toFixed(2) + ' s of silence).', 'ok');
    $('ll-clip').value = ''; recBlob = null; $('ll-consent').checked = false; $('ll-vname').value = ''; $('ll-vtext').value = '';
    await refreshLibrary(j.voice.voice_id);
  }

  async function refreshLibrary(selectId) {
    const r = await fetch(BASE + 'll/api/voices'); config.library = (await r.json()).voices;
    renderLibrary(); applyCaps();
    const b = selectedBackend();
    if (selectId && b && b.can_clone) $('ll-voice').value = 'lib:' + selectId;
  }

  function renderLibrary() {
    const t = $('ll-vlist'); t.replaceChildren();
    if (!config.library.length) {
      const tr = document.createElement('tr'), td = document.createElement('td');
      td.className = 'll-muted'; td.textContent = 'No saved voices yet.'; tr.appendChild(td); t.appendChild(tr);
      return;
    }
    for (const v of config.library) {
      const tr = document.createElement('tr'); tr.dataset.voiceId = v.voice_id;
      const name = document.createElement('td'); name.className = 'll-vname'; name.textContent = v.name;
      const info = document.createElement('td'); info.className = 'll-muted'; info.textContent = Number(v.duration_s).toFixed(1) + ' s · ' + v.sample_rate + ' Hz';
      const acts = document.createElement('td');
      const mk = (label, fn) => { const b = document.createElement('button'); b.type = 'button'; b.textContent = label; b.onclick = fn; acts.appendChild(b); return b; };
      const vid = encodeURIComponent(v.voice_id);
      mk('Use', () => { const b = selectedBackend(); if (!b.can_clone) { vmsg(b.clone_note, 'error'); return; } $('ll-voice').value = 'lib:' + v.voice_id; vmsg('Using "' + v.name + '"', 'ok'); }).className = 'll-use';
      mk('Rename', async () => {
        const n = prompt('New name for ' + v.name, v.name); if (!n) return;
        const r = await fetch(BASE + 'll/api/voices/' + vid + '/rename', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: n }) });
        const j = await r.json().catch(() => ({ error: 'the server answered ' + r.status })); if (!r.ok) vmsg('Rename failed: ' + j.error, 'error'); await refreshLibrary();
      }).className = 'll-rename';
      mk('Delete', async () => {
        await fetch(BASE + 'll/api/voices/' + vid, { method: 'DELETE' }); vmsg('Deleted "' + v.name + '"', 'ok'); await refreshLibrary();
      }).className = 'll-delete';
      tr.append(name, info, acts); t.appendChild(tr);
    }
  }

  // ------------------------------------------------------------------ wiring
  $('ll-speak').onclick = speak;
  $('ll-speak').addEventListener('pointerdown', () => player.resume());
  $('ll-stop').onclick = () => player.stop();
  $('ll-replay').onclick = () => { if (player.replay()) { $('ll-glitch').disabled = false; status('Replaying…', 'play'); } };
  $('ll-glitch').onclick = glitch;
  $('ll-backend').onchange = applyCaps;
  $('ll-streaming').onchange = applyCaps;
  $('ll-speed').oninput = () => { $('ll-speed-val').textContent = Number($('ll-speed').value).toFixed(2); };
  $('ll-rec').onclick = toggleRecord;
  $('ll-vsave').onclick = saveVoice;

  fetch(BASE + 'll/api/config').then((r) => r.json()).then((c) => {
    config = c; api.config = c;
    fillBackends(); fillExamples(); renderLibrary();
    player.prepare((selectedBackend() || {}).capabilities?.sample_rate);
    root.dataset.ready = '1';
    $('ll-speak').disabled = false;
  }).catch((e) => status('Could not load the configuration: ' + e, 'error'));
})();
