"""Voices: a voice state and its official safetensors format (state), and a voice by name, file or
state, cloned from audio with the encoder it is given (sources). It imports the network, audio and
weights rooms below it: never text, generation or the model object."""

from __future__ import annotations
