"""Text, before it meets the model: normalization (numbers, dates, units as words), preparation and
chunking as the official package does it (prepare), text arriving in pieces cut into segments
(segmenter), SSML, the tokenizers (tokenizer/), and a text's words (words). It imports the portable
model's errors and config only: never the network, voices or the generation that reads it."""

from __future__ import annotations
