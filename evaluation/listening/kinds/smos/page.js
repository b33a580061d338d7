// listenlab SMOS answer (window.LLKinds.smos): the reference voice and the voice to rate, each
// its Play button (both must be played: the server gates the vote on both), then the five
// similarity answers on one row (the labels come from the server: the kind's scale()).
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.smos = {
    render(ctx) {
      ctx.playButtons();
      ctx.vote.className = 'lt-mos lt-smos';
      const chosen = ctx.choiceButtons(ctx.scale.labels || [], (b, v, label) => b.append(ctx.el('b', v), ctx.el('small', label)));
      return { ready: () => chosen() !== null, answer: () => ({ score: chosen() }) };
    },
  };
})();
