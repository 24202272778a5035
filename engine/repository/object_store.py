"""Model repositories on object storage, in Triton's syntax: `s3://bucket/path`, `s3://host:port/bucket/path`
(an S3-compatible store; `s3://https://host:port/...` for TLS), `gs://bucket/path`, `as://account/container/path`.

The bucket's objects are mirrored into a local folder, keyed by each object's version (S3's VersionId or ETag,
GCS's generation, Azure's ETag), and the repository reads that folder: `sync()` downloads only the objects whose
version changed and removes the ones gone from the bucket, so a poll sees a changed model as a changed folder.
Credentials come only from the environment or the cloud SDK's own files (AWS_*/~/.aws, GOOGLE_APPLICATION_CREDENTIALS,
AZURE_STORAGE_*); none is ever logged or put in a message. The clients (fsspec's s3fs, gcsfs, adlfs) are the
`conch[cloud]` extra, imported only when such a repository is named."""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

log = logging.getLogger(__name__)

SCHEMES = ("s3://", "gs://", "as://")
CACHE_ENV = "CONCH_REPOSITORY_CACHE"          # where mirrors live (default ~/.cache/conch/repositories)
_S3_HOST = re.compile(r"^(https?://)?([0-9A-Za-z.\-]+):([0-9]+)/(.+)$")   # Triton's host:port form


def is_remote(location: str | os.PathLike) -> bool:
    return isinstance(location, str) and location.startswith(SCHEMES)


@dataclass(frozen=True)
class StoreLocation:
    """Where a repository lives: `root` is the path the filesystem client lists (bucket/prefix or
    container/prefix); `endpoint` an S3-compatible store's URL; `account` Azure's storage account."""
    url: str
    scheme: str                  # s3 | gs | as
    root: str
    endpoint: str | None = None
    account: str | None = None

    @classmethod
    def parse(cls, url: str) -> StoreLocation:
        scheme, _, rest = url.partition("://")
        rest = rest.strip("/")
        if scheme == "s3":
            hosted = _S3_HOST.match(rest)
            if hosted:
                proto, host, port, rest = hosted.groups()
                return cls(url, scheme, _checked(url, rest), endpoint=f"{proto or 'http://'}{host}:{port}")
            return cls(url, scheme, _checked(url, rest))
        if scheme == "as":
            account, _, rest = rest.partition("/")
            if not account:
                raise ValueError(f"{url}: an Azure repository is as://ACCOUNT/CONTAINER/PATH")
            return cls(url, scheme, _checked(url, rest), account=account)
        if scheme == "gs":
            return cls(url, scheme, _checked(url, rest))
        raise ValueError(f"{url}: not an object-storage repository (s3://, gs:// or as://)")

    def filesystem(self) -> Any:
        return OPENERS[self.scheme](self)


def _checked(url: str, root: str) -> str:
    if not root or ".." in PurePosixPath(root).parts:
        raise ValueError(f"{url}: name a bucket (and optionally a path in it)")
    return root


def _s3(loc: StoreLocation) -> Any:
    import s3fs                  # credentials: AWS_ACCESS_KEY_ID/..., AWS_PROFILE, ~/.aws (botocore's chain)

    return s3fs.S3FileSystem(endpoint_url=loc.endpoint or os.environ.get("AWS_ENDPOINT_URL"),
                             skip_instance_cache=True)


def _gcs(loc: StoreLocation) -> Any:
    # credentials: GOOGLE_APPLICATION_CREDENTIALS or gcloud's; an emulator (STORAGE_EMULATOR_HOST): none. The
    # plain JSON-API client: gcsfs's default class first asks a gRPC service for the bucket's layout, which an
    # emulator does not serve (a minute's timeout), and reading objects needs none of it.
    from gcsfs.core import GCSFileSystem

    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    token = "anon" if emulator and not os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") else None
    return GCSFileSystem(endpoint_url=emulator, token=token, skip_instance_cache=True)


def _azure(loc: StoreLocation) -> Any:
    import adlfs                 # credentials: AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY (Triton's name),
                                 # AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN, or a service principal
    return adlfs.AzureBlobFileSystem(account_name=loc.account,
                                     account_key=os.environ.get("AZURE_STORAGE_KEY"), skip_instance_cache=True)


OPENERS: dict[str, Callable[[StoreLocation], Any]] = {"s3": _s3, "gs": _gcs, "as": _azure}


def object_version(info: dict) -> str:
    """What changes when an object is rewritten: its version id, generation or ETag (else size and time)."""
    for key in ("VersionId", "generation", "ETag", "etag", "md5Hash"):
        if info.get(key):
            return str(info[key]).strip('"')
    return f"{info.get('size')}:{info.get('LastModified') or info.get('last_modified') or info.get('mtime')}"


class ObjectStoreMirror:
    """A local copy of a repository on object storage. `local` is the folder the repository reads."""

    def __init__(self, url: str, cache_root: Path | None = None) -> None:
        self.location = StoreLocation.parse(url)
        cache_root = Path(cache_root or os.environ.get(CACHE_ENV) or Path.home() / ".cache/conch/repositories")
        base = cache_root / hashlib.sha256(url.encode()).hexdigest()[:16]
        self.local, self._manifest, self._lock = base / "models", base / "manifest.json", base / "lock"
        self.local.mkdir(parents=True, exist_ok=True)
        self._fs: Any = None

    @property
    def url(self) -> str:
        return self.location.url

    def sync(self) -> None:
        """Make `local` hold exactly the bucket's objects. Several processes on one host (Ray replicas) share
        the mirror; a file lock lets one sync at a time."""
        with self._lock.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remote = self._listing()
            seen = self._read_manifest()
            for rel, version in remote.items():
                if seen.get(rel) != version or not (self.local / rel).is_file():
                    self._download(rel)
            for rel in set(seen) - set(remote):
                (self.local / rel).unlink(missing_ok=True)
                _prune(self.local, (self.local / rel).parent)
            self._manifest.write_text(json.dumps(remote))

    def _listing(self) -> dict[str, str]:
        """relative path -> version of every object under the root; a key that would leave the folder is
        skipped, with a warning naming it."""
        if self._fs is None:
            self._fs = self.location.filesystem()
        self._fs.invalidate_cache()
        root = self.location.root
        listing = {}
        for path, info in self._fs.find(root, detail=True).items():
            rel = PurePosixPath(path).relative_to(root) if path != root else PurePosixPath(PurePosixPath(root).name)
            if ".." in rel.parts or rel.is_absolute() or not rel.parts:
                log.warning("repository %s: skipping object %r (outside the repository)", self.url, path)
                continue
            listing[str(rel)] = object_version(info)
        return listing

    def _download(self, rel: str) -> None:
        target = self.local / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".conch-partial")
        self._fs.get_file(f"{self.location.root}/{rel}", str(partial))
        os.replace(partial, target)            # a reader sees the old file or the new one, never half

    def _read_manifest(self) -> dict[str, str]:
        try:
            return json.loads(self._manifest.read_text())
        except (OSError, ValueError):
            return {}


def _prune(top: Path, folder: Path) -> None:
    """Remove folders left empty under `top` by a deleted object."""
    while folder != top and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


__all__ = ["ObjectStoreMirror", "StoreLocation", "is_remote"]
