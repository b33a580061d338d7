"""The listening-test domain: test design, stimuli, rater screening, results and the arena.

Why a package: ``evaluation/`` holds four things (the store, the glitch detector, the
listening-test domain and the probe); this one grew past a handful of modules, so it lives on
its own. ``tables`` is the listening-test part of the SQLite store (:class:`TestStore`).
"""
