// listenlab MOS answer (window.LLKinds.mos): one Play button, the five ACR answers on one row,
// each its number above its word (the labels come from the server: the kind's scale()).
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.mos = {
    render(ctx) {
      ctx.playButtons();
      ctx.vote.className = 'lt-mos';
      const chosen = ctx.choiceButtons(ctx.scale.labels || [], (b, v, label) => b.append(ctx.el('b', v), ctx.el('small', label)));
      return { ready: () => chosen() !== null, answer: () => ({ score: chosen() }) };
    },
  };
})();
