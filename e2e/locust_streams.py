"""A Locust user that asks the server for one stream and listens to it to its end, as a player would:
the capacity run of a load tool that is not ours (scripts/capacity_locust.py runs it in Locust's own
environment, so it imports nothing of ours).

    locust -f e2e/locust_streams.py --headless --users 10 --spawn-rate 1000 --json \\
        --host http://127.0.0.1:8000 --frames 75 --text "Many streams at once."

Each stream is a POST /stream of `--frames` frames (EOS off, temperature 0), read with Locust's own
HTTP client (requests, on gevent) as its pieces arrive. Beside Locust's row for the request (its
time to the response's headers), each stream reports two rows of its own through Locust's request
event, so that Locust's statistics (median, percentiles, max) are taken over them: "first byte",
the time from sending the request to its first piece of audio (ms), and "real-time factor x1000",
the time from the first piece to the last over the duration of the audio after the first piece,
times 1000 (Locust's statistics are of integral milliseconds).
"""

from __future__ import annotations

import time

import gevent
from locust import HttpUser, constant, events, task
from locust.exception import StopUser


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    parser.add_argument("--frames", type=int, default=75, help="frames each stream asks for")
    parser.add_argument("--text", default="Many streams at once.", help="the text (each stream adds its number)")


class Listener(HttpUser):
    """One stream, then it stops; the last to stop ends the run."""

    wait_time = constant(0)
    streams = 0
    done = 0

    @task
    def stream(self) -> None:
        try:
            self._listen()
        finally:
            Listener.done += 1
            if Listener.done == self.environment.parsed_options.num_users:
                gevent.spawn_later(0.1, self.environment.runner.quit)  # once this user has stopped
            raise StopUser()

    def _listen(self) -> None:
        Listener.streams += 1
        options = self.environment.parsed_options
        body = {
            "text": f"{options.text} Stream {Listener.streams}.",
            "temperature": 0.0,
            "max_frames": options.frames,
            "eos_threshold": 100.0,
        }
        start = time.perf_counter()
        first = last = None
        first_size = received = 0
        with self.client.post("/stream", json=body, stream=True, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
                return
            rate = int(response.headers["x-sample-rate"])
            for piece in response.iter_content(chunk_size=None):
                now = time.perf_counter()
                if first is None:
                    first, first_size = now, len(piece)
                last = now
                received += len(piece)
            response.success()
        if first is None:
            return
        after_first = (received - first_size) / 2 / rate  # seconds of 16-bit mono audio after the first piece
        self._report("first byte", (first - start) * 1e3)
        if after_first > 0:
            self._report("real-time factor x1000", (last - first) / after_first * 1e3)

    def _report(self, name: str, value: float) -> None:
        self.environment.events.request.fire(
            request_type="STREAM", name=name, response_time=value, response_length=0, exception=None, context={}
        )
