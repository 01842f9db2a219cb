"""Synthesis: a text and a voice to audio. Every option (options), the audio a session may make
(budget), a text planned into chunks, pauses and tokens (planning), a generation stepped frame by
frame (generation), frames decoded to audio at a speed with their words timed (decoding,
timestamps), and text arriving in pieces as one generation per segment (text_stream). It imports
every room below it, never the model object (model.py, above it, drives it)."""

from __future__ import annotations
