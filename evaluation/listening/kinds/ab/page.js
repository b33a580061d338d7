// listenlab A/B answer (window.LLKinds.ab): Play A and Play B, then the CMOS scale -3..+3
// (B against A) or, in the forced mode, "A is better" / "B is better".
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.ab = {
    render(ctx) {
      ctx.playButtons();
      const forced = ctx.test.ab_mode === 'forced';
      ctx.vote.className = forced ? '' : 'lt-cmos';
      const chosen = ctx.choiceButtons(ctx.scale.labels || [], (b, v, label) => {
        b.textContent = forced ? label : (v > 0 ? '+' : '') + v + ' ' + label;
      });
      return {
        ready: () => chosen() !== null,
        answer: () => (forced ? { choice: chosen() } : { cmos: chosen() }),
      };
    },
  };
})();
