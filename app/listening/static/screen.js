// listenlab rater page: the headphone screen, the familiarisation page and the screen-out page.
// The server keeps every answer key: the page gets "trial n of N" and each trial's audio (a WAV
// it fetches with the rater token), plays it, and sends the pick. A pick counts only once the
// server sent the trial's audio at least its duration ago, so the buttons wait for the end too.
// Every text from the server is put on the page with textContent.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  // the texts come from the server with the status (app/listening/texts.py)
  const txt = (st) => (st && st.test && st.test.texts) || {};
  const fill = (tpl, hp) => String(tpl || '').replace('{correct}', String(hp.correct)).replace('{trials}', String(hp.trials));

  // ctx: {api(path, body), base, token(), player, show(id), refresh(), status(text, err), root}
  function create(ctx) {
    let playing = false;

    async function fetchAudio(path) {
      const r = await fetch(ctx.base + path, { headers: { 'X-Rater-Token': ctx.token() } });
      if (!r.ok) {
        let m = 'HTTP ' + r.status; try { m = (await r.json()).detail || m; } catch (e) { /* not JSON */ }
        throw new Error(m);
      }
      return r.arrayBuffer();
    }

    // decode through the player's AudioContext and play once; resolves when it ended
    async function playWav(path) {
      const ac = ctx.player.prepare(); ctx.player.resume();
      const buf = await ac.decodeAudioData(await fetchAudio(path));
      return new Promise((resolve) => {
        const s = ac.createBufferSource(); s.buffer = buf; s.connect(ac.destination);
        s.onended = () => resolve(buf.duration);
        s.start();
      });
    }

    // ------------------------------------------------------------ headphone screen
    function renderScreen(st) {
      ctx.show('lt-headphones');
      const sc = st.screen, t = txt(st).screen || {};
      $('lt-hp-intro').textContent = t.intro || '';
      $('lt-hp-question').textContent = (t.questions || {})[sc.kind] || '';
      $('lt-hp-n').textContent = String(sc.answered + 1);
      $('lt-hp-of').textContent = String(sc.trials);
      $('lt-hp-play').disabled = playing;
      $('lt-hp-play').textContent = sc.kind === 'huggins' ? 'Play the three noises' : 'Play the three tones';
      for (const b of document.querySelectorAll('.lt-hp-answer')) b.disabled = true;
      ctx.root.dataset.screenTrial = String(sc.next);
    }

    $('lt-hp-play').addEventListener('click', async () => {
      const st = ctx.current(); if (!st || !st.screen || playing) return;
      playing = true; $('lt-hp-play').disabled = true; ctx.status('');
      try {
        await playWav('screen/' + st.screen.next);
        for (const b of document.querySelectorAll('.lt-hp-answer')) b.disabled = false;
        ctx.root.dataset.screenPlayed = String(st.screen.next);
      } catch (e) { ctx.status(e.message, true); }
      playing = false; $('lt-hp-play').disabled = false;
    });

    for (const b of document.querySelectorAll('.lt-hp-answer')) {
      b.addEventListener('click', async () => {
        const st = ctx.current(); if (!st || !st.screen) return;
        for (const x of document.querySelectorAll('.lt-hp-answer')) x.disabled = true;
        let r = null;
        try { r = await ctx.api('screen/' + st.screen.next, { answer: Number(b.dataset.answer) }); }
        catch (e) { ctx.status(e.message, true); }
        if (r && r.done && r.passed) {   // the outcome, once: the screen is over
          const o = $('lt-hp-outcome'); o.textContent = fill((txt(st).screen || {}).passed, r); o.hidden = false;
        }
        await ctx.refresh();
      });
    }

    $('lt-level').addEventListener('click', () => {
      // a steady diotic 200 Hz tone to set the volume (carries nothing of any trial)
      const ac = ctx.player.prepare(); ctx.player.resume();
      const sr = ac.sampleRate, n = Math.round(sr * 1.5), b = ac.createBuffer(2, n, sr);
      for (let c = 0; c < 2; c++) {
        const x = b.getChannelData(c);
        for (let i = 0; i < n; i++) x[i] = 0.5 * Math.min(1, i / (0.02 * sr), (n - i) / (0.02 * sr)) * Math.sin(2 * Math.PI * 200 * i / sr);
      }
      const s = ac.createBufferSource(); s.buffer = b; s.connect(ac.destination); s.start();
    });

    // ------------------------------------------------------------ familiarisation
    let heard = new Set();
    function renderFamiliar(st) {
      ctx.show('lt-familiar');
      $('lt-fam-intro').textContent = txt(st).familiar_intro || '';
      const box = $('lt-fam-clips'); box.replaceChildren(); heard = new Set();
      st.familiar.clips.forEach((label, k) => {
        const b = document.createElement('button');
        b.type = 'button'; b.className = 'lt-fam-play'; b.dataset.clip = String(k); b.textContent = label;
        b.addEventListener('click', async () => {
          b.disabled = true; ctx.status('');
          try { await playWav('familiar/' + k); heard.add(k); b.classList.add('lt-heard'); }
          catch (e) { ctx.status(e.message, true); }
          b.disabled = false;
          $('lt-fam-continue').disabled = heard.size < st.familiar.clips.length;
        });
        box.append(b);
      });
      $('lt-fam-continue').disabled = true;
    }
    $('lt-fam-continue').addEventListener('click', async () => {
      $('lt-fam-continue').disabled = true;
      try { await ctx.api('familiar', {}); await ctx.refresh(); }
      catch (e) { ctx.status(e.message, true); $('lt-fam-continue').disabled = false; }
    });

    // ------------------------------------------------------------ screen-out
    function renderScreenout(st) {
      ctx.show('lt-screenout');
      const hp = st.headphone, t = txt(st).screen;
      if (hp && t) $('lt-so-text').textContent = fill(t.failed, hp);
      $('lt-so-code').textContent = st.screenout_code || '';
      const url = st.redirect_url;
      if (url && /^https:\/\//.test(url)) {
        $('lt-so-redirect').hidden = false;
        setTimeout(() => { location.href = url; }, 3000);
      }
    }

    return { renderScreen, renderFamiliar, renderScreenout };
  }

  window.LLScreen = { create };
})();
