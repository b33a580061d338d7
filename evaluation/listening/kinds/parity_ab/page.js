// listenlab parity answer (window.LLKinds.parity_ab): Play A and Play B, then the CMOS scale -3..+3
// (B against A). One side is the reference, the other the candidate; the page never says which.
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.parity_ab = {
    render(ctx) {
      ctx.playButtons();
      ctx.vote.className = 'lt-cmos';
      const chosen = ctx.choiceButtons(ctx.scale.labels || [], (b, v, label) => {
        b.textContent = (v > 0 ? '+' : '') + v + ' ' + label;
      });
      return {
        ready: () => chosen() !== null,
        answer: () => ({ cmos: chosen() }),
      };
    },
  };
})();
