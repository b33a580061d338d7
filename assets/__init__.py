"""Data that ships with listenlab: example prompts, the Harvard sentences, the arena's prompts
and the bundled reference clip. A package (not only a folder) so that
``importlib.resources.files("assets")`` finds it wherever listenlab is installed."""
