"""`hf://owner/repo/path@revision` files, downloaded and cached with huggingface_hub (CPython only).

The model math never touches the network: this module is the one place that fetches files, and it
imports huggingface_hub only when a download is asked for (the browser gets its files from the
site instead). HF_TOKEN and the usual huggingface_hub settings (HF_HOME, HF_HUB_OFFLINE) apply;
downloads show huggingface_hub's progress bars.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from .portable.errors import DownloadError, PocketTTSError

REACH_TIMEOUT_SECONDS = 5.0


class HubFile(NamedTuple):
    repo_id: str
    filename: str
    revision: Optional[str]

    @property
    def url(self) -> str:
        at = f"@{self.revision}" if self.revision else ""
        return f"hf://{self.repo_id}/{self.filename}{at}"


def parse(url: str) -> HubFile:
    """`hf://owner/repo/some/file.ext@revision` -> its parts (the revision is optional)."""
    if not url.startswith("hf://"):
        raise PocketTTSError(f"not a hf:// path: {url}")
    path, _, revision = url[len("hf://") :].partition("@")
    parts = path.split("/")
    if len(parts) < 3 or not all(parts):
        raise PocketTTSError(f"malformed hf:// path (expected hf://owner/repo/file[@revision]): {url}")
    return HubFile("/".join(parts[:2]), "/".join(parts[2:]), revision or None)


def fetch(url: str) -> str:
    """The local path of a hf:// file, downloading it into the Hugging Face cache if needed.

    A cached file is used without touching the network. Before downloading, the endpoint is probed
    once with a short timeout, so that no network gives one quick error rather than minutes of
    retries.
    """
    file = parse(url)
    try:
        import huggingface_hub
    except ImportError:
        raise DownloadError(
            f"downloading {url} needs huggingface_hub, from the 'cli' extra (pip install 'pocket-tts-numpy[cli]')"
        ) from None
    found = cached(url)
    if found is not None:
        return found
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise DownloadError(f"could not fetch {url}: not in the local cache and HF_HUB_OFFLINE is set")
    _check_reachable(huggingface_hub.constants.ENDPOINT, url)
    try:
        return str(huggingface_hub.hf_hub_download(file.repo_id, file.filename, revision=file.revision))
    except Exception as e:  # huggingface_hub raises many types (HTTP, offline, gated, missing)
        raise DownloadError(f"could not fetch {url}: {_reason(e)}") from None


def _check_reachable(endpoint: str, url: str) -> None:
    import socket
    import urllib.parse

    parsed = urllib.parse.urlsplit(endpoint)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname or "", port), timeout=REACH_TIMEOUT_SECONDS).close()
    except OSError:
        raise DownloadError(
            f"could not fetch {url}: no network connection ({parsed.hostname} is unreachable)"
        ) from None


def cached(url: str) -> Optional[str]:
    """The local path of a hf:// file if it is already in the cache (never touches the network)."""
    file = parse(url)
    try:
        import huggingface_hub
    except ImportError:
        return None
    found = huggingface_hub.try_to_load_from_cache(file.repo_id, file.filename, revision=file.revision)
    return found if isinstance(found, str) else None


class CachedRepo(NamedTuple):
    """A repo in the cache with config.yaml at its root (a community checkpoint's layout)."""

    url: str  # hf://owner/repo, @ the ref it was fetched at (but main)
    config: str  # its config.yaml's local path
    size: int  # bytes on disk, every cached revision


def cached_repos() -> List[CachedRepo]:
    """Every model repo of the Hugging Face cache whose newest cached revision has config.yaml at its
    root, by name (never touches the network)."""
    try:
        import huggingface_hub
        from huggingface_hub.errors import CacheNotFound
    except ImportError:
        return []
    try:
        cache = huggingface_hub.scan_cache_dir()
    except CacheNotFound:
        return []
    found = []
    for repo in sorted(cache.repos, key=lambda repo: repo.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        newest = max(repo.revisions, key=lambda revision: revision.last_modified)
        config = newest.snapshot_path / "config.yaml"
        if not config.is_file():
            continue
        refs = sorted(ref for ref in newest.refs if ref != "main")
        at = "" if "main" in newest.refs else f"@{refs[0] if refs else newest.commit_hash}"
        found.append(CachedRepo(f"hf://{repo.repo_id}{at}", str(config), repo.size_on_disk))
    return found


def _reason(error: Exception) -> str:
    name = type(error).__name__
    if name == "GatedRepoError":
        return "the repository is gated: accept its terms on huggingface.co and log in (hf auth login or HF_TOKEN)"
    if name == "RepositoryNotFoundError":
        return "repository not found, or no access with the current token"
    if name in ("EntryNotFoundError", "RemoteEntryNotFoundError", "RevisionNotFoundError"):
        return "no such file at that revision"
    if name == "LocalEntryNotFoundError" or "connect" in str(error).lower() or "offline" in str(error).lower():
        return "no network connection and not in the local cache"
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else name
    return first_line[:300]
