"""Takes, the SQLite store, glitch detection, statistics, listening tests and probes."""
