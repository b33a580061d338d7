"""The browser player's stream: the same-origin ``/ll/ws`` session that feeds Web Audio raw
PCM, and the blind view of it that the arena and the listening tests use.

Why a room of its own: the Playground, the arena and the rater page all play through this one
player, so its wire and its blinding are written once.
"""
