// listenlab streaming player. Runs as the body of gr.HTML(js_on_load=...): `element` is the
// component's root. Raw int16 PCM arrives over a same-origin WebSocket, one binary frame per
// backend chunk (12-byte header: u32 token, u32 chunk index, f32 server arrival ms), and is
// scheduled sample-accurately with AudioBufferSourceNodes at the stream's own rate.
(() => {
  const root = element.querySelector('#ll-root') || element;
  const $ = (id) => root.querySelector('#' + id);
  const BASE = (root.dataset.base || '/').replace(/\/?$/, '/');
  const LEAD_S = 0.02;          // scheduling lead when (re)starting
  const MARGIN_S = 0.08;        // safety margin of the prebuffer rule
  const MIN_FIRST_S = 0.25;     // a first chunk shorter than this says nothing about the rate
  const SEC_PER_CHAR = 0.07;    // prior for the utterance length (English speech ~14 chars/s)
  const HEADER_BYTES = 12;

  const api = (window.listenlab = window.listenlab || {});
  api.gens = [];
  let config = null, ws = null, wsReady = null, ctx = null, master = null, analyser = null;
  let gen = null;               // the current generation (only its token's messages count)
  let replaySrc = null, replayT0 = 0;
  let tokenSeq = (Math.random() * 1e6) | 0;

  // ------------------------------------------------------------------ audio context
  function ensureContext(rate) {
    if (ctx && (!rate || ctx.sampleRate === rate)) return ctx;
    if (ctx && gen && gen.state !== 'ended') return ctx;   // never swap under a playing stream
    if (ctx) ctx.close();
    const opts = { latencyHint: 'interactive' };
    if (rate) opts.sampleRate = rate;
    try { ctx = new AudioContext(opts); } catch (e) { ctx = new AudioContext({ latencyHint: 'interactive' }); }
    master = ctx.createGain();
    analyser = ctx.createAnalyser();
    analyser.fftSize = 512;
    master.connect(analyser);
    analyser.connect(ctx.destination);
    api.ctx = ctx;
    return ctx;
  }
  const resume = () => { if (ctx && ctx.state !== 'running') ctx.resume(); };
  document.addEventListener('pointerdown', resume, true);
  document.addEventListener('keydown', resume, true);

  // ------------------------------------------------------------------ websocket
  function connect() {
    const url = new URL(BASE + 'll/ws', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    wsReady = new Promise((res) => { ws.onopen = () => res(ws); });
    ws.onmessage = (ev) => (typeof ev.data === 'string' ? onJson(JSON.parse(ev.data)) : onBinary(ev.data));
    ws.onclose = () => {
      if (gen && !gen.done) failStream('the connection to the server was lost');
      setTimeout(connect, 500);
    };
  }
  async function send(obj) { const s = await wsReady; s.send(JSON.stringify(obj)); }

  // ------------------------------------------------------------------ UI helpers
  function status(text, cls) { const s = $('ll-status'); s.textContent = text; s.className = 'll-status ' + (cls || ''); }
  function setMetric(id, v) { const e = $(id); if (e) e.textContent = v; }
  const fmtMs = (v) => (v == null || !isFinite(v) ? '–' : Math.round(v) + ' ms');
  function selectedBackend() { return config && config.backends.find((b) => b.label === $('ll-backend').value); }

  function fillBackends() {
    const sel = $('ll-backend');
    sel.innerHTML = '';
    for (const b of config.backends) {
      const o = document.createElement('option'); o.value = b.label; o.textContent = b.label + '  (' + b.spec + ')';
      sel.appendChild(o);
    }
    sel.value = config.default;
    applyCaps();
  }

  function applyCaps() {
    const b = selectedBackend(); if (!b) return;
    const c = b.capabilities;
    const vs = $('ll-voice'); const prev = vs.value; vs.innerHTML = '';
    const builtins = b.voices.length ? b.voices : [{ name: 'default', kind: 'builtin' }];
    for (const v of builtins) { const o = document.createElement('option'); o.value = v.name === 'default' ? '' : v.name; o.textContent = v.name + (v.kind === 'uploaded' ? ' (server voice)' : ''); vs.appendChild(o); }
    for (const v of config.library) {
      const o = document.createElement('option'); o.value = 'lib:' + v.voice_id;
      o.textContent = '★ ' + v.name + ' (cloned)'; o.disabled = !b.can_clone; vs.appendChild(o);
    }
    if ([...vs.options].some((o) => o.value === prev && !o.disabled)) vs.value = prev;
    const langs = c.languages || [];
    $('ll-language-wrap').hidden = langs.length === 0;
    const ls = $('ll-language'); ls.innerHTML = '<option value="">Auto</option>' + langs.map((l) => `<option>${l}</option>`).join('');
    $('ll-instructions-wrap').hidden = !c.instructions;
    $('ll-seed-wrap').hidden = !c.seed;
    const streaming = $('ll-streaming');
    streaming.disabled = !c.streaming; if (!c.streaming) streaming.checked = false;
    const speedOk = c.speed && (c.speed_streaming || !streaming.checked);
    $('ll-speed').disabled = !speedOk; if (!speedOk) { $('ll-speed').value = 1; $('ll-speed-val').textContent = '1.00'; }
    $('ll-speed-wrap').title = speedOk ? '' : 'speed applies only to non-streaming output on this backend';
    const notes = [];
    if (!b.can_clone) notes.push(b.clone_note);
    if (b.voice_error) notes.push('voices unavailable: ' + b.voice_error);
    $('ll-caps-note').textContent = notes.join(' · ');
    $('ll-clone-note').textContent = b.can_clone ? 'Saved voices can be used with ' + b.label + '.' : b.clone_note;
    if (c.sample_rate && (!gen || gen.state === 'ended')) ensureContext(c.sample_rate);
  }

  function fillExamples() {
    const box = $('ll-examples'); box.innerHTML = '';
    for (const ex of config.examples) {
      const bt = document.createElement('button'); bt.type = 'button'; bt.className = 'll-chip'; bt.textContent = ex.title;
      bt.onclick = () => { $('ll-text').value = ex.text; };
      box.appendChild(bt);
    }
    if (!$('ll-text').value && config.examples.length) $('ll-text').value = config.examples[0].text;
  }

  // ------------------------------------------------------------------ speak / stop
  async function speak() {
    const clickT = performance.now();
    const b = selectedBackend();
    ensureContext(b && b.capabilities.sample_rate); resume();
    if (gen && !gen.done) { send({ type: 'stop', token: gen.token }); stopAudio(gen); }
    stopReplay();
    tokenSeq = (tokenSeq + 1) >>> 0;
    gen = newGen(tokenSeq, clickT);
    api.gens.push(gen); api.last = gen;
    resetCard();
    status('Requesting…', 'busy');
    $('ll-stop').disabled = false; $('ll-glitch').disabled = true; $('ll-replay').disabled = true; $('ll-download').hidden = true;
    send({
      type: 'speak', token: gen.token, backend: $('ll-backend').value, text: $('ll-text').value,
      voice: $('ll-voice').value || null, language: $('ll-language').value || null,
      instructions: $('ll-instructions-wrap').hidden ? null : $('ll-instructions').value || null,
      seed: $('ll-seed-wrap').hidden || $('ll-seed').value === '' ? null : Number($('ll-seed').value),
      speed: Number($('ll-speed').value), mode: $('ll-streaming').checked ? 'stream' : 'whole',
    });
  }

  function stop() {
    if (!gen) return;
    if (!gen.done) { send({ type: 'stop', token: gen.token }); gen.done = true; gen.status = 'cancelled'; }
    stopAudio(gen); stopReplay();
    finishPlayback(gen, 'Stopped' + (gen.framesRecv ? ' — partial audio (' + (gen.framesRecv / gen.sr).toFixed(2) + ' s)' : ''), 'warn');
  }

  function newGen(token, clickT) {
    return {
      token, clickT, state: 'wait', done: false, status: null, sr: 0, ch: 1, takeId: null, textChars: 0,
      chunks: [], pcm: [], framesRecv: 0, framesSched: 0, segments: [], sources: [],
      segStart: 0, segFrame0: 0, dryCtx: null, underruns: { count: 0, stallMs: 0, positions: [] },
      firstScheduledMs: null, firstSoundMs: null, firstAudibleMs: null, prebufferMs: null,
      summary: null, findings: null, glitches: [], reported: false, error: null,
    };
  }

  // ------------------------------------------------------------------ messages
  function onJson(m) {
    if (m.type === 'hello') { api.session = m.session; return; }
    if (m.type === 'glitch_saved') { onGlitchSaved(m); return; }
    if (m.type === 'underruns_saved') { api.underrunsSaved = (api.underrunsSaved || 0) + 1; return; }
    if (m.type === 'report_error') { $('ll-glitch-log').textContent = m.message; return; }
    const g = gen;
    if (!g || m.token === undefined || m.token !== g.token) {
      if (m.type === 'error' && m.token == null) status(m.message, 'error');
      return;                                            // a stale generation's message
    }
    if (m.type === 'queued') { status('Queued: position ' + m.position + ' for ' + $('ll-backend').value, 'busy'); setMetric('ll-m-queue', String(m.position)); }
    else if (m.type === 'generating') { g.takeId = m.take_id; status('Generating…', 'busy'); setMetric('ll-m-queue', '–'); }
    else if (m.type === 'start') {
      g.sr = m.sample_rate; g.ch = m.channels; g.takeId = m.take_id; g.textChars = m.text_chars || 0;
      setMetric('ll-m-format', m.sample_rate + ' Hz × ' + m.channels);
    } else if (m.type === 'done') {
      g.done = true; g.status = 'ok'; g.summary = m;
      setMetric('ll-m-ttfa', fmtMs(m.ttfa_ms)); setMetric('ll-m-rtf', m.rtf == null ? '–' : m.rtf.toFixed(3));
      pump(g);
      if (g.state === 'ended') finishPlayback(g);
    } else if (m.type === 'error') {
      g.summary = Object.assign(g.summary || {}, m);
      failStream(m.message, m);
    } else if (m.type === 'cancelled') { g.done = true; g.status = g.status || 'cancelled'; }
    else if (m.type === 'findings') { g.findings = m; showFindings(g); }
  }

  function failStream(message, m) {
    const g = gen; if (!g) return;
    g.done = true; g.status = 'error'; g.error = message;
    const partial = g.framesRecv > 0;
    if (m && m.clone === 'unavailable') status(message, 'error');
    else status('Error: ' + message + (partial ? ' — partial audio (' + (g.framesRecv / g.sr).toFixed(2) + ' s), not a complete take' : ''), 'error');
    $('ll-stop').disabled = true;
    pump(g);                                             // play out what did arrive, marked partial
    if (!partial || g.state === 'ended') finishPlayback(g, null);
  }

  function onBinary(buf) {
    const g = gen;
    const dv = new DataView(buf);
    const token = dv.getUint32(0, true), index = dv.getUint32(4, true), serverMs = dv.getFloat32(8, true);
    if (!g || token !== g.token || g.state === 'stopped' || !g.sr) return;   // stale: never played
    const now = performance.now();
    const pcm = new Int16Array(buf.slice(HEADER_BYTES));
    const frames = pcm.length / g.ch;
    g.chunks.push({ index, frames, offset: g.framesRecv, serverMs, arrivalMs: now - g.clickT, deadlineMs: null });
    g.pcm.push(pcm); g.framesRecv += frames;
    setMetric('ll-m-chunks', String(g.chunks.length));
    if (g.chunks.length === 1) { setMetric('ll-m-ttfa', fmtMs(serverMs)); status('Buffering…', 'busy'); }
    pump(g);
  }

  // ------------------------------------------------------------------ the adaptive prebuffer
  // Start (or resume after a stall) once the unscheduled audio covers what the observed arrival
  // rate says is needed: the longest gap between chunks, and, when the backend is slower than
  // real time, the shortfall over the rest of the utterance (estimated from the text length).
  function readyToPlay(g) {
    if (g.done) return true;
    const n = g.chunks.length; if (!n) return false;
    const buffered = (g.framesRecv - g.framesSched) / g.sr;
    const received = g.framesRecv / g.sr;
    let rate, gap;
    if (n === 1) {
      const d0 = g.chunks[0].frames / g.sr;
      if (d0 < MIN_FIRST_S) return false;              // e.g. Qwen3's 80 ms first chunk
      rate = d0 / Math.max(0.001, g.chunks[0].serverMs / 1000);
      gap = d0 / rate;
    } else {
      const span = (g.chunks[n - 1].serverMs - g.chunks[0].serverMs) / 1000;
      rate = (received - g.chunks[0].frames / g.sr) / Math.max(0.001, span);
      gap = 0;
      for (let i = 1; i < n; i++) gap = Math.max(gap, (g.chunks[i].serverMs - g.chunks[i - 1].serverMs) / 1000);
    }
    let need = gap + MARGIN_S;
    if (rate < 1) {
      const total = Math.max(received, g.textChars * SEC_PER_CHAR);
      need = Math.max(need, (total - received) * (1 / rate - 1) * 1.15 + MARGIN_S);
    }
    g.need = need; g.rate = rate;
    return buffered >= need;
  }

  function scheduleAll(g) {
    while (g.framesSched < g.framesRecv) {
      const ci = g.chunks.findIndex((c) => c.offset === g.framesSched);
      const c = g.chunks[ci], pcm = g.pcm[ci];
      const buf = ctx.createBuffer(g.ch, c.frames, g.sr);
      for (let ch = 0; ch < g.ch; ch++) {
        const out = buf.getChannelData(ch);
        for (let i = 0, j = ch; i < c.frames; i++, j += g.ch) out[i] = pcm[j] / 32768;
      }
      const src = ctx.createBufferSource(); src.buffer = buf; src.connect(master);
      const when = g.segStart + (g.framesSched - g.segFrame0) / g.sr;   // sample-accurate, no drift
      src.start(when);
      g.sources.push(src);
      c.deadlineMs = performance.now() - g.clickT + (when - ctx.currentTime) * 1000;
      if (g.firstScheduledMs == null) {
        g.firstScheduledMs = performance.now() - g.clickT;
        g.firstSoundMs = c.deadlineMs + ((ctx.outputLatency || 0) + (ctx.baseLatency || 0)) * 1000;
        g.prebufferMs = g.firstScheduledMs - c.arrivalMs;
        setMetric('ll-m-first', fmtMs(g.firstSoundMs));
        api.firstScheduledMs = g.firstScheduledMs;
      }
      g.framesSched += c.frames;
      g.segments[g.segments.length - 1].frames += c.frames;
    }
  }

  function pump(g) {
    if (g !== gen || g.state === 'stopped' || g.state === 'ended' || !ctx) return;
    if (g.state === 'play') {
      const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
      if (ctx.currentTime >= end && !(g.done && g.framesSched === g.framesRecv)) noteUnderrun(g, end);
      else { scheduleAll(g); armEnd(g); return; }
    }
    if ((g.state === 'wait' || g.state === 'rebuffer') && g.framesRecv > g.framesSched && readyToPlay(g)) {
      g.segStart = ctx.currentTime + LEAD_S; g.segFrame0 = g.framesSched;
      if (g.state === 'rebuffer') g.underruns.stallMs += (g.segStart - g.dryCtx) * 1000;
      g.segments.push({ ctxStart: g.segStart, frame0: g.framesSched, frames: 0 });
      g.state = 'play';
      status(g.error ? $('ll-status').textContent : 'Playing…', g.error ? 'error' : 'play');
      $('ll-glitch').disabled = false;
      scheduleAll(g); armEnd(g);
      setMetric('ll-m-stall', Math.round(g.underruns.stallMs) + ' ms');
    }
  }

  function noteUnderrun(g, dryCtx) {
    g.state = 'rebuffer'; g.dryCtx = dryCtx;
    g.underruns.count += 1; g.underruns.positions.push((g.framesSched / g.sr) * 1000);
    setMetric('ll-m-under', String(g.underruns.count));
    status('Buffering (stall)…', 'warn');
  }

  function armEnd(g) {
    if (!(g.done && g.framesSched === g.framesRecv)) return;
    const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
    clearTimeout(g.endTimer);
    g.endTimer = setTimeout(() => { if (gen === g && g.state === 'play') { g.state = 'ended'; finishPlayback(g); } },
      Math.max(0, (end - ctx.currentTime) * 1000 + 30));
  }

  // watchdog: detects the queue running dry between arrivals, and the first audible output
  setInterval(() => {
    const g = gen; if (!g || !ctx) return;
    if (g.state === 'play' && !(g.done && g.framesSched === g.framesRecv)) {
      const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
      if (ctx.currentTime >= end) noteUnderrun(g, end);
    }
    if (g.firstAudibleMs == null && g.state === 'play' && analyser) {
      const a = new Float32Array(analyser.fftSize); analyser.getFloatTimeDomainData(a);
      let s = 0; for (const v of a) s += v * v;
      if (Math.sqrt(s / a.length) > 0.005) g.firstAudibleMs = performance.now() - g.clickT;
    }
    if (g.state === 'play' || replaySrc) setMetric('ll-m-pos', (positionMs() / 1000).toFixed(2) + ' s');
  }, 20);

  function stopAudio(g) {
    for (const s of g.sources) { try { s.stop(); } catch (e) { /* not started */ } }
    g.sources = [];
    if (g.state !== 'ended') g.state = 'stopped';
  }

  // ------------------------------------------------------------------ end of a take
  function finishPlayback(g, text, cls) {
    if (g.finished) return; g.finished = true;
    if (g.state !== 'stopped') g.state = 'ended';
    $('ll-stop').disabled = true;
    const partial = g.status !== 'ok';
    if (text !== null) {
      if (text) status(text, cls);
      else if (partial && g.error) { /* error text already shown */ }
      else status('Done — ' + (g.framesRecv / g.sr).toFixed(2) + ' s in ' + g.chunks.length + ' chunks', 'ok');
    }
    if (g.framesRecv) {
      $('ll-replay').disabled = false;
      const a = $('ll-download');
      if (a.href) URL.revokeObjectURL(a.href);
      a.href = URL.createObjectURL(new Blob([wavBytes(g)], { type: 'audio/wav' }));
      a.download = (g.takeId || 'take') + (partial ? '.partial' : '') + '.wav';
      a.textContent = partial ? 'Download partial WAV' : 'Download WAV';
      a.hidden = false;
    }
    $('ll-glitch').disabled = !g.framesRecv || !g.takeId;
    if (g.takeId && g.framesRecv && !g.reported) {
      g.reported = true;
      send({ type: 'underruns', token: g.token, take_id: g.takeId, count: g.underruns.count,
        stall_ms: g.underruns.stallMs, positions_ms: g.underruns.positions,
        browser: { first_scheduled_ms: g.firstScheduledMs, first_sound_ms: g.firstSoundMs } });
    }
    setMetric('ll-m-under', String(g.underruns.count)); setMetric('ll-m-stall', Math.round(g.underruns.stallMs) + ' ms');
    drawWave(g); drawTimeline(g);
  }

  function concatPcm(g) {
    const out = new Int16Array(g.framesRecv * g.ch); let o = 0;
    for (const p of g.pcm) { out.set(p, o); o += p.length; }
    return out;
  }
  api.pcmBase64 = (g) => {
    const b = new Uint8Array(concatPcm(g || gen).buffer); let s = '';
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
    return btoa(s);
  };

  function wavBytes(g) {
    const pcm = concatPcm(g), n = pcm.length * 2, b = new ArrayBuffer(44 + n), v = new DataView(b);
    const w = (o, s) => { for (let i = 0; i < s.length; i++) v.setUint8(o + i, s.charCodeAt(i)); };
    w(0, 'RIFF'); v.setUint32(4, 36 + n, true); w(8, 'WAVE'); w(12, 'fmt '); v.setUint32(16, 16, true);
    v.setUint16(20, 1, true); v.setUint16(22, g.ch, true); v.setUint32(24, g.sr, true);
    v.setUint32(28, g.sr * g.ch * 2, true); v.setUint16(32, g.ch * 2, true); v.setUint16(34, 16, true);
    w(36, 'data'); v.setUint32(40, n, true); new Int16Array(b, 44).set(pcm);
    return b;
  }

  function replay() {
    const g = gen; if (!g || !g.framesRecv) return;
    stopReplay(); resume();
    const pcm = concatPcm(g), buf = ctx.createBuffer(g.ch, g.framesRecv, g.sr);
    for (let ch = 0; ch < g.ch; ch++) { const o = buf.getChannelData(ch); for (let i = 0, j = ch; i < g.framesRecv; i++, j += g.ch) o[i] = pcm[j] / 32768; }
    replaySrc = ctx.createBufferSource(); replaySrc.buffer = buf; replaySrc.connect(master);
    replayT0 = ctx.currentTime + LEAD_S; replaySrc.start(replayT0);
    replaySrc.onended = () => { replaySrc = null; };
    $('ll-glitch').disabled = false;
    status('Replaying…', 'play');
  }
  function stopReplay() { if (replaySrc) { try { replaySrc.stop(); } catch (e) { /* */ } replaySrc = null; } }

  // ------------------------------------------------------------------ playback position + glitch button
  function positionMs() {
    const g = gen; if (!g || !ctx) return 0;
    const t = ctx.currentTime - (ctx.outputLatency || 0) - (ctx.baseLatency || 0);   // what is heard now
    if (replaySrc) return Math.max(0, Math.min(g.framesRecv / g.sr, t - replayT0)) * 1000;
    let pos = 0;
    for (const s of g.segments) {
      if (t < s.ctxStart) break;
      pos = (s.frame0 + Math.min(s.frames, (t - s.ctxStart) * g.sr)) / g.sr;
    }
    return pos * 1000;
  }
  api.positionMs = positionMs;

  function glitch() {
    const g = gen; if (!g || !g.takeId || !g.framesRecv || $('ll-glitch').disabled) return;
    const pos = positionMs();
    const kind = $('ll-glitch-kind').value || null;
    const report_id = crypto.randomUUID ? crypto.randomUUID().replace(/-/g, '') : String(Date.now()) + Math.random();
    g.glitches.push({ report_id, position_ms: pos, kind });
    send({ type: 'glitch', token: g.token, take_id: g.takeId, position_ms: pos, kind, report_id });
    $('ll-glitch-log').textContent = 'Glitch marked at ' + (pos / 1000).toFixed(2) + ' s (saving…)';
  }
  function onGlitchSaved(m) {
    const g = api.gens.find((x) => x.takeId === m.take_id);
    if (g) { const r = g.glitches.find((x) => x.report_id === m.report_id); if (r) Object.assign(r, m); drawWave(g); }
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

  // ------------------------------------------------------------------ metrics card drawings
  function resetCard() {
    for (const id of ['ll-m-ttfa', 'll-m-first', 'll-m-rtf', 'll-m-chunks', 'll-m-under', 'll-m-stall', 'll-m-queue', 'll-m-format', 'll-m-pos']) setMetric(id, '–');
    setMetric('ll-m-chunks', '0'); setMetric('ll-m-under', '0'); setMetric('ll-m-stall', '0 ms');
    $('ll-findings').textContent = ''; $('ll-glitch-log').textContent = '';
    for (const id of ['ll-wave', 'll-timeline']) { const c = $(id); c.getContext('2d').clearRect(0, 0, c.width, c.height); }
  }

  function drawWave(g) {
    const cv = $('ll-wave'); if (!g.framesRecv) return;
    const w = cv.width = cv.clientWidth || 760, h = cv.height = 120, c = cv.getContext('2d');
    const pcm = concatPcm(g), per = Math.max(1, Math.floor(g.framesRecv / w));
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
    const mark = (ms, color, label) => { const x = X(ms / 1000 * g.sr); c.fillStyle = color; c.fillRect(x - 1, 0, 3, h); if (label) c.fillText(label, x + 3, 12); };
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
    if (!m.available) box.textContent = 'Automatic glitch findings: ' + (m.note || 'not available');
    else if (!m.findings.length) box.textContent = 'Automatic glitch findings: none';
    else box.textContent = 'Automatic glitch findings (red on the waveform): ' + m.findings.map((f) => f.kind + ' @ ' + (f.time_s != null ? f.time_s.toFixed(2) + ' s' : '?') + (f.boundary_index != null ? ' (seam #' + (f.boundary_index + 1) + ')' : '') +
      (f.kind === 'underrun' && f.evidence && f.evidence.prebuffer_ms != null ? ' [simulated player with a ' + Math.round(f.evidence.prebuffer_ms) + ' ms prebuffer, not this one]' : '')).join(', ');
    if (g.finished) drawWave(g);
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
    const t = $('ll-vlist'); t.innerHTML = '';
    if (!config.library.length) { t.innerHTML = '<tr><td class="ll-muted">No saved voices yet.</td></tr>'; return; }
    for (const v of config.library) {
      const tr = document.createElement('tr'); tr.dataset.voiceId = v.voice_id;
      const name = document.createElement('td'); name.className = 'll-vname'; name.textContent = v.name;
      const info = document.createElement('td'); info.className = 'll-muted'; info.textContent = v.duration_s.toFixed(1) + ' s · ' + v.sample_rate + ' Hz';
      const acts = document.createElement('td');
      const mk = (label, fn) => { const b = document.createElement('button'); b.type = 'button'; b.textContent = label; b.onclick = fn; acts.appendChild(b); return b; };
      mk('Use', () => { const b = selectedBackend(); if (!b.can_clone) { vmsg(b.clone_note, 'error'); return; } $('ll-voice').value = 'lib:' + v.voice_id; vmsg('Using "' + v.name + '"', 'ok'); }).className = 'll-use';
      mk('Rename', async () => {
        const n = prompt('New name for ' + v.name, v.name); if (!n) return;
        const r = await fetch(BASE + 'll/api/voices/' + v.voice_id + '/rename', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: n }) });
        const j = await r.json(); if (!r.ok) vmsg('Rename failed: ' + j.error, 'error'); await refreshLibrary();
      }).className = 'll-rename';
      mk('Delete', async () => {
        await fetch(BASE + 'll/api/voices/' + v.voice_id, { method: 'DELETE' }); vmsg('Deleted "' + v.name + '"', 'ok'); await refreshLibrary();
      }).className = 'll-delete';
      tr.append(name, info, acts); t.appendChild(tr);
    }
  }

  // ------------------------------------------------------------------ wiring
  $('ll-speak').onclick = speak;
  $('ll-speak').addEventListener('pointerdown', resume);
  $('ll-stop').onclick = stop;
  $('ll-replay').onclick = replay;
  $('ll-glitch').onclick = glitch;
  $('ll-backend').onchange = applyCaps;
  $('ll-streaming').onchange = applyCaps;
  $('ll-speed').oninput = () => { $('ll-speed-val').textContent = Number($('ll-speed').value).toFixed(2); };
  $('ll-rec').onclick = toggleRecord;
  $('ll-vsave').onclick = saveVoice;

  connect();
  fetch(BASE + 'll/api/config').then((r) => r.json()).then((c) => {
    config = c; api.config = c;
    fillBackends(); fillExamples(); renderLibrary();
    ensureContext((selectedBackend() || {}).capabilities?.sample_rate);
    root.dataset.ready = '1';
    $('ll-speak').disabled = false;
  }).catch((e) => status('Could not load the configuration: ' + e, 'error'));
})();
