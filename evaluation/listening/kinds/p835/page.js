// listenlab P.835 answer (window.LLKinds.p835): one Play button, then P.835's three questions
// in its order (SIG, then BAK, then OVRL), each with its own five answers (the server's: the
// kind's scale().scales). A scale opens once the one before it is answered; an answer can be
// changed until the vote is sent.
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.p835 = {
    render(ctx) {
      ctx.playButtons();
      ctx.vote.className = 'lt-p835';
      const scales = ctx.scale.scales || [];
      const chosen = {};
      const groups = [];
      scales.forEach((s, i) => {
        const box = ctx.el('fieldset', null, 'lt-p835-scale');
        box.dataset.scale = s.key;
        const legend = ctx.el('legend');
        legend.append(ctx.el('b', (i + 1) + '. ' + s.name + ' (' + s.title + ')'), ctx.el('span', ' ' + s.question));
        box.style.cssText = 'border: 1px solid #bbb; margin: .4rem 0; padding: .3rem; min-width: 0;';
        const row = ctx.el('div', null, 'lt-p835-row');   // the MOS row's layout (listen.css keys it on #lt-vote)
        row.style.cssText = 'display: grid; grid-template-columns: repeat(5, 1fr); gap: .3rem;';
        for (const [v, label] of s.labels) {
          const b = ctx.el('button', null, 'lt-choice');
          b.type = 'button'; b.dataset.scale = s.key; b.dataset.value = String(v);
          b.style.cssText = 'margin: 0; padding: .5rem .1rem; display: flex; flex-direction: column; align-items: center; min-width: 0; overflow-wrap: anywhere;';
          b.append(ctx.el('b', v), ctx.el('small', label));
          b.addEventListener('click', () => {
            chosen[s.key] = v;
            for (const x of row.children) x.classList.toggle('lt-on', x === b);
            openUpTo(); ctx.changed();
          });
          row.append(b);
        }
        box.append(legend, row);
        ctx.vote.append(box);
        groups.push(box);
      });
      function openUpTo() {   // the standard order: a scale opens when the ones before it are answered
        let open = true;
        groups.forEach((box, i) => {
          box.disabled = !open;
          box.classList.toggle('lt-closed', !open);
          if (chosen[scales[i].key] == null) open = false;
        });
      }
      openUpTo();
      const all = () => scales.length > 0 && scales.every((s) => chosen[s.key] != null);
      return {
        ready: all,
        answer: () => Object.fromEntries(scales.map((s) => [s.key, chosen[s.key]])),
      };
    },
  };
})();
