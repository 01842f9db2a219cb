"""The server as a Ray Serve application: replicas of the same Litestar app across a Ray cluster.

    python -m server.cluster --model english_2m_2026-10 --replicas 2        # start (or join) a cluster, serve
    python -m server.cluster --address auto --min-replicas 1 --max-replicas 8 --cpus-per-replica 2
    serve run server/serve.yaml             # Ray's own command line, with the same (commented) config file
    serve deploy server/serve.yaml          # onto a running cluster, in the background

Each replica loads the model once and serves every route of `python -m server`, unchanged (/health
says which replica answered). Uploaded recordings are also kept by one small `Recordings` deployment,
so a voice uploaded through one replica can be used through any (the others clone it on first
use). Serve sends a replica at most `max_concurrent` requests at once and holds the rest in a
bounded queue (a 503 past it); a replica that is full anyway answers 503 itself.
Serve checks every replica's health (its scheduler's threads) and replaces one that fails or dies;
with autoscaling, the replica count follows the requests in flight.

The command line reads the config file (default: serve.yaml beside this module), applies its own
options on top, and hands the result to `serve run`; `--print-config` shows that result instead (a
file for `serve deploy`). Every node of the cluster needs this package installed with its
`server` and `cluster` extras.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from ray import serve

from core.portable.voice_registry import SizedCache
from server import health
from server.app import create_app
from server.engine import load_engine
from server.settings import Settings, SettingsError

CONFIG = Path(__file__).with_name("serve.yaml")
DEPLOYMENT = "PocketTTS"
# The settings a replica takes (server/settings.py), by name, as config files give them (`args`;
# allow_hosts: a list, to which the command line adds http_options.host and --allow-host): all but
# where to listen and Wyoming's, which are Serve's proxy's and python -m server's.
REPLICA = tuple(
    f.name for f in dataclasses.fields(Settings) if f.name not in ("host", "port", "wyoming", "no_http", "zeroconf")
)
# The settings of the command line here, beside its own options.
FLAGS = ("model", "voice", "max_concurrent", "allow_hosts", "api_key")
# The settings that may name a file here, made absolute for the replicas (never the key: a secret
# that happens to be a file's name stays the secret).
PATHS = ("model", "voice", "site", "voices_dir")
# The recordings kept for the replicas, at most (the least recently used go first); an upload is at
# most server.routes.MAX_UPLOAD (20 MB), a typical 5-10 s recording well under 1 MB.
RECORDINGS_BYTES = 256 * 1024 * 1024


@serve.deployment(name="Recordings", num_replicas=1, ray_actor_options={"num_cpus": 0})
class Recordings:
    """Uploaded recordings by voice id, for every replica (one instance: if it restarts, the ids
    uploaded before are gone, and a client uploads again, as after a server restart)."""

    def __init__(self) -> None:
        self._data = SizedCache(RECORDINGS_BYTES)

    def put(self, key: str, data: bytes) -> None:
        self._data.put(key, data, len(data))

    def get(self, key: str) -> Optional[bytes]:
        return self._data.get(key)


class SharedRecordings:
    """The engine's `recordings` (server.engine.Recordings) over the Recordings deployment. Blocking
    calls: the engine makes them on worker threads, never on the event loop."""

    def __init__(self, handle: Any):
        self.handle = handle

    def get(self, key: str) -> Optional[bytes]:
        return self.handle.get.remote(key).result()

    def __setitem__(self, key: str, data: bytes) -> None:
        self.handle.put.remote(key, data).result()


@serve.deployment(name=DEPLOYMENT)
@serve.ingress()
class PocketTTS:
    """One replica: a model, its engine, and the app over them."""

    def __init__(self, settings: Settings, recordings: Any):
        self.engine = load_engine(settings, SharedRecordings(recordings))
        self.settings = settings

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.engine, self.settings)

    def check_health(self) -> None:
        if not health.alive(self.engine):
            raise RuntimeError("the scheduler's threads have stopped")

    def __del__(self) -> None:
        self.engine.close()


def app(args: Dict[str, Any]) -> serve.Application:
    """The application builder that config files name (`import_path: server.cluster:app`); `args`:
    any of the REPLICA settings, the others taking their defaults. Serve sends a replica no more
    requests than it runs at once."""
    unknown = sorted(set(args) - set(REPLICA))
    if unknown:
        raise SettingsError(f"unknown application argument {unknown[0]!r} ({', '.join(REPLICA)})")
    settings = Settings().updated(args, "the application's arguments")
    deployment = PocketTTS.options(max_ongoing_requests=settings.max_concurrent)
    return deployment.bind(settings, Recordings.bind())


def configure(config: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    """The config file with the command line's options applied (a new dict)."""
    config = yaml.safe_load(yaml.safe_dump(config))
    application = config["applications"][0]
    arguments = application.setdefault("args", {})
    given = {name: getattr(args, name) for name in FLAGS if name != "allow_hosts" and hasattr(args, name)}
    for name, value in given.items():
        if name in PATHS and isinstance(value, str) and Path(value).exists():
            value = str(Path(value).resolve())  # replicas do not run in this folder
        arguments[name] = value
    deployments = application.setdefault("deployments", [])
    deployment = next((d for d in deployments if d.get("name") == DEPLOYMENT), None)
    if deployment is None:
        deployment = {"name": DEPLOYMENT}
        deployments.append(deployment)
    if args.replicas is not None:
        deployment.pop("autoscaling_config", None)
        deployment["num_replicas"] = args.replicas
    if args.min_replicas is not None or args.max_replicas is not None:
        deployment.pop("num_replicas", None)
        scaling = deployment.setdefault("autoscaling_config", {})
        for key, value in (("min_replicas", args.min_replicas), ("max_replicas", args.max_replicas)):
            if value is not None:
                scaling[key] = value
    if args.cpus_per_replica is not None:
        deployment.setdefault("ray_actor_options", {})["num_cpus"] = args.cpus_per_replica
    http = config.setdefault("http_options", {})
    for key in ("host", "port"):
        if getattr(args, key) is not None:
            http[key] = getattr(args, key)
    hosts = [str(host) for host in arguments.get("allow_hosts") or []]
    extra = list(getattr(args, "allow_hosts", []))
    arguments["allow_hosts"] = list(dict.fromkeys(hosts + [str(http.get("host", "127.0.0.1"))] + extra))
    return config


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="Serve config file (default: %(default)s)")
    parser.add_argument("--address", help="Ray cluster to join (auto, or host:port; default: a new local one)")
    Settings.add_arguments(parser, FLAGS)
    parser.add_argument("--replicas", type=int, help="a fixed number of replicas")
    parser.add_argument("--min-replicas", type=int, help="autoscaling: the fewest replicas")
    parser.add_argument("--max-replicas", type=int, help="autoscaling: the most replicas")
    parser.add_argument("--cpus-per-replica", type=float, help="CPUs Ray reserves for each replica")
    parser.add_argument("--host", help="where Serve's HTTP proxy listens")
    parser.add_argument("--port", type=int, help="the proxy's port")
    parser.add_argument("--print-config", action="store_true", help="print the resulting config and exit")
    args = parser.parse_args(argv)
    for name in ("replicas", "min_replicas", "max_replicas"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:  # the environment's settings (POCKET_TTS_API_KEY, ...), then the flags: checked now, not on a replica
        environment = Settings.from_environment()
        for name in FLAGS:
            if not hasattr(args, name) and getattr(environment, name) != getattr(Settings(), name):
                setattr(args, name, getattr(environment, name))
        environment.updated({name: getattr(args, name) for name in FLAGS if hasattr(args, name)}, "the command line")
    except SettingsError as e:
        parser.error(str(e))
    try:
        config = configure(yaml.safe_load(args.config.read_text()), args)
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, AttributeError) as e:
        print(f"error: cannot use the config file {args.config}: {e}", file=sys.stderr)
        return 1
    text = yaml.safe_dump(config, sort_keys=False)
    if args.print_config:
        print(text, end="")
        return 0
    import click
    from ray.serve.scripts import cli

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="pocket-tts-serve-") as file:
        file.write(text)
        file.flush()
        command = ["run", file.name] + (["--address", args.address] if args.address else [])
        try:
            cli.main(args=command, prog_name="serve", standalone_mode=False)
        except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C: `serve run` has shut the app down
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
