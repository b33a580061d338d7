// listenlab player core: the one audio engine every page uses (window.LLPlayer).
//
// One same-origin WebSocket to BASE + 'll/ws'; raw int16 PCM arrives one binary frame per
// backend chunk (12-byte header: u32 token, u32 chunk index, f32 server arrival ms) and is
// scheduled sample-accurately with AudioBufferSourceNodes at the stream's own rate. The start
// rule (LLPlayer.plan) decides when to start and when to resume after running dry. No DOM access
// except what the caller passes; safe to load twice.
//
//   const player = LLPlayer.create({ base: LLPlayer.base(), onEvent: (type, detail) => {}, sampleRate });
//   player.request(msg[, {clickT, sampleRate}]) -> token   player.stop()   player.replay()
//   player.collect(msg) -> Promise<{start, frames}>: a stream fetched whole on the same socket
//   (never played: a MUSHRA screen decodes it itself)
//   player.glitch(kind) -> {take_id, position_ms, report_id} | null
//   player.positionMs() -> ms | null      player.send(obj)      player.state
//   extras: player.prepare(rate), player.resume(), player.gens, player.current, player.ctx,
//   player.session, player.underrunsSaved, player.pcm(g), player.pcmBase64(g), player.wav(g)
// Events: open, close, queued, generating, start, chunk, first_sound, playing, underrun, done,
// ended, error, cancelled, findings, glitch_saved, replay, message.
(function () {
  'use strict';
  if (window.LLPlayer && window.LLPlayer.version) return;

  const HEADER_BYTES = 12;
  const MAX_GENS = 50;          // generations kept for replay/inspection

  // ---------------------------------------------------------------- pure helpers (tested alone)

  // The app's base path, found one way by every page script (a Space or a proxy may serve the
  // app under a prefix): the page's data-base when the server wrote one, else the path before
  // the page's own first segment (`page`: 'listen', 'arena'), else '/'. Always ends in '/'.
  function base(page) {
    const tagged = document.querySelector('[data-base]');
    let b = tagged && tagged.dataset.base;
    if (!b && page) {
      const m = location.pathname.match(new RegExp('^(.*?/)' + page + '(/|$)'));
      if (m) b = m[1];
    }
    return (b || '/').replace(/\/?$/, '/');
  }

  // One binary frame of /ll/ws: the 12-byte header (u32 token, u32 chunk index, f32 server
  // arrival ms) and int16 PCM (an odd trailing byte is dropped). null when too short.
  function parseFrame(buf) {
    if (buf.byteLength < HEADER_BYTES) return null;
    const dv = new DataView(buf);
    const bytes = ((buf.byteLength - HEADER_BYTES) >> 1) << 1;
    return {
      token: dv.getUint32(0, true), index: dv.getUint32(4, true), serverMs: dv.getFloat32(8, true),
      pcm: new Int16Array(buf.slice(HEADER_BYTES, HEADER_BYTES + bytes)),
    };
  }

  // The start rule. The twin of evaluation/playout.py (same numbers, same decisions; both are
  // checked against tests/playout_timelines.json). Times are seconds since the request.
  const POLICY = Object.freeze({   // lead_s: audio starts this long after the decision
    margin_s: 0.06, rate_margin: 0.02, text_margin: 0.02, min_span_s: 0.05,
    rate_pseudo_s: 0.5, rate_shrink_s: 0.0, rate_cap: 1.0, first_shrink_s: 1.0, first_gap_trust: 1.0, agree: 1.5,
    default_sec_per_char: 0.058, text_overrun: 0.2, lead_s: 0.02, late_tol_s: 0.005,
  });

  // The ideal start: the earliest moment from which playback never runs dry,
  // max over chunks k of (arrival_k - audio before k).
  const LEAD_S = POLICY.lead_s;

  function idealStartS(arrivalsS, durationsS) {
    let before = 0, best = -Infinity;
    for (let k = 0; k < arrivalsS.length; k++) {
      best = Math.max(best, arrivalsS[k] - before);
      before += durationsS[k];
    }
    return arrivalsS.length ? best : null;
  }

  // When to start playing from audio position o.pos_s given the chunks that arrived:
  // {start_at_s (Infinity = wait), rate, chunk_s, remaining_s, reason}. See playout.py.
  function plan(arrivalsS, durationsS, o) {
    o = o || {};
    const P = Object.assign({}, POLICY, o.policy || {});
    const pos = o.pos_s || 0, n = arrivalsS.length;
    let received = 0;
    for (const d of durationsS) received += d;
    if (n === 0 || received - pos <= 1e-9) return { start_at_s: Infinity, rate: null, chunk_s: 0, remaining_s: 0, reason: 'nothing buffered' };
    const aLast = arrivalsS[n - 1];
    if (o.done) return { start_at_s: aLast, rate: null, chunk_s: 0, remaining_s: 0, reason: 'all audio is here' };
    let obs = -Infinity, off = 0;
    for (let k = 0; k < n; k++) {
      if (off >= pos - 1e-9) obs = Math.max(obs, arrivalsS[k] - (off - pos));
      off += durationsS[k];
    }
    let firstBurst = 0, k2 = n, secondBurst = 0;
    for (let k = 0; k < n; k++) {
      if (arrivalsS[k] - arrivalsS[0] < P.min_span_s) firstBurst += durationsS[k];
      else if (k2 === n) k2 = k;                                        // the second burst starts
    }
    for (let k = k2; k < n; k++) if (arrivalsS[k] - arrivalsS[k2] < P.min_span_s) secondBurst += durationsS[k];
    const span = aLast - arrivalsS[0];
    let rate, how;
    if (span >= P.min_span_s) {
      const prior = o.rate_prior || 0, tau = o.rate_prior ? P.rate_pseudo_s : P.rate_shrink_s;
      rate = (received - firstBurst + prior * tau) / (span + tau); how = 'measured';
      const span2 = aLast - arrivalsS[k2];
      // a catch-up burst must not look fast: bounded by the rate after the second burst, or
      // (one gap only) by the average since the request unless the gap agrees with the learnt
      // rate; a slow start (a cold voice, a queue) is not held against the stream
      const agrees = o.rate_prior && received - firstBurst <= P.agree * o.rate_prior * span;
      const tau2 = o.rate_prior ? tau : 0;                              // a bound is not shrunk
      if (span2 >= P.min_span_s) rate = Math.min(rate, (received - firstBurst - secondBurst + prior * tau2) / (span2 + tau2));
      else if (!agrees) {
        const cap = P.rate_cap * received / Math.max(aLast, 1e-3);
        rate = Math.min(rate, o.rate_prior ? cap : Math.max(cap, P.first_gap_trust));   // nothing learnt: up to real time
      }
    }
    else if (o.rate_prior) { rate = o.chunk_prior ? o.rate_prior : Math.min(o.rate_prior, received / Math.max(aLast, 1e-3)); how = 'learnt'; }
    else { rate = received / (aLast + (n > 1 ? P.first_shrink_s : 0)); how = 'first burst'; }   // one chunk: its average; a burst: held back
    rate = Math.max(rate, 1e-3) / (1 + P.rate_margin);
    let chunk = durationsS[0];
    if (n >= 2) {
      chunk = 0;
      for (let k = 1; k < n; k++) chunk = Math.max(chunk, durationsS[k], rate * (arrivalsS[k] - arrivalsS[k - 1]));
    }
    chunk = Math.max(chunk, o.chunk_prior || 0);                         // the learnt chunk size
    const spc = o.sec_per_char || P.default_sec_per_char;
    const chars = o.text_chars || 0;
    const total = chars > 0 ? chars * spc * (1 + P.text_margin) : 2 * received;
    let remaining = Math.max(total - received, chunk);
    if (chars > 0 && received > total) remaining = Math.max(chunk, P.text_overrun * received);   // a slower voice: one stall
    // the chunks to come: `full` whole chunks, then the rest (a stream cut in fixed sizes ends
    // on a partial chunk); linear over the whole ones, so the first, the last and the rest matter
    const full = Math.max(0, Math.ceil(remaining / chunk - 1e-9) - 1);
    let pred = aLast + remaining / rate - (received + full * chunk - pos);
    if (full) {
      pred = Math.max(pred, aLast + chunk / rate - (received - pos),
        aLast + full * chunk / rate - (received + (full - 1) * chunk - pos));
    }
    pred += P.margin_s;
    return { start_at_s: Math.max(obs, pred), rate, chunk_s: chunk, remaining_s: remaining, reason: how };
  }

  // Play one arrival timeline with the rule (no audio clock): the twin of playout.simulate.
  function simulate(arrivalsS, durationsS, o) {
    o = o || {};
    const P = Object.assign({}, POLICY, o.policy || {});
    const arr = arrivalsS.map(Number), dur = durationsS.map(Number), n = arr.length;
    const res = { start_s: null, ideal_start_s: idealStartS(arr, dur), underruns: [], decisions: [] };
    if (!n) return res;
    const end = o.done_s == null ? arr[n - 1] : Math.max(o.done_s, arr[n - 1]);
    const events = [...new Set(arr.concat([end]))].sort((x, y) => x - y);
    const offsets = []; let off = 0;
    for (const d of dur) { offsets.push(off); off += d; }
    const popts = (pos, done) => ({ pos_s: pos, done, text_chars: o.text_chars || 0, sec_per_char: o.sec_per_char, rate_prior: o.rate_prior, chunk_prior: o.chunk_prior, policy: o.policy });
    const decide = (tFrom, pos) => {
      const cand = [tFrom].concat(events.filter((e) => e > tFrom));
      for (let i = 0; i < cand.length; i++) {
        const t = cand[i];
        const k = arr.filter((a) => a <= t).length;
        const p = plan(arr.slice(0, k), dur.slice(0, k), popts(pos, t >= end));
        const s = Math.max(t, p.start_at_s), nxt = i + 1 < cand.length ? cand[i + 1] : Infinity;
        if (s < nxt) return s;
      }
      throw new Error('the rule never started although all audio arrived');
    };
    const play = (seg, pos, k) => {
      for (; k < n; k++) if (offsets[k] > pos + 1e-9 && arr[k] > seg + (offsets[k] - pos) - P.late_tol_s) return k;
      return n;
    };
    let s = decide(0, 0);
    res.decisions.push(s);
    let seg = s + P.lead_s, pos = 0, k = 0;
    res.start_s = seg;
    for (;;) {
      k = play(seg, pos, k);
      if (k >= n) return res;
      const dry = seg + (offsets[k] - pos);
      pos = offsets[k];
      s = decide(dry, pos);
      res.decisions.push(s);
      res.underruns.push([pos, s + P.lead_s - dry]);
      seg = s + P.lead_s;
    }
  }

  // ---------------------------------------------------------------- one player
  function create(opts) {
    opts = opts || {};
    const BASE = (opts.base || base()).replace(/\/?$/, '/');
    const onEvent = opts.onEvent || (() => {});
    const emit = (type, detail) => {
      try { onEvent(type, detail || {}); } catch (e) { console.error('LLPlayer onEvent', type, e); }
    };

    let ws = null, ctx = null, master = null, analyser = null;
    let gen = null;             // the current generation (only its token's messages count)
    const collecting = {};      // token -> {resolve, reject, start, frames}: collect()'s streams
    let replaySrc = null, replayT0 = 0;
    let tokenSeq = (Math.random() * 1e6) | 0;
    const P = { gens: [], session: null, underrunsSaved: 0, version: 1 };

    // -------------------------------------------------------------- audio context
    function ensureContext(rate) {
      if (ctx && (!rate || ctx.sampleRate === rate)) return ctx;
      if (ctx && gen && gen.state !== 'ended' && gen.state !== 'stopped') return ctx;   // never swap under a stream
      if (ctx) { stopReplay(); ctx.close(); }
      const o = { latencyHint: 'interactive' };
      if (rate) o.sampleRate = rate;
      try { ctx = new AudioContext(o); } catch (e) { ctx = new AudioContext({ latencyHint: 'interactive' }); }
      master = ctx.createGain();
      analyser = ctx.createAnalyser();
      analyser.fftSize = 512;
      master.connect(analyser);
      analyser.connect(ctx.destination);
      return ctx;
    }
    const resume = () => { if (ctx && ctx.state !== 'running') ctx.resume(); };
    document.addEventListener('pointerdown', resume, true);
    document.addEventListener('keydown', resume, true);

    // -------------------------------------------------------------- websocket
    // One socket, reconnected for as long as the page lives. A connect that has not opened
    // after CONNECT_TIMEOUT_MS is given up (a restarting server behind a proxy can hold it
    // for a minute), and each failed try waits longer before the next (RETRY_MS, doubling,
    // at most RETRY_MAX_MS). Every change is an event, 'connection': {state: 'connecting' |
    // 'open' | 'lost', attempt, retry_ms}, so a page can say what is happening. What is sent
    // while no socket is open waits for the next one to open; a stream that was running when
    // its socket closed fails ('error': the connection was lost), one still waiting is sent
    // on the next socket.
    const CONNECT_TIMEOUT_MS = 5000, RETRY_MS = 500, RETRY_MAX_MS = 8000;
    let failures = 0, waiting = [];
    function connect() {
      const url = new URL(BASE + 'll/ws', location.href);
      url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const sock = new WebSocket(url);
      ws = sock;
      sock.binaryType = 'arraybuffer';
      emit('connection', { state: 'connecting', attempt: failures + 1 });
      const timer = setTimeout(() => { if (sock.readyState === WebSocket.CONNECTING) sock.close(); }, CONNECT_TIMEOUT_MS);
      sock.onopen = () => {
        clearTimeout(timer);
        failures = 0;
        emit('open', {});
        emit('connection', { state: 'open', attempt: 0 });
        for (const w of waiting.splice(0)) w(sock);
      };
      sock.onmessage = (ev) => {
        if (typeof ev.data !== 'string') { onBinary(ev.data); return; }
        let m; try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m && typeof m === 'object') onJson(m);
      };
      sock.onclose = () => {
        clearTimeout(timer);
        if (ws !== sock) return;
        if (gen && !gen.done && gen.sock === sock) failStream(gen, 'the connection to the server was lost');
        for (const k of Object.keys(collecting)) {
          if (collecting[k].sock !== sock) continue;
          collecting[k].reject(new Error('the connection to the server was lost')); delete collecting[k];
        }
        failures += 1;
        const retry = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** Math.min(failures - 1, 10));
        emit('close', {});
        emit('connection', { state: 'lost', attempt: failures, retry_ms: retry });
        setTimeout(connect, retry);
      };
    }
    const opened = () => (ws && ws.readyState === WebSocket.OPEN ? Promise.resolve(ws) : new Promise((res) => waiting.push(res)));
    async function send(obj) { const s = await opened(); s.send(JSON.stringify(obj)); return s; }

    // -------------------------------------------------------------- request / stop
    function newGen(token, clickT, msg) {
      return {
        token, clickT, request: msg, state: 'wait', done: false, status: null, sr: 0, ch: 1,
        takeId: null, textChars: 0, start: null, chunks: [], pcm: [], framesRecv: 0,
        framesSched: 0, segments: [], sources: [], segStart: 0, segFrame0: 0, dryCtx: null,
        underruns: { count: 0, stallMs: 0, positions: [], events: [] },
        firstScheduledMs: null, firstSoundMs: null, firstAudibleMs: null, prebufferMs: null,
        summary: null, findings: null, glitches: [], reported: false, error: null, finished: false,
        plans: [],
      };
    }

    function request(msg, o) {
      o = o || {};
      const clickT = o.clickT != null ? o.clickT : performance.now();
      ensureContext(o.sampleRate); resume();
      if (gen && !gen.done) { send({ type: 'stop', token: gen.token }); gen.done = true; gen.status = 'cancelled'; }
      if (gen) stopAudio(gen);
      stopReplay();
      tokenSeq = (tokenSeq + 1) >>> 0;
      gen = newGen(tokenSeq, clickT, msg);
      P.gens.push(gen);
      if (P.gens.length > MAX_GENS) P.gens.splice(0, P.gens.length - MAX_GENS);
      const g = gen;
      send(Object.assign({}, msg, { token: g.token })).then((sock) => { g.sock = sock; });
      return g.token;
    }

    // A stream fetched whole on this socket and handed over, not played (a MUSHRA screen
    // decodes every stimulus itself): resolves with {start, frames: [Int16Array]} on `done`,
    // rejects on `error`, `cancelled` or a lost connection.
    function collect(msg) {
      tokenSeq = (tokenSeq + 1) >>> 0;
      const token = tokenSeq;
      const p = new Promise((resolve, reject) => { collecting[token] = { resolve, reject, start: null, frames: [] }; });
      send(Object.assign({}, msg, { token })).then((sock) => { if (collecting[token]) collecting[token].sock = sock; });
      return p;
    }
    function onCollected(m) {
      const c = collecting[m.token];
      if (m.type === 'start') c.start = m;
      else if (m.type === 'done') { delete collecting[m.token]; c.resolve(c); }
      else if (m.type === 'error' || m.type === 'cancelled') { delete collecting[m.token]; c.reject(new Error(m.message || 'the audio could not be loaded')); }
    }

    function stop() {
      const g = gen; if (!g) return;
      if (!g.done) { send({ type: 'stop', token: g.token }); g.done = true; g.status = 'cancelled'; }
      const heard = positionMs();
      stopAudio(g); stopReplay();
      finish(g, { stopped: true, heardMs: heard });
    }

    function stopAudio(g) {
      for (const s of g.sources) { try { s.stop(); } catch (e) { /* not started */ } }
      g.sources = [];
      if (g.state !== 'ended') g.state = 'stopped';
    }

    // -------------------------------------------------------------- messages
    function onJson(m) {
      if (m.type === 'hello') { P.session = m.session; emit('message', m); return; }
      if (m.type === 'glitch_saved') { onGlitchSaved(m); return; }
      if (m.type === 'underruns_saved') { P.underrunsSaved += 1; emit('message', m); return; }
      if (m.token != null && collecting[m.token]) { onCollected(m); return; }
      const g = gen;
      if (m.token === undefined || m.token === null) { emit('message', m); return; }
      if (!g || m.token !== g.token) return;               // a stale generation's message
      if (m.type === 'queued') emit('queued', { position: m.position });
      else if (m.type === 'generating') { g.takeId = m.take_id; emit('generating', { take_id: m.take_id }); }
      else if (m.type === 'start') {
        g.sr = m.sample_rate; g.ch = m.channels; g.takeId = m.take_id; g.textChars = m.text_chars || 0;
        g.start = m;
        emit('start', Object.assign({}, m));
      } else if (m.type === 'done') {
        g.done = true; g.status = 'ok'; g.summary = m; g.doneMs = performance.now() - g.clickT;
        emit('done', m);
        pump(g);
        if (g.state === 'ended' || (g.state === 'wait' && !g.framesRecv)) finish(g, {});
      } else if (m.type === 'error') {
        g.summary = Object.assign(g.summary || {}, m);
        failStream(g, m.message, m);
      } else if (m.type === 'cancelled') {
        g.done = true; g.status = g.status || 'cancelled';
        emit('cancelled', { take_id: m.take_id });
      } else if (m.type === 'findings') { g.findings = m; emit('findings', m); }
      else emit('message', m);
    }

    function failStream(g, message, m) {
      if (g !== gen) return;
      g.done = true; g.status = 'error'; g.error = String(message);
      const partial = g.framesRecv > 0;
      emit('error', Object.assign({}, m || {}, { message: g.error, partial, partial_s: partial ? g.framesRecv / g.sr : 0 }));
      pump(g);                                             // play out what did arrive, marked partial
      if (!partial || g.state === 'ended') finish(g, {});
    }

    function onBinary(buf) {
      const g = gen;
      const f = parseFrame(buf);
      if (!f) return;
      if (collecting[f.token]) { collecting[f.token].frames.push(f.pcm); return; }
      const { token, index, serverMs, pcm } = f;
      if (!g || token !== g.token || g.state === 'stopped' || g.finished || !g.sr) return;   // stale: never played
      const now = performance.now();
      const frames = Math.floor(pcm.length / g.ch);
      const c = { index, frames, offset: g.framesRecv, serverMs, arrivalMs: now - g.clickT, deadlineMs: null };
      g.chunks.push(c);
      g.pcm.push(pcm); g.framesRecv += frames;
      emit('chunk', { index, arrival_ms: c.arrivalMs, server_ms: serverMs, frames, count: g.chunks.length });
      pump(g);
    }

    // -------------------------------------------------------------- scheduling
    // The start rule, live: re-planned after every chunk (and on `done`), from the position where
    // playback would (re)start. Times are this page's clock, seconds since the click.
    function readyToPlay(g) {
      const nowS = (performance.now() - g.clickT) / 1000;
      const pos = g.framesSched / g.sr;
      const key = g.chunks.length + ':' + g.done + ':' + g.framesSched;
      if (g.planKey !== key) {
        g.planKey = key;
        const st = g.start || {}, learnt = st.learnt || {};
        const p = plan(g.chunks.map((c) => c.arrivalMs / 1000), g.chunks.map((c) => c.frames / g.sr), {
          pos_s: pos, done: g.done, text_chars: g.textChars,
          sec_per_char: learnt.sec_per_char || null, rate_prior: learnt.rate || null, chunk_prior: learnt.chunk_s || null,
        });
        g.plan = p;
        if (g.plans.length < 2000) g.plans.push({ at_s: nowS, chunks: g.chunks.length, pos_s: pos, start_at_s: p.start_at_s, rate: p.rate, reason: p.reason });
        clearTimeout(g.planTimer);
        if (isFinite(p.start_at_s) && p.start_at_s > nowS) g.planTimer = setTimeout(() => pump(g), (p.start_at_s - nowS) * 1000 + 1);
      }
      return nowS >= g.plan.start_at_s;
    }

    function scheduleAll(g) {
      while (g.framesSched < g.framesRecv) {
        const ci = g.chunks.findIndex((c) => c.offset === g.framesSched);
        const c = g.chunks[ci], pcm = g.pcm[ci];
        const when = g.segStart + (g.framesSched - g.segFrame0) / g.sr;   // sample-accurate, no drift
        if (c.frames > 0) {
          const buf = ctx.createBuffer(g.ch, c.frames, g.sr);
          for (let ch = 0; ch < g.ch; ch++) {
            const out = buf.getChannelData(ch);
            for (let i = 0, j = ch; i < c.frames; i++, j += g.ch) out[i] = pcm[j] / 32768;
          }
          const src = ctx.createBufferSource(); src.buffer = buf; src.connect(master);
          src.start(when);
          g.sources.push(src);
        }
        c.whenCtx = when;                                               // the audio clock's start time
        c.deadlineMs = performance.now() - g.clickT + (when - ctx.currentTime) * 1000;
        if (g.firstScheduledMs == null) {
          g.firstScheduledMs = performance.now() - g.clickT;
          g.firstSoundMs = c.deadlineMs + ((ctx.outputLatency || 0) + (ctx.baseLatency || 0)) * 1000;
          g.prebufferMs = g.firstScheduledMs - c.arrivalMs;
          P.firstScheduledMs = g.firstScheduledMs;
          emit('first_sound', { click_to_first_ms: g.firstSoundMs, first_scheduled_ms: g.firstScheduledMs });
        }
        g.framesSched += c.frames;
        g.segments[g.segments.length - 1].frames += c.frames;
      }
    }

    function pump(g) {
      if (g !== gen || g.state === 'stopped' || g.state === 'ended' || !ctx) return;
      if (g.state === 'play') {
        const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
        // a chunk that would start in the past (or within late_tol_s) is an underrun, never an overlap
        if (ctx.currentTime + POLICY.late_tol_s >= end && !(g.done && g.framesSched === g.framesRecv)) noteUnderrun(g, end);
        else { scheduleAll(g); armEnd(g); return; }
      }
      if ((g.state === 'wait' || g.state === 'rebuffer') && g.framesRecv > g.framesSched && readyToPlay(g)) {
        const rebuffer = g.state === 'rebuffer';
        g.segStart = ctx.currentTime + LEAD_S; g.segFrame0 = g.framesSched;
        let stall = 0;
        if (rebuffer) {
          stall = Math.max(0, g.segStart - g.dryCtx) * 1000; g.underruns.stallMs += stall;
          g.underruns.events.push({ position_ms: (g.framesSched / g.sr) * 1000, stall_ms: stall });
        }
        g.segments.push({ ctxStart: g.segStart, frame0: g.framesSched, frames: 0 });
        g.state = 'play';
        scheduleAll(g); armEnd(g);
        emit('playing', { rebuffer, stall_ms: stall, total_stall_ms: g.underruns.stallMs });
      }
    }

    function noteUnderrun(g, dryCtx) {
      g.state = 'rebuffer'; g.dryCtx = dryCtx; g.planKey = null;
      g.underruns.count += 1; g.underruns.positions.push((g.framesSched / g.sr) * 1000);
      emit('underrun', { count: g.underruns.count, stall_ms: g.underruns.stallMs, position_ms: (g.framesSched / g.sr) * 1000 });
    }

    function armEnd(g) {
      if (!(g.done && g.framesSched === g.framesRecv)) return;
      const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
      clearTimeout(g.endTimer);
      g.endTimer = setTimeout(() => { if (gen === g && g.state === 'play') { g.state = 'ended'; finish(g, {}); } },
        Math.max(0, (end - ctx.currentTime) * 1000 + 30));
    }

    // watchdog: detects the queue running dry between arrivals, and the first audible output
    setInterval(() => {
      const g = gen; if (!g || !ctx) return;
      if (g.state === 'play' && !(g.done && g.framesSched === g.framesRecv)) {
        const end = g.segStart + (g.framesSched - g.segFrame0) / g.sr;
        if (ctx.currentTime + POLICY.late_tol_s >= end) noteUnderrun(g, end);
      }
      if (g.state === 'wait' || g.state === 'rebuffer') pump(g);
      if (g.firstAudibleMs == null && g.state === 'play' && analyser) {
        const a = new Float32Array(analyser.fftSize); analyser.getFloatTimeDomainData(a);
        let s = 0; for (const v of a) s += v * v;
        if (Math.sqrt(s / a.length) > 0.005) g.firstAudibleMs = performance.now() - g.clickT;
      }
    }, 20);

    // -------------------------------------------------------------- end of a take
    function finish(g, how) {
      if (g.finished) return; g.finished = true;
      if (g.state !== 'stopped') g.state = 'ended';
      const sr = g.sr || 1;
      const ideal = idealStartS(g.chunks.map((c) => c.arrivalMs / 1000), g.chunks.map((c) => c.frames / sr));
      g.idealStartMs = ideal == null ? null : ideal * 1000;
      g.actualStartMs = g.chunks.length && g.chunks[0].deadlineMs != null ? g.chunks[0].deadlineMs : null;
      g.lateByMs = g.idealStartMs != null && g.actualStartMs != null ? g.actualStartMs - g.idealStartMs : null;
      if (g.takeId && g.framesRecv && !g.reported) {
        g.reported = true;
        send({ type: 'underruns', token: g.token, take_id: g.takeId, count: g.underruns.count,
          stall_ms: g.underruns.stallMs, positions_ms: g.underruns.positions,
          browser: { first_scheduled_ms: g.firstScheduledMs, first_sound_ms: g.firstSoundMs,
            ideal_start_ms: g.idealStartMs, actual_start_ms: g.actualStartMs, stalls: g.underruns.events } });
      }
      emit('ended', {
        take_id: g.takeId, complete: g.status === 'ok', stopped: !!how.stopped, error: g.error,
        played_ms: how.stopped ? how.heardMs : (g.framesSched / sr) * 1000,
        duration_ms: (g.framesRecv / sr) * 1000, chunks: g.chunks.length,
        underruns: g.underruns.count, stall_ms: g.underruns.stallMs, stalls: g.underruns.events.slice(),
        ideal_start_ms: g.idealStartMs, actual_start_ms: g.actualStartMs, late_by_ms: g.lateByMs,
        summary: g.summary,
      });
    }

    function concatPcm(g) {
      const out = new Int16Array(g.framesRecv * g.ch); let o = 0;
      for (const p of g.pcm) { out.set(p.subarray(0, Math.min(p.length, out.length - o)), o); o += p.length; }
      return out;
    }
    function pcmBase64(g) {
      const b = new Uint8Array(concatPcm(g || gen).buffer); let s = '';
      for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
      return btoa(s);
    }
    function wav(g) {
      g = g || gen;
      const pcm = concatPcm(g), n = pcm.length * 2, b = new ArrayBuffer(44 + n), v = new DataView(b);
      const w = (o, s) => { for (let i = 0; i < s.length; i++) v.setUint8(o + i, s.charCodeAt(i)); };
      w(0, 'RIFF'); v.setUint32(4, 36 + n, true); w(8, 'WAVE'); w(12, 'fmt '); v.setUint32(16, 16, true);
      v.setUint16(20, 1, true); v.setUint16(22, g.ch, true); v.setUint32(24, g.sr, true);
      v.setUint32(28, g.sr * g.ch * 2, true); v.setUint16(32, g.ch * 2, true); v.setUint16(34, 16, true);
      w(36, 'data'); v.setUint32(40, n, true); new Int16Array(b, 44).set(pcm);
      return b;
    }

    // -------------------------------------------------------------- replay, position, glitch
    function replay() {
      const g = gen; if (!g || !g.framesRecv || !ctx) return false;
      stopReplay(); resume();
      const pcm = concatPcm(g), buf = ctx.createBuffer(g.ch, g.framesRecv, g.sr);
      for (let ch = 0; ch < g.ch; ch++) { const o = buf.getChannelData(ch); for (let i = 0, j = ch; i < g.framesRecv; i++, j += g.ch) o[i] = pcm[j] / 32768; }
      replaySrc = ctx.createBufferSource(); replaySrc.buffer = buf; replaySrc.connect(master);
      replayT0 = ctx.currentTime + LEAD_S; replaySrc.start(replayT0);
      const src = replaySrc;
      replaySrc.onended = () => { if (replaySrc === src) { replaySrc = null; emit('replay', { ended: true }); } };
      emit('replay', { ended: false, take_id: g.takeId });
      return true;
    }
    function stopReplay() { if (replaySrc) { try { replaySrc.stop(); } catch (e) { /* */ } replaySrc = null; } }

    function positionMs() {
      const g = gen; if (!g || !ctx || !g.sr) return null;
      const t = ctx.currentTime - (ctx.outputLatency || 0) - (ctx.baseLatency || 0);   // what is heard now
      if (replaySrc) return Math.max(0, Math.min(g.framesRecv / g.sr, t - replayT0)) * 1000;
      let pos = 0;
      for (const s of g.segments) {
        if (t < s.ctxStart) break;
        pos = (s.frame0 + Math.min(s.frames, (t - s.ctxStart) * g.sr)) / g.sr;
      }
      return pos * 1000;
    }

    function glitch(kind) {
      const g = gen; if (!g || !g.takeId || !g.framesRecv) return null;
      const pos = positionMs() || 0;
      const report_id = crypto.randomUUID ? crypto.randomUUID().replace(/-/g, '') : String(Date.now()) + Math.random();
      const r = { report_id, position_ms: pos, kind: kind || null };
      g.glitches.push(r);
      send({ type: 'glitch', token: g.token, take_id: g.takeId, position_ms: pos, kind: kind || null, report_id });
      return { take_id: g.takeId, position_ms: pos, report_id };
    }
    function onGlitchSaved(m) {
      const g = P.gens.find((x) => x.takeId === m.take_id);
      if (g) { const r = g.glitches.find((x) => x.report_id === m.report_id); if (r) Object.assign(r, m); }
      emit('glitch_saved', m);
    }

    Object.assign(P, {
      request, collect, stop, replay, glitch, positionMs, send, resume, stopReplay, pcmBase64, wav,
      pcm: (g) => concatPcm(g || gen),
      prepare: (rate) => ensureContext(rate),
    });
    Object.defineProperties(P, {
      current: { get: () => gen },
      ctx: { get: () => ctx },
      replaying: { get: () => !!replaySrc },
      state: {
        get: () => ({
          token: gen ? gen.token : null, take_id: gen ? gen.takeId : null,
          playing: !!gen && gen.state === 'play', ended: !!gen && gen.finished,
          sample_rate: gen ? gen.sr : null, channels: gen ? gen.ch : null,
        }),
      },
    });
    ensureContext(opts.sampleRate);
    connect();
    return P;
  }

  window.LLPlayer = { create, plan, simulate, idealStartS, POLICY, base, parseFrame, version: 1 };
})();
