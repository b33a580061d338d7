"""The testing room: what tests and benchmarks share (servers, Chromium, scripted raters,
fault backends, simulated listening tests). Never imported by the runtime packages."""
