"""The listening-test analysis: the test kinds, the balanced design, rater screening, results.

Why a package: these modules are the pure logic of a test (no store, no web): the kinds
(:mod:`.kinds`: MOS, A/B, MUSHRA, glitch hunt), the design rows raters get (:mod:`.design`),
the headphone screens and the rater table (:mod:`.screening`), and one test's results on the
rows the store hands over (:mod:`.data`, :mod:`.results`). The rater flow, the stimuli and
the tables that store them live in ``app/listening/`` and ``app/store/listening/``.
"""
