"""Speech engines behind one contract (``backends.base``), resolved by spec string
(``backends.registry``); the one error tree (``backends.errors``) and audio I/O
(``backends.audio``) every layer shares.

Nothing is imported here: ``from backends.errors import ...`` must not load numpy (the command
line imports the error tree before it knows which command runs).
"""
