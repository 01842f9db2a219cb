"""Word-timestamp fixtures from `pocket-tts-timestamped` 1.4.0 (the fork of the official package that
times words from the flow LM's attention), on the parity fixtures' random weights.

For each model named (its parity fixture, made by scripts/make_reference.py, must exist under
OUT/NAME/), this writes OUT/NAME/words.json: the timestamp heads used (the fork's own for that
architecture's config), and for each case of CASES, run at temperature 0 with EOS off from the
fixture's exported voice state, what the fork makes of it: each prepared chunk's units and its
tokens' shares of them, every frame's scores, whether it was voiced and its start, the word
events, and the words of `generate_audio_with_timestamps`. It also writes OUT/timestamp_heads.json:
the fork's heads and pinned weights for every config it ships (the catalog takes the heads of the
configs whose weights the official package pins at the same revision).

    .venv-ref/bin/python -m scripts.make_word_reference --out build/reference english english_2m_2026-10

The fork installs beside the official package: `.venv-ref/bin/pip install pocket-tts-timestamped==1.4.0`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The fork's heads for each architecture of the parity fixtures (its config of the same architecture).
HEADS_FROM = {"english": "english_2026-01", "english_2m_2026-10": "english_2m_2026-10"}
# (text, max tokens per chunk, frames per chunk: None for the official length estimate). Curly
# quotes, a dash, hyphenated words, several chunks, short chunks (padded with spaces).
CASES = [
    ("Hello there, my good friend.", 50, 40),
    ("Hello there. This is a test, of the stream. And now a third sentence!", 12, None),
    (
        "\u201cDon\u2019t stop,\u201d she said \u2014 it\u2019s a well-known trick. My mother-in-law agrees; really?",
        12,
        None,
    ),
    ("Go. Stop now. Run very fast!", 4, None),
    ("The first sentence is short. The second one, which has a comma, is a bit longer; it goes on.", 12, None),
]


def fork_configs() -> dict:
    import yaml
    from pocket_tts_timestamped.utils.config import CONFIGS_DIR

    out = {}
    for path in sorted(Path(CONFIGS_DIR).glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text())
        out[path.stem] = {"weights_path": cfg.get("weights_path"), "timestamp_heads": cfg.get("timestamp_heads")}
    return out


def run(name: str, dest: Path, heads: list) -> dict:
    import torch
    import yaml
    from pocket_tts_timestamped import TTSModel
    from pocket_tts_timestamped.models import tts_model
    from pocket_tts_timestamped.timestamps import alignment, records

    cfg = yaml.safe_load((dest / "config.yaml").read_text())
    cfg["timestamp_heads"] = heads
    config = dest / "config_words.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cwd = os.getcwd()
    os.chdir(dest)  # the fork resolves relative paths against the working directory
    try:
        model = TTSModel.load_model(config=str(config), temp=0.0, eos_threshold=float("inf"))
    finally:
        os.chdir(cwd)
    model.max_decoder_frames_per_call = 1
    voice = model.get_state_for_audio_prompt(dest / "voice_state.safetensors")

    chunks: list = []
    frames: list = []
    iterate = tts_model._iter_timestamp_text_chunks
    process = alignment.WordAlignment.process_frame

    def recorded_chunks(*args, **kwargs):
        for chunk in iterate(*args, **kwargs):
            chunks.append(chunk)
            yield chunk

    def recorded_frame(self, scores, voiced, frame_start):
        frames.append({"chunk": len(chunks) - 1, "scores": scores.tolist(), "voiced": voiced, "start": frame_start})
        return process(self, scores, voiced, frame_start)

    tts_model._iter_timestamp_text_chunks = recorded_chunks
    alignment.WordAlignment.process_frame = recorded_frame
    estimate = model._estimate_max_gen_len
    cases = []
    try:
        for text, max_tokens, length in CASES:
            chunks.clear()
            frames.clear()
            model._estimate_max_gen_len = estimate if length is None else (lambda _tokens, n=length: n)
            events = list(model.generate_audio_with_timestamps_stream(voice, text, max_tokens=max_tokens))
            seen_chunks, seen_frames = list(chunks), list(frames)
            with torch.no_grad():
                words = model.generate_audio_with_timestamps(voice, text, max_tokens=max_tokens).words
            cases.append(
                {
                    "text": text,
                    "max_tokens": max_tokens,
                    "frames": length,
                    "chunks": [
                        {
                            "text": chunk.text,
                            "units": [
                                {
                                    "text": u.text,
                                    "begin": u.chunk_begin,
                                    "end": u.chunk_end,
                                    "word": None if u.word is None else [u.word.text, u.word.word_index],
                                    "synthetic": u.synthetic,
                                }
                                for u in chunk.units
                            ],
                            "token_to_unit": chunk.token_to_unit.tolist(),
                            "tokens": chunk.prepared_tokens[0].tolist(),
                        }
                        for chunk in seen_chunks
                    ],
                    "frames_seen": seen_frames,
                    "events": [event_json(e, records) for e in events if not isinstance(e, records.AudioChunk)],
                    "samples": sum(e.audio.shape[-1] for e in events if isinstance(e, records.AudioChunk)),
                    "words": [[w.word, w.word_index, w.start_time, w.end_time] for w in words],
                }
            )
            counts = f"{len(seen_chunks)} chunks, {len(seen_frames)} frames, {len(words)} words"
            print(f"    {counts}: {text[:40]!r}", file=sys.stderr)
    finally:
        tts_model._iter_timestamp_text_chunks = iterate
        alignment.WordAlignment.process_frame = process
    return {"model": name, "heads": heads, "cases": cases}


def event_json(event: object, records: object) -> dict:
    entry = {"word": event.word, "index": event.word_index, "start": event.start_time}
    if isinstance(event, records.WordStart):
        return dict(entry, kind="start")
    return dict(entry, kind="end", end=event.end_time)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder of the parity fixtures")
    parser.add_argument("names", nargs="+", help=", ".join(HEADS_FROM))
    args = parser.parse_args()
    torch.set_num_threads(1)
    configs = fork_configs()
    (args.out / "timestamp_heads.json").write_text(json.dumps(configs, indent=1) + "\n")
    for index, name in enumerate(args.names):
        start = time.monotonic()
        print(f"[{index + 1}/{len(args.names)}] {name}: pocket-tts-timestamped", file=sys.stderr)
        dest = (args.out / name).resolve()
        heads = configs[HEADS_FROM[name]]["timestamp_heads"]
        (dest / "words.json").write_text(json.dumps(run(name, dest, heads)) + "\n")
        print(f"    done in {time.monotonic() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
