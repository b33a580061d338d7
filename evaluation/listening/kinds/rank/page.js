// listenlab ranking screen (window.LLKinds.rank): one row per clip (A, B, C, …) with its Play
// button, a place picker (1 = best .. N = worst) and up/down buttons; picking a place another
// clip holds swaps the two, so the places stay a ranking without ties. Below, the order so
// far. The vote is { ranks: [place of clip A, place of clip B, …] }; the server checks it is
// a permutation of 1..N and that every clip was played (the page only mirrors that gate).
(function () {
  'use strict';
  const CSS = [
    '.lt-rank .lt-slot { flex-wrap: wrap; gap: .3rem .6rem; padding: .25rem 0; border-bottom: 1px solid #eef0f3; }',
    '.lt-rank-pick { font-size: 1rem; min-height: 2.4rem; min-width: 7.5rem; }',
    '.lt-rank-move { min-width: 2.4rem; min-height: 2.4rem; margin: 0; }',
    '.lt-rank-order { margin: .6rem 0; padding-left: 1.6rem; }',
    '.lt-rank-order li { margin: .1rem 0; }',
    '.lt-rank-ends { color: #555; margin: .2rem 0 .4rem; }',
    '@media (max-width: 600px) { .lt-rank .lt-slot .lt-play { flex: 1 1 auto; } .lt-rank-pick { flex: 1 1 8rem; } }',
  ].join('\n');

  function style() {
    if (document.getElementById('lt-rank-style')) return;
    const s = document.createElement('style'); s.id = 'lt-rank-style'; s.textContent = CSS;
    document.head.append(s);
  }

  function render(ctx) {
    style();
    const it = ctx.item, n = it.slots, el = ctx.el;
    const ends = ctx.scale.ends || {};
    const places = Array(n).fill(null);   // places[i]: the place of clip i (1..n) or null
    ctx.slots.classList.add('lt-rank');
    const note = el('p', (ends.best || '1 = best') + ', ' + String(ends.worst || '{n} = worst').replace('{n}', String(n)), 'lt-rank-ends');
    note.id = 'lt-rank-ends';
    ctx.slots.append(note);
    ctx.playButtons();
    const rows = [...ctx.slots.querySelectorAll('.lt-slot')];
    const picks = [], ups = [], downs = [];
    const order = el('ol', null, 'lt-rank-order'); order.id = 'lt-rank-order';

    function place(i, p) {   // give clip i place p (null: none); the clip holding p gets i's old place
      const old = places[i];
      const j = p == null ? -1 : places.indexOf(p);
      if (j >= 0 && j !== i) places[j] = old;
      places[i] = p;
      draw(); ctx.changed();
    }
    function move(i, step) {
      if (places[i] == null) return;
      const p = places[i] + step;
      if (p >= 1 && p <= n) place(i, p);
    }
    function draw() {
      for (let i = 0; i < n; i++) {
        picks[i].value = places[i] == null ? '' : String(places[i]);
        picks[i].setAttribute('aria-label', 'Place of clip ' + it.labels[i] + (places[i] == null ? ' (not placed yet)' : ''));
        ups[i].disabled = places[i] == null || places[i] === 1;
        downs[i].disabled = places[i] == null || places[i] === n;
        rows[i].dataset.place = places[i] == null ? '' : String(places[i]);
      }
      order.replaceChildren();
      for (let p = 1; p <= n; p++) {
        const i = places.indexOf(p);
        const li = el('li', i >= 0 ? 'Clip ' + it.labels[i] : '–'); li.dataset.slot = i >= 0 ? String(i) : '';
        order.append(li);
      }
    }
    rows.forEach((row, i) => {
      const pick = el('select', null, 'lt-rank-pick'); pick.dataset.slot = String(i);
      pick.append(new Option('Place…', ''));
      for (let p = 1; p <= n; p++) pick.append(new Option(p === 1 ? '1 (best)' : p === n ? p + ' (worst)' : String(p), String(p)));
      pick.addEventListener('change', () => place(i, pick.value === '' ? null : Number(pick.value)));
      const up = el('button', '▲', 'lt-rank-move'); up.type = 'button'; up.dataset.slot = String(i); up.dataset.move = 'up';
      up.setAttribute('aria-label', 'Move clip ' + it.labels[i] + ' up (better)');
      up.addEventListener('click', () => move(i, -1));
      const down = el('button', '▼', 'lt-rank-move'); down.type = 'button'; down.dataset.slot = String(i); down.dataset.move = 'down';
      down.setAttribute('aria-label', 'Move clip ' + it.labels[i] + ' down (worse)');
      down.addEventListener('click', () => move(i, 1));
      row.insertBefore(pick, row.querySelector('.lt-played'));
      row.insertBefore(up, row.querySelector('.lt-played'));
      row.insertBefore(down, row.querySelector('.lt-played'));
      picks.push(pick); ups.push(up); downs.push(down);
    });
    ctx.slots.append(el('p', 'Your order, best first:', 'lt-question'), order);
    draw();
    return {
      places, place, move,
      ready: () => places.every((p) => p != null),
      answer: () => ({ ranks: places.slice() }),
      destroy() { ctx.slots.classList.remove('lt-rank'); },
    };
  }

  (window.LLKinds = window.LLKinds || {}).rank = { render };
})();
