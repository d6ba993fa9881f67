"""HTTP transport of `ssmbench download`: URL forms, retries with backoff, resumable transfers into `.part` files.

`requests` carries the bytes (a thread-local Session per worker thread for connection reuse): it is the most widely
used, long-maintained Python HTTP client, streams bodies and passes `Range` headers as they are, and needs nothing
beyond urllib3. A transfer appends to what a `.part` file already holds with `Range: bytes=<size>-` (a 206 answer
is appended, a 200 answer restarts the file), and a file is renamed into place only after its size and sha256
match the manifest.

>>> base_url("https://host/ssmbench/shift-64/manifest.json")
'https://host/ssmbench/shift-64/'
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import ConfigError, DownloadError
from ...plain import file_sha256
from ..folder.safe_paths import check_relative, inside

CHUNK = 1 << 20
STOP = threading.Event()
"""Set on Ctrl-C: every transfer stops at its next chunk, keeping what it wrote in its .part file."""


@dataclass(frozen=True)
class FileItem:
    """One file to have in the folder; `sha256` None for the descriptive files the manifest does not cover."""

    path: str
    num_bytes: int | None
    sha256: str | None


class NotFound(Exception):
    pass


class Transient(Exception):
    pass


class Http:
    """Thread-local requests Sessions plus the retry policy."""

    def __init__(self, retries: int, backoff: float, timeout: float) -> None:
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self._local = threading.local()

    def session(self) -> Any:
        s = getattr(self._local, "session", None)
        if s is None:
            import requests

            s = requests.Session()
            s.headers.update({"User-Agent": f"ssmbench/{__version__}", "Accept-Encoding": "identity"})
            self._local.session = s
        return s

    def get(self, url: str, headers: dict[str, str] | None = None) -> Any:
        """A streamed GET; raises NotFound (404/410), Transient (network, 408/429/5xx) or DownloadError."""
        import requests

        hub = url.startswith(hub_endpoint() + "/")
        token = hub_token() if hub else None
        if token:  # only to the Hub itself: requests drops it when the Hub redirects to its CDN
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        try:
            r = self.session().get(url, headers=headers or {}, stream=True, timeout=self.timeout,
                                   allow_redirects=True)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise Transient(_short(exc)) from None
        if r.status_code in (404, 410):
            r.close()
            raise NotFound(f"HTTP {r.status_code}")
        if r.status_code in (408, 425, 429) or r.status_code >= 500:
            r.close()
            raise Transient(f"HTTP {r.status_code}")
        if hub and r.status_code in (401, 403):
            r.close()
            raise DownloadError(f"{url}: HTTP {r.status_code}: the Hub repository is private or gated", _hub_hint(token))
        if r.status_code >= 400 and r.status_code != 416:
            r.close()
            raise DownloadError(f"{url}: HTTP {r.status_code} {r.reason}",
                                "check the URL and that the host serves the dataset folder")
        return r

    def pause(self, attempt: int) -> None:
        time.sleep(self.backoff * (2 ** attempt) * random.uniform(0.5, 1.5))


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_token() -> str | None:
    """The Hugging Face token: huggingface_hub's (HF_TOKEN, or the `hf auth login` cache) when it is installed,
    else $HF_TOKEN."""
    try:
        import huggingface_hub
    except ImportError:
        return os.environ.get("HF_TOKEN") or None
    return huggingface_hub.get_token()


def _hub_hint(token: str | None) -> str:
    if token:
        return "your token has no access: accept the dataset's terms on its Hub page, or ask its owners for access"
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return ("log in to read it: pip install huggingface_hub && hf auth login (or set HF_TOKEN); "
                "huggingface_hub is not installed here")
    return "log in to read it: hf auth login (or set HF_TOKEN), after accepting its terms on the Hub page"


def _short(exc: BaseException) -> str:
    text = str(exc)
    for needle in ("Connection refused", "Name or service not known", "timed out", "Connection reset",
                   "Connection aborted", "IncompleteRead", "Temporary failure in name resolution"):
        if needle in text:
            return needle.lower()
    return type(exc).__name__ + (f": {text[:160]}" if text else "")


def fetch_bytes(http: Http, url: str) -> bytes:
    import requests

    last = ""
    for attempt in range(http.retries + 1):
        try:
            with http.get(url) as r:
                if r.status_code == 416:
                    raise Transient("HTTP 416")
                return r.content
        except requests.RequestException as exc:  # body interrupted
            last = _short(exc)
        except Transient as exc:
            last = str(exc)
        if attempt < http.retries:
            http.pause(attempt)
    raise Transient(last)


def _transfer(http: Http, url: str, part: Path, expected: int | None, bar: Any, lock: threading.Lock) -> str:
    """Bring `part` to the remote file's full length, appending to what it already holds when the server agrees.

    Returns the sha256 of the whole `.part`, computed while the bytes stream in (a resumed prefix is read once
    first), so the caller never reads the file back; the file is fsynced once, at the end of the transfer.
    """
    import requests
    import urllib3

    have = part.stat().st_size if part.exists() else 0
    if expected is not None and have > expected:
        part.unlink()
        have = 0
    if expected is not None and have == expected and have > 0:
        return file_sha256(part)
    with http.get(url, {"Range": f"bytes={have}-"} if have else None) as r:
        if r.status_code == 416:  # our partial file is not a prefix of theirs: start again
            part.unlink(missing_ok=True)
            with lock:
                bar.update(-have)
            raise Transient("HTTP 416 (range not satisfiable); restarting the file")
        mode = "wb"
        if r.status_code == 206:
            start = _content_range_start(r.headers.get("Content-Range", ""))
            if start != have:
                raise Transient(f"server answered range from {start}, asked from {have}")
            mode = "ab"
        elif have:  # 200: the server ignored the range; the body is the whole file
            with lock:
                bar.update(-have)
        digest = _prefix_digest(part) if mode == "ab" else hashlib.sha256()
        part.parent.mkdir(parents=True, exist_ok=True)
        # read1 hands over whatever has arrived, so a dropped connection loses nothing already received
        # (iter_content would discard a partly filled chunk); urllib3 before 2.2 lacks it
        read1 = getattr(r.raw, "read1", None)
        chunks = iter(lambda: read1(CHUNK, decode_content=False), b"") if read1 else r.iter_content(CHUNK)
        try:
            with open(part, mode) as f:
                try:
                    for chunk in chunks:
                        if STOP.is_set():
                            raise KeyboardInterrupt
                        f.write(chunk)
                        digest.update(chunk)
                        with lock:
                            bar.update(len(chunk))
                finally:
                    f.flush()
                    os.fsync(f.fileno())
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:  # dropped mid-body
            raise Transient(_short(exc)) from None
    got = part.stat().st_size
    if expected is not None and got < expected:
        raise Transient(f"connection closed after {got} of {expected} bytes")
    return digest.hexdigest()


def _prefix_digest(part: Path) -> Any:
    digest = hashlib.sha256()
    with open(part, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest


def _content_range_start(value: str) -> int | None:
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


@dataclass
class Failure:
    path: str
    kind: str  # "checksum", "missing" or "network"
    detail: str


def fetch_file(http: Http, bases: Sequence[str], root: Path, item: FileItem, bar: Any,
                lock: threading.Lock) -> Failure | None:
    if STOP.is_set():  # Ctrl-C came while this file waited for a worker: leave it for the next run
        raise KeyboardInterrupt
    dest = inside(root, item.path, "file")  # never written outside the folder, whatever the manifest says
    part = dest.with_name(dest.name + ".part")
    problems: list[Failure] = []
    for base in bases:
        url = base + item.path
        fresh_retry = True
        for attempt in range(http.retries + 1):
            if STOP.is_set():
                raise KeyboardInterrupt
            resumed = part.exists()
            try:
                sha256 = _transfer(http, url, part, item.num_bytes, bar, lock)
            except NotFound as exc:
                problems.append(Failure(item.path, "missing", f"{url}: {exc}"))
                break
            except Transient as exc:
                problems.append(Failure(item.path, "network", f"{url}: {exc}"))
                if attempt < http.retries:
                    http.pause(attempt)
                continue
            size = part.stat().st_size
            if item.sha256 is not None and (size != item.num_bytes or sha256 != item.sha256):
                part.unlink()  # never keep bytes that disagree with the manifest
                with lock:
                    bar.update(-size)
                problems.append(Failure(item.path, "checksum",
                                         f"{url}: {size} bytes with a sha256 that differs from the manifest"))
                if resumed and fresh_retry:  # the kept .part may predate a change at the host: once from zero
                    fresh_retry = False
                    continue
                break  # TLS protects transport integrity: the same host would serve the same wrong bytes
            os.replace(part, dest)
            return None
    for kind in ("checksum", "network", "missing"):
        found = [p for p in problems if p.kind == kind]
        if found:
            return found[-1]
    return Failure(item.path, "network", "no source")


def hf_to_https(source: str) -> str:
    """`hf://datasets/<org>/<repo>@<revision>/<folder>` -> the Hub's base URL for that folder's files.

    >>> hf_to_https("hf://datasets/org/suite@0123abc/shift-64")
    'https://huggingface.co/datasets/org/suite/resolve/0123abc/shift-64/'
    """
    m = re.fullmatch(r"hf://datasets/([^/@]+/[^/@]+)(?:@([^/]+))?(/.*)?", source.rstrip("/"))
    if not m:
        raise ConfigError("source", f"{source!r} is not hf://datasets/<org>/<repo>[@<revision>][/<folder>]")
    repo, revision, folder = m.group(1), m.group(2) or "main", (m.group(3) or "").strip("/")
    for part in (*repo.split("/"), revision, *([folder] if folder else [])):
        check_relative(part, "hf:// path")  # no '..', '\\' or empty parts: it names one folder of one repository
    return f"{hub_endpoint()}/datasets/{repo}/resolve/{revision}/" + (f"{folder}/" if folder else "")


def base_url(source: str) -> str:
    """A source as a base URL ending in '/', under which `manifest.json` and the shards live."""
    if source.startswith("hf://"):
        return hf_to_https(source)
    if source.startswith(("doi:", "https://doi.org/", "s3://", "gs://")):
        raise ConfigError("source", f"{source!r}: DOI, S3 and GCS sources are not supported by this version",
                          "use an https:// or hf:// source")
    if not source.startswith(("http://", "https://")):
        raise ConfigError("source", f"{source!r} is not a URL", "use https://host/path/<name>/ or hf://datasets/...")
    if source.endswith("/manifest.json"):
        source = source[: -len("manifest.json")]
    return source if source.endswith("/") else source + "/"


def looks_like_url(text: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", text)) or text.startswith("doi:")
