"""The engine's health: what GET /health reports (its model, its load, its kernels, which process
answered), and whether it can still generate (a Ray Serve replica's health check, server/cluster.py)."""

from __future__ import annotations

import secrets

import core
from core.portable.synthesis.options import MAX_TEXT
from core.portable.weights import catalog
from server.engine import ServerEngine
from server.schemas import Health, ServedModel

# Which process answered (behind a load balancer), without naming the machine or the process.
INSTANCE = secrets.token_hex(4)


def report(engine: ServerEngine) -> Health:
    return Health(
        status="ok",
        model=engine.hosted.name,
        sample_rate=engine.hosted.sample_rate,
        default_voice=engine.voices.default_name,
        active_generations=engine.active,
        max_concurrent=engine.generations.max_concurrent,
        kernels=core.backend(),
        instance=INSTANCE,
        word_timestamps=engine.hosted.word_timestamps,
        timed_models=catalog.timed_models(),
        max_text=MAX_TEXT,
        models=[ServedModel(*listed) for listed in engine.models.listed()],
    )


def alive(engine: ServerEngine) -> bool:
    """Whether the engine can still generate: not shutting down, the scheduler's threads running."""
    return not engine.shutting_down and engine.generations.running
