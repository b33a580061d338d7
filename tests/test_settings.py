"""Settings read once, in app/config.py: the arena's ``LISTENLAB_ARENA_*`` knobs and
``listenlab serve``'s address, read from a given mapping (never the process environment behind
the test's back), and what the commands and the arena do with them."""

from __future__ import annotations

import argparse

import pytest

from app.arena.battles import Limits
from app.arena.service import ArenaConfig
from app.cli.options import add_host_args, hosts_from_args
from app.config import ENV, arena_settings, env_default, serve_settings
from backends.errors import InvalidRequest


def test_arena_defaults_are_the_documented_ones():
    """The ENV table (and so docs/deploy.md) and the arena's own defaults say the same."""
    s = arena_settings({})
    assert (s.battles_per_minute, s.global_battles_per_minute) == (10, 120)
    assert (s.votes_per_hour, s.votes_per_day, s.min_votes) == (30, 150, 20)
    assert ArenaConfig.of(s) == ArenaConfig()
    assert ArenaConfig.of(s).limits == Limits()
    assert env_default("LISTENLAB_ARENA_MIN_VOTES") == "20"


def test_arena_settings_from_the_environment():
    env = {
        "LISTENLAB_ARENA_BATTLES_PER_MIN": "3",
        "LISTENLAB_ARENA_GLOBAL_PER_MIN": "0",  # at least 1: a rate of 0 would lock everyone out
        "LISTENLAB_ARENA_VOTES_PER_HOUR": "-5",
        "LISTENLAB_ARENA_VOTES_PER_DAY": "lots",  # not a number: the default
        "LISTENLAB_ARENA_MIN_VOTES": "0",  # rank from the first vote
    }
    s = arena_settings(env)
    assert (s.battles_per_minute, s.global_battles_per_minute) == (3, 1)
    assert (s.votes_per_hour, s.votes_per_day, s.min_votes) == (1, 150, 0)
    cfg = ArenaConfig.of(s)
    assert cfg.limits.battles_per_minute == 3 and cfg.limits.global_battles_per_minute == 1
    assert cfg.limits.max_chars == Limits().max_chars and cfg.min_votes == 0


def test_the_arena_reads_its_settings_when_installed(monkeypatch, tmp_path):
    """``install`` reads the environment once (through app.config); given settings win."""
    from fastapi import FastAPI

    from app.arena import install
    from app.config import ArenaSettings
    from app.server import create_app

    monkeypatch.setenv("LISTENLAB_ARENA_MIN_VOTES", "7")
    monkeypatch.setenv("LISTENLAB_ARENA_BATTLES_PER_MIN", "4")
    app = create_app({"p": "piper"}, tmp_path / "ll.db", mount_ui=False, warm=False)
    svc = app.state.arena
    assert svc.config.min_votes == 7 and svc.arena.limits.battles_per_minute == 4
    monkeypatch.setenv("LISTENLAB_ARENA_MIN_VOTES", "9")  # read once: a later change is not seen
    assert svc.min_votes() == 7

    other = FastAPI()
    given = ArenaSettings(2, 50, 5, 6, 1)
    svc2 = install(other, app.state.listenlab, mount_ui=False, settings=given)
    assert svc2.config.min_votes == 1 and svc2.arena.limits.votes_per_day == 6
    assert svc2.config.limits.global_battles_per_minute == 50
    app.state.listenlab.store.close()


def test_serve_settings():
    s = serve_settings({})
    assert (s.host, s.port, s.space_host, s.allowed_origins) == ("127.0.0.1", 7860, None, ())
    s = serve_settings(
        {
            "GRADIO_SERVER_NAME": "0.0.0.0",
            "GRADIO_SERVER_PORT": "7861",
            "SPACE_HOST": "me-lab.hf.space",
            "LISTENLAB_ALLOWED_ORIGINS": " https://a.example , ,https://b.example",
        }
    )
    assert (s.host, s.port, s.space_host) == ("0.0.0.0", 7861, "me-lab.hf.space")
    assert s.allowed_origins == ("https://a.example", "https://b.example")
    with pytest.raises(InvalidRequest, match="GRADIO_SERVER_PORT must be a port number, not 'x'"):
        serve_settings({"GRADIO_SERVER_PORT": "x"})
    documented = {v.name: v.default for v in ENV}
    assert documented["GRADIO_SERVER_NAME"] == "127.0.0.1"
    assert documented["GRADIO_SERVER_PORT"] == "7860"


def args_of(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_host_args(p)
    return p.parse_args(list(argv))


def test_hosts_and_origins_take_the_given_settings(capsys):
    env = serve_settings({"LISTENLAB_ALLOWED_ORIGINS": "https://env.example"})
    hosts, origins = hosts_from_args(args_of(), "0.0.0.0", env)
    assert origins is None  # none given: the app's default (the environment's list) applies
    assert "bound to all interfaces" in capsys.readouterr().out
    hosts, origins = hosts_from_args(
        args_of("--allowed-origins", "https://flag.example"), "127.0.0.1", env
    )
    assert origins == ["https://flag.example", "https://env.example"]
    on_space = serve_settings({"SPACE_HOST": "me-lab.hf.space"})
    hosts_from_args(args_of(), "0.0.0.0", on_space)
    assert "bound to all interfaces" not in capsys.readouterr().out
