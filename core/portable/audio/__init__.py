"""Audio as samples, with NumPy alone: WAV in and out, resampling and the voice-prompt cleanup (pcm),
and speed changes that keep the pitch (tsm). It imports the portable model's errors only."""

from __future__ import annotations
