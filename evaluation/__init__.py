"""Analysis only: takes and their glitch detector, the player's start rule, loudness, statistics,
listening-test designs, kinds and results, the report, the arena's board and the probe.
Nothing here opens a database or serves a page (that is ``app``)."""
