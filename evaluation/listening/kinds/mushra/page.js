// listenlab MUSHRA screen (window.LLKinds.mushra), as webMUSHRA does it: the reference and
// every condition of one screen are fetched once, whole, over the page's one socket (the
// player's collect(): blind, one format, equal frames, opaque stream ids), decoded into
// AudioBuffers of one length, and played by one source per stimulus, all started together;
// choosing a stimulus only moves the gains (a 5 ms ramp), so the playhead stays where it is.
// Loop on/off and a loop segment (from/to). Sliders start unset; each must be moved; the five
// bands are the server's (the kind's scale()). Play credit per slot = the time that slot was
// audible, reported as play events on the same socket (the server caps each slot and their
// sum by the wall time since the screen's audio was sent in full).
(function () {
  'use strict';
  const RAMP_S = 0.005;
  const REPORT_EVERY_MS = 2000;
  const MAX_REPORTS = 50;   // per slot and screen (the server stores at most 60)

  function el(tag, text, cls) { const e = document.createElement(tag); if (text != null) e.textContent = String(text); if (cls) e.className = cls; return e; }

  // ctx: the rater page's (listen.js): item, scale, slots, player, testId, token, changed(), error(msg)
  function render(ctx) {
    const it = ctx.item, n = it.slots, BANDS = ctx.scale.bands || [];
    const base = { test_id: ctx.testId, rater_token: ctx.token, assignment_id: it.assignment_id };
    const order = (it.has_reference ? [-1] : []).concat([...Array(n).keys()]);
    const send = (obj) => ctx.player.send(obj);
    const fetchWhole = (slot) => ctx.player.collect(Object.assign({ type: 'stimulus', slot, delivery: 'whole' }, base));
    const S = {
      loaded: false, playing: false, active: it.has_reference ? -1 : 0, loop: true, from: 0, to: 0, duration: 0,
      credit: {}, reported: {}, since: null, t0: 0, offset: 0, sources: {}, gains: {}, buffers: {}, log: [],
      values: Array(n).fill(null), timer: null, destroyed: false, ctx: null,
    };

    // ------------------------------------------------------------ the screen
    const root = ctx.slots; root.replaceChildren();
    let refButton = null;
    if (it.has_reference) {   // the open reference: played like any slot, never gated or rated
      const ref = el('div'); ref.id = 'lt-reference';
      refButton = el('button', 'Reference'); refButton.type = 'button'; refButton.id = 'lt-ref';
      ref.append(refButton);
      root.append(ref);
    }
    const bar = el('div', null, 'lt-mu-transport');
    const playBtn = el('button', 'Play', 'lt-mu-play'); playBtn.type = 'button'; playBtn.id = 'lt-mu-play'; playBtn.disabled = true;
    const stopBtn = el('button', 'Stop'); stopBtn.type = 'button'; stopBtn.id = 'lt-mu-stop';
    const loopLab = el('label', null, 'lt-mu-loop'); const loopBox = el('input'); loopBox.type = 'checkbox'; loopBox.id = 'lt-mu-loop'; loopBox.checked = true;
    loopLab.append(loopBox, ' Loop');
    const fromIn = el('input'); fromIn.type = 'number'; fromIn.id = 'lt-mu-from'; fromIn.step = '0.1'; fromIn.min = '0';
    const toIn = el('input'); toIn.type = 'number'; toIn.id = 'lt-mu-to'; toIn.step = '0.1'; toIn.min = '0';
    const seg = el('span', null, 'lt-mu-seg'); seg.append('Segment ', fromIn, ' to ', toIn, ' s');
    const pos = el('progress', null, 'lt-mu-pos'); pos.id = 'lt-mu-pos'; pos.max = 1; pos.value = 0;
    const msg = el('span', 'Loading the audio…', 'lt-mu-msg');
    bar.append(playBtn, stopBtn, loopLab, seg, pos, msg);
    const scale = el('div', null, 'lt-scale');
    scale.append(el('span', '', 'lt-scale-pad'));
    const bands = el('div', null, 'lt-bands');
    for (const [lo, hi, name] of BANDS.slice().reverse()) {
      const b = el('span', null, 'lt-band'); b.dataset.band = name;
      b.append(el('b', name), el('small', ' ' + lo + '–' + hi));
      bands.append(b);
    }
    scale.append(bands, el('span', '', 'lt-scale-pad'));
    const rows = el('div', null, 'lt-mu-rows');
    const sliders = [];
    for (let i = 0; i < n; i++) {
      const row = el('div', null, 'lt-slot');
      const b = el('button', 'Play ' + it.labels[i], 'lt-play'); b.type = 'button'; b.dataset.slot = String(i);
      b.addEventListener('click', () => choose(i));
      const r = el('input'); r.type = 'range'; r.min = '0'; r.max = '100'; r.step = '1'; r.value = '50';
      r.className = 'lt-slider lt-unset'; r.dataset.slot = String(i); r.setAttribute('aria-label', 'Score of ' + it.labels[i] + ' (not rated yet)');
      const v = el('span', '–', 'lt-val');
      const band = el('span', '', 'lt-mu-band-name');   // shown on narrow screens (no band row)
      const set = () => {
        S.values[i] = Number(r.value); r.classList.remove('lt-unset'); r.dataset.moved = '1';
        r.setAttribute('aria-label', 'Score of ' + it.labels[i]);
        v.textContent = r.value; ctx.changed();
        const hit = BANDS.find(([lo]) => Number(r.value) >= lo);
        band.textContent = hit ? hit[2] : '';
      };
      r.addEventListener('input', set); r.addEventListener('change', set);
      sliders.push(r);
      row.append(b, r, v, band, el('span', '', 'lt-played'));
      rows.append(row);
    }
    root.append(bar, scale, rows);
    if (refButton) refButton.onclick = () => choose(-1);

    // ------------------------------------------------------------ fetch once, decode
    (async () => {
      try {
        let fmt = null; const pcm = {};
        for (const slot of order) {
          const w = await fetchWhole(slot);
          fmt = fmt || w.start; pcm[slot] = w.frames;
          if (S.destroyed) return;
        }
        const ch = fmt.channels, sr = fmt.sample_rate;
        let len = 0;
        for (const slot of order) len = Math.max(len, pcm[slot].reduce((a, f) => a + f.length / ch, 0));
        S.ctx = new AudioContext({ sampleRate: sr, latencyHint: 'interactive' });
        for (const slot of order) {    // one length for all: every source stays in step
          const buf = S.ctx.createBuffer(ch, Math.max(1, len), sr);
          const outs = [...Array(ch).keys()].map((c) => buf.getChannelData(c));
          let o = 0;
          for (const f of pcm[slot]) {
            for (let i = 0, k = 0; k < f.length; i++, k += ch) for (let c = 0; c < ch; c++) outs[c][o + i] = f[k + c] / 32768;
            o += f.length / ch;
          }
          S.buffers[slot] = buf;
        }
        S.duration = len / sr; S.from = 0; S.to = S.duration;
        fromIn.max = toIn.max = S.duration.toFixed(2); fromIn.value = '0'; toIn.value = S.duration.toFixed(2);
        S.loaded = true; playBtn.disabled = false; msg.textContent = '';
        S.timer = setInterval(tick, 100);
        markActive();
      } catch (e) { msg.textContent = ''; ctx.error(e.message); }
    })();

    // ------------------------------------------------------------ the engine
    function segment() {
      const a = Math.max(0, Math.min(Number(fromIn.value) || 0, S.duration));
      let b = Math.max(0, Math.min(Number(toIn.value) || S.duration, S.duration));
      if (b - a < 0.1) b = Math.min(S.duration, a + 0.1);
      return [a, b];
    }
    // where the playhead of ``slot``'s own source is now (its start time, offset and loop)
    function sourcePos(slot) {
      const s = S.sources[slot];
      if (!s) return S.offset;
      const t = Math.max(0, S.ctx.currentTime - s.startedAt) + s.offsetAt;
      if (s.node.loop) { const L = s.node.loopEnd - s.node.loopStart; return t < s.node.loopEnd ? t : s.node.loopStart + ((t - s.node.loopStart) % L); }
      return Math.min(t, S.duration);
    }
    function start() {
      if (!S.loaded || S.playing) return;
      S.ctx.resume();
      [S.from, S.to] = segment(); S.loop = loopBox.checked;
      if (S.offset < S.from || S.offset >= S.to) S.offset = S.from;
      const when = S.ctx.currentTime + 0.03;
      for (const slot of order) {
        const g = S.ctx.createGain(); g.gain.value = slot === S.active ? 1 : 0; g.connect(S.ctx.destination);
        const node = S.ctx.createBufferSource(); node.buffer = S.buffers[slot]; node.connect(g);
        node.loop = S.loop; node.loopStart = S.from; node.loopEnd = S.to;
        if (S.loop) node.start(when, S.offset); else node.start(when, S.offset, S.to - S.offset);
        S.sources[slot] = { node, startedAt: when, offsetAt: S.offset }; S.gains[slot] = g;
      }
      S.playing = true; S.since = when; playBtn.textContent = 'Pause';
      const first = S.sources[order[0]].node;
      first.onended = () => { if (S.sources[order[0]] && S.sources[order[0]].node === first && S.playing) halt(S.from); };
      S.log.push({ type: 'play', at: when, active: S.active, offset: S.offset, loop: S.loop, from: S.from, to: S.to });
    }
    function halt(resumeAt) {
      if (!S.playing) return;
      accrue();
      const p = sourcePos(S.active);
      for (const slot of order) { const s = S.sources[slot]; if (s) { s.node.onended = null; try { s.node.stop(); } catch (e) { /* */ } s.node.disconnect(); } }
      S.sources = {}; S.gains = {}; S.playing = false;
      S.offset = resumeAt != null ? resumeAt : p; playBtn.textContent = 'Play';
      report(S.active, true);
      S.log.push({ type: 'pause', position: p });
      pos.value = S.duration ? S.offset / S.duration : 0;
    }
    function accrue() {   // audible time of the active slot since the last accrual
      if (!S.playing || S.since == null) return;
      const now = S.ctx.currentTime, dt = Math.max(0, now - Math.max(S.since, 0));
      if (now > S.since) { S.credit[S.active] = (S.credit[S.active] || 0) + dt; S.since = now; }
    }
    // At most one play event per slot every REPORT_EVERY_MS (raters switch often; the server
    // keeps a bounded number per slot), at once when the slot first reaches what the gate needs.
    function report(slot, force) {
      if (slot < 0 || !(S.credit[slot] > 0)) return;
      const ms = S.credit[slot] * 1000, last = S.reported[slot] || { ms: 0, at: -Infinity, n: 0 };
      const need = it.need_ms[slot] || 0, reaches = last.ms < need && ms >= need;
      if (ms - last.ms < 1 || last.n >= MAX_REPORTS) return;
      if (!reaches && (performance.now() - last.at < REPORT_EVERY_MS || (!force && ms - last.ms < 500))) return;
      S.reported[slot] = { ms, at: performance.now(), n: last.n + 1 };
      send(Object.assign({ type: 'play_event', slot, played_ms: ms, underruns: 0, stall_ms: 0 }, base));
    }
    function tick() {   // every 100 ms while the screen is shown
      if (S.playing) { accrue(); pos.value = S.duration ? sourcePos(S.active) / S.duration : 0; }
      for (let i = 0; i < n; i++) report(i, !S.playing || i !== S.active);   // remainders too
    }
    function markActive() {
      for (const b of root.querySelectorAll('.lt-play')) b.classList.toggle('lt-on', Number(b.dataset.slot) === S.active);
      if (refButton) refButton.classList.toggle('lt-on', S.active === -1);
    }
    function choose(slot) {
      if (!S.loaded) return;
      if (!S.playing) { S.active = slot; markActive(); start(); return; }
      if (slot === S.active) return;
      accrue(); report(S.active, true);
      const before = sourcePos(S.active), t = S.ctx.currentTime;
      for (const s of order) {           // only the gains move: the playhead stays
        const g = S.gains[s].gain, target = s === slot ? 1 : 0;
        g.cancelScheduledValues(t); g.setValueAtTime(g.value, t); g.linearRampToValueAtTime(target, t + RAMP_S);
      }
      const from = S.active; S.active = slot; S.since = t;
      const after = sourcePos(slot);
      S.log.push({ type: 'switch', at: t, from, to: slot, position_before: before, position_after: after });
      markActive();
    }
    playBtn.addEventListener('click', () => { if (S.playing) halt(); else start(); });
    stopBtn.addEventListener('click', () => { halt(); S.offset = segment()[0]; pos.value = 0; });
    loopBox.addEventListener('change', () => { if (S.playing) { halt(); start(); } });
    for (const inp of [fromIn, toIn]) inp.addEventListener('change', () => { if (S.playing) { halt(segment()[0]); start(); } });

    return {
      state: S, sliders, choose, start, pause: () => halt(), position: () => (S.playing ? sourcePos(S.active) : S.offset),
      setSegment(a, b) { fromIn.value = String(a); toIn.value = String(b); fromIn.dispatchEvent(new Event('change')); },
      allSet: () => S.values.every((v) => v !== null),
      scores: () => S.values.slice(),
      ready: () => S.values.every((v) => v !== null),
      answer: () => ({ scores: S.values.slice() }),
      destroy() { halt(); clearInterval(S.timer); S.destroyed = true; if (S.ctx) S.ctx.close(); if (refButton) refButton.onclick = null; },
    };
  }

  (window.LLKinds = window.LLKinds || {}).mushra = { render };
})();
