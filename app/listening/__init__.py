"""Listening tests and the open arena: rater-facing pages on the one player."""
