// listenlab glitch hunt (window.LLKinds.glitch): one Play button; while the clip plays, G (or
// the Glitch button) sends a mark at the position heard now, stored at once by the server
// (listen_glitch); "Done, next clip" closes the item (the answer carries nothing: the marks
// are the answer).
(function () {
  'use strict';
  const kinds = (window.LLKinds = window.LLKinds || {});
  kinds.glitch = {
    render(ctx) {
      ctx.playButtons();
      const hint = ctx.el('p', null, 'lt-hint'); hint.id = 'lt-hint';
      const kbd = ctx.el('kbd', 'G');
      const button = ctx.el('button', 'Glitch (G)'); button.type = 'button'; button.id = 'lt-glitch';
      const count = ctx.el('span'); count.id = 'lt-marks';
      hint.append('Press ', kbd, ' (or the button) whenever you hear a glitch. ', button, ' ', count);
      ctx.slots.append(hint);
      const view = { marks: 0, submitLabel: 'Done, next clip' };
      function mark() {
        const playing = ctx.playing();
        if (!playing) return;
        const pos = ctx.player.positionMs(); if (pos == null) return;
        ctx.player.send({ type: 'listen_glitch', test_id: ctx.testId, rater_token: ctx.token, assignment_id: playing.aid,
          slot: playing.slot, position_ms: pos, kind: null, report_id: ctx.randId() });
      }
      function onKey(e) {
        if ((e.key === 'g' || e.key === 'G') && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); mark(); }
      }
      button.addEventListener('click', mark);
      document.addEventListener('keydown', onKey);
      return Object.assign(view, {
        ready: () => true,
        answer: () => ({}),
        onMessage(m) {
          if (m.type !== 'listen_glitch_saved') return;
          view.marks += 1;
          count.textContent = view.marks + ' glitch mark' + (view.marks === 1 ? '' : 's') + ' saved';
        },
        destroy() { document.removeEventListener('keydown', onKey); },
      });
    },
  };
})();
