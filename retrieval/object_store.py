"""``RWB_HOME=s3://bucket/prefix``: the workbench's home on S3 (or an S3-compatible store).

Configuration is the standard AWS environment, read by boto3 itself: ``AWS_ENDPOINT_URL``
(an S3-compatible endpoint; unset for AWS), ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
(or any other source of boto3's credential chain), ``AWS_REGION`` (default ``us-east-1``), and
``AWS_ALLOW_HTTP=true`` to allow a plain-``http://`` endpoint (LanceDB's own rule, kept here so
both libraries agree on the same environment).

What lives where: every path the workbench computes under ``rwb_home()`` is a path of a local
*mirror* folder, ``$RWB_CACHE/s3/<bucket>-<hash of the URL>`` (``RWB_CACHE`` defaults to
``~/.cache/rwb``); the object of the same relative key under the prefix is the shared truth.
What is shared through the bucket:

- indexes, published by one PUT of a pointer object (``retrieval.remote_index``);
- candidate pools, one object each (``pull_missing`` / ``push``): a pool is keyed by the
  content it was built from, so a plain PUT of the whole object is safe;
- the JSON stores' read-modify-writes (``held``): the object is read with its ETag before the
  change and written back with ``If-Match`` (``If-None-Match: *`` for a new object), so a
  concurrent writer's change is never lost; the loser gets a one-line error and its change is
  not saved. An endpoint without conditional writes is refused for store writes.

Every failure (no credentials, an unreachable endpoint, a missing bucket, a refused request, a
malformed URL) is an ``ObjectStoreError``, a ``ValueError`` with one line that names the cause.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from retrieval.files import atomic_write, atomic_write_bytes, safe_component

SCHEME = "s3://"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_TRUE = ("1", "true", "yes", "on")


class ObjectStoreError(ValueError):
    """A problem with the S3 home, in one line (the command line prints it as ``rwb: error: …``)."""


class ConflictError(ObjectStoreError):
    """Another writer changed an object between our read and our conditional write."""


@dataclass(frozen=True)
class S3Home:
    bucket: str
    prefix: str  # "" or "a/b" (no leading or trailing slash)

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def url_of(self, relative: str) -> str:
        return f"{SCHEME}{self.bucket}/{self.key(relative)}"


def is_s3(value: str | None) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(SCHEME)


def parse_home(value: str) -> S3Home:
    """``s3://bucket[/prefix]`` → ``S3Home``; a one-line ``ObjectStoreError`` for anything else."""
    text = value.strip()
    if not text.lower().startswith(SCHEME):
        raise ObjectStoreError(f"RWB_HOME={value!r} is not an s3:// URL")
    rest = text[len(SCHEME):]
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise ObjectStoreError(f"RWB_HOME={value!r}: {bucket!r} is not a valid S3 bucket name "
                               "(3–63 lowercase letters, digits, '.' or '-')")
    prefix = prefix.rstrip("/")
    parts = prefix.split("/") if prefix else []
    for part in parts:
        if not part or safe_component(part) != part:
            raise ObjectStoreError(f"RWB_HOME={value!r}: the prefix part {part!r} is not a plain name "
                                   "(letters, digits, '.', '_' or '-'; no empty, '.' or '..' parts)")
    return S3Home(bucket, "/".join(parts))


def cache_root() -> Path:
    """``$RWB_CACHE`` (default ``~/.cache/rwb``): local copies of what an s3:// home holds."""
    value = os.environ.get("RWB_CACHE")
    if value is not None and value.strip():
        return Path(value).expanduser().resolve()
    return (Path.home() / ".cache" / "rwb").resolve()


def mirror_of(home: S3Home) -> Path:
    """The local folder that stands for ``home`` (one per URL, never shared between two homes)."""
    digest = hashlib.sha1(home.url.encode("utf-8")).hexdigest()[:10]
    return cache_root() / "s3" / f"{home.bucket}-{digest}"


def configured_home() -> S3Home | None:
    """The S3 home ``$RWB_HOME`` names, or None when it is a local folder."""
    value = os.environ.get("RWB_HOME")
    return parse_home(value) if is_s3(value) else None


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def allow_http() -> bool:
    return os.environ.get("AWS_ALLOW_HTTP", "").strip().lower() in _TRUE


def lance_storage_options() -> dict[str, str]:
    """The same environment as LanceDB ``storage_options``, for ``lancedb.connect("s3://…")``."""
    options = {"region": region()}
    if endpoint():
        options["endpoint"] = endpoint()
    if allow_http():
        options["allow_http"] = "true"
    for name, key in (("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
                      ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
                      ("AWS_SESSION_TOKEN", "aws_session_token")):
        if os.environ.get(name):
            options[key] = os.environ[name]
    return options


# ---- the bucket ------------------------------------------------------------------------------

class Bucket:
    """The S3 calls the workbench makes, each failure turned into one line."""

    def __init__(self, home: S3Home):
        self.home = home
        where = endpoint()
        if where and where.lower().startswith("http://") and not allow_http():
            raise ObjectStoreError(f"AWS_ENDPOINT_URL={where} is plain http; set AWS_ALLOW_HTTP=true to "
                                   "allow it (a local endpoint), or use https")
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise ObjectStoreError("RWB_HOME=s3://… needs boto3: pip install 'retrieval-workbench[s3]'") from None
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60,
                        s3={"addressing_style": "path"} if where else None)
        self.client = boto3.session.Session().client("s3", endpoint_url=where, region_name=region(),
                                                     config=config)

    # errors
    def _error(self, error: Exception, what: str, key: str = "") -> ObjectStoreError:
        from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

        where = endpoint() or "AWS S3"
        if isinstance(error, NoCredentialsError):
            return ObjectStoreError(f"no AWS credentials for {self.home.url}: set AWS_ACCESS_KEY_ID and "
                                    "AWS_SECRET_ACCESS_KEY (or another boto3 credential source)")
        if isinstance(error, EndpointConnectionError) or type(error).__name__ in (
                "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
            return ObjectStoreError(f"cannot reach the S3 endpoint {where} (AWS_ENDPOINT_URL) while {what}; "
                                    "is it running and reachable?")
        if isinstance(error, ClientError):
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code == "NoSuchBucket" or (code in ("404", "NotFound") and what == "opening the bucket"):
                return ObjectStoreError(f"bucket {self.home.bucket!r} does not exist at {where}; create it first")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "Forbidden"):
                return ObjectStoreError(f"{where} refused the credentials for {self.home.url} ({code}) while {what}")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                return ConflictError(f"another writer changed {self.home.url_of(key or what)} at the same time; "
                                     "this change was not saved — reload and try again")
            if code in ("NotImplemented", "501") and key:
                return ObjectStoreError(f"{where} does not support conditional writes (If-Match / "
                                        "If-None-Match); rwb cannot write its stores there safely")
            message = str(error.response.get("Error", {}).get("Message", "")) or code
            return ObjectStoreError(f"S3 error while {what} at {self.home.url}: {code} {message}".strip())
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        return ObjectStoreError(f"S3 error while {what} at {self.home.url}: {text[:200]}")

    @contextmanager
    def _calls(self, what: str, key: str = ""):
        from boto3.exceptions import Boto3Error  # an upload's failure (S3UploadFailedError)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except (BotoCoreError, ClientError, Boto3Error) as error:
            raise self._error(error, what, key) from None

    def check(self) -> None:
        """One request that fails early and clearly on bad credentials, endpoint or bucket."""
        with self._calls("opening the bucket"):
            self.client.head_bucket(Bucket=self.home.bucket)

    def get(self, relative: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, or None when there is none."""
        from botocore.exceptions import ClientError

        with self._calls(f"reading {relative}"):
            try:
                reply = self.client.get_object(Bucket=self.home.bucket, Key=self.home.key(relative))
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise
            return reply["Body"].read(), reply["ETag"]

    def exists(self, relative: str) -> bool:
        from botocore.exceptions import ClientError

        with self._calls(f"looking up {relative}"):
            try:
                self.client.head_object(Bucket=self.home.bucket, Key=self.home.key(relative))
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                    return False
                raise
        return True

    def put(self, relative: str, data: bytes, if_match: str | None = None, if_absent: bool = False) -> str:
        """Write the whole object in one PUT (atomic on S3); ``if_match`` / ``if_absent`` make it
        conditional (``ConflictError`` when another writer came first). Returns the new ETag."""
        extra = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"} if if_absent else {}
        with self._calls(f"writing {relative}", relative):
            return self.client.put_object(Bucket=self.home.bucket, Key=self.home.key(relative), Body=data,
                                          **extra)["ETag"]

    def delete(self, relative: str) -> None:
        with self._calls(f"deleting {relative}"):
            self.client.delete_object(Bucket=self.home.bucket, Key=self.home.key(relative))

    def upload(self, relative: str, path: Path) -> None:
        with self._calls(f"uploading {relative}"):
            self.client.upload_file(str(path), self.home.bucket, self.home.key(relative))

    def download(self, relative: str, path: Path) -> None:
        """Stream the object into ``path`` (atomically, ``retrieval.files.atomic_write``)."""
        with self._calls(f"downloading {relative}"):
            atomic_write(path, lambda handle: self.client.download_fileobj(
                self.home.bucket, self.home.key(relative), handle))

    def listing(self, relative_folder: str) -> dict[str, tuple[int, float]]:
        """Objects under the folder: path relative to it → (size, last-modified epoch seconds)."""
        folder = self.home.key(relative_folder.rstrip("/")) + "/"
        found: dict[str, tuple[int, float]] = {}
        with self._calls(f"listing {relative_folder}"):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.home.bucket,
                                                                               Prefix=folder):
                for item in page.get("Contents", []):
                    found[item["Key"][len(folder):]] = (int(item["Size"]), item["LastModified"].timestamp())
        return found

    def etags(self, relative_folder: str) -> dict[str, str]:
        """ETags of the objects directly in the folder, by name."""
        folder = self.home.key(relative_folder.rstrip("/")) + "/" if relative_folder else self.home.key("")
        found: dict[str, str] = {}
        with self._calls(f"listing {relative_folder}"):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.home.bucket,
                                                                               Prefix=folder, Delimiter="/"):
                for item in page.get("Contents", []):
                    found[item["Key"][len(folder):]] = item["ETag"]
        return found

    def delete_folder(self, relative_folder: str) -> None:
        names = list(self.listing(relative_folder))
        prefix = relative_folder.rstrip("/")
        with self._calls(f"deleting {relative_folder}"):
            for start in range(0, len(names), 1000):
                batch = [{"Key": self.home.key(f"{prefix}/{n}")} for n in names[start:start + 1000]]
                self.client.delete_objects(Bucket=self.home.bucket, Delete={"Objects": batch, "Quiet": True})


_buckets: dict[tuple, Bucket] = {}
_buckets_lock = threading.Lock()


def bucket_of(home: S3Home) -> Bucket:
    """One client per home and configuration in a process (checked once with ``HEAD bucket``)."""
    key = (home, endpoint(), region(), allow_http(), os.environ.get("AWS_ACCESS_KEY_ID"))
    with _buckets_lock:
        bucket = _buckets.get(key)
    if bucket is None:
        bucket = Bucket(home)
        bucket.check()
        with _buckets_lock:
            bucket = _buckets.setdefault(key, bucket)
    return bucket


# ---- files of the local mirror and their objects ---------------------------------------------

NAME_MAX = 255  # bytes of one file name on the local file systems the mirror lives on


def local_name_ok(name: str) -> bool:
    """Whether an object's name (one level of a folder's listing) can be a file of the mirror:
    one plain component, no control character, at most ``NAME_MAX`` bytes. Names from the bucket
    are checked before they become paths: one foreign object cannot break every listing."""
    return (bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name
            and not any(ord(ch) < 32 or ord(ch) == 127 for ch in name)
            and len(name.encode("utf-8", "surrogatepass")) <= NAME_MAX)


def _check_mirror(home: S3Home, mirror: Path, path: Path) -> None:
    """Refuse a mirror that is not this user's own folder: a symbolic link (the mirror itself or
    a folder inside it on the way to ``path``) or a folder owned by another user. Writes through
    it would land elsewhere, and never reach the bucket."""
    relative = path.relative_to(mirror)
    for folder in [mirror, *(mirror.joinpath(*relative.parts[:i]) for i in range(1, len(relative.parts)))]:
        if folder.is_symlink():
            raise ObjectStoreError(f"the local mirror of {home.url} holds a symbolic link ({folder}); what is "
                                   "written there would not reach the bucket — remove the link (or set RWB_CACHE)")
    try:
        owner = mirror.stat().st_uid
    except FileNotFoundError:
        return
    if owner != os.getuid():
        raise ObjectStoreError(f"the local mirror {mirror} of {home.url} belongs to another user "
                               f"(uid {owner}); set RWB_CACHE to a folder of your own")


def remote_of(path: Path) -> tuple[Bucket, str] | None:
    """The bucket and relative key of a file under the mirror of an s3:// ``$RWB_HOME``; None
    for a local home (or a path outside the mirror). A mirror that is a symbolic link or another
    user's folder is refused (``_check_mirror``)."""
    home = configured_home()
    if home is None:
        return None
    mirror = mirror_of(home)
    absolute = Path(os.path.abspath(path))
    if absolute.is_relative_to(mirror):
        _check_mirror(home, mirror, absolute)
        relative = absolute.relative_to(mirror)
    else:
        resolved = Path(path).resolve()
        if mirror.is_symlink() and resolved.is_relative_to(mirror.resolve()):  # reached through the link
            _check_mirror(home, mirror, mirror)
        try:
            relative = resolved.relative_to(mirror)
        except ValueError:
            return None
    return bucket_of(home), PurePosixPath(*relative.parts).as_posix()


def pull_missing(path: Path) -> None:
    """Fetch the object of ``path`` when the local copy is missing (content-keyed files: pools)."""
    remote = remote_of(path)
    if remote is not None and not Path(path).is_file():
        bucket, key = remote
        if bucket.exists(key):
            bucket.download(key, Path(path))


def push(path: Path) -> None:
    """Upload ``path`` as its object (a whole-object PUT; content-keyed files: pools)."""
    remote = remote_of(path)
    if remote is not None:
        remote[0].upload(remote[1], Path(path))


_held = threading.local()


def _held_paths() -> set:
    if not hasattr(_held, "paths"):
        _held.paths = set()
    return _held.paths


def refresh(path: Path) -> str | None:
    """Make the local copy of a store file equal to its object (removed when there is none);
    returns the object's ETag. Inside ``held`` for the same path it does nothing."""
    remote = remote_of(path)
    if remote is None or Path(path).resolve() in _held_paths():
        return None
    bucket, key = remote
    found = bucket.get(key)
    if found is None:
        Path(path).unlink(missing_ok=True)
        _fetched.pop(Path(path).resolve(), None)
        return None
    data, etag = found
    try:
        same = Path(path).read_bytes() == data
    except OSError:
        same = False
    if not same:
        atomic_write_bytes(path, data)
    _fetched[Path(path).resolve()] = etag
    return etag


_fetched: dict[Path, str] = {}  # local copy → the ETag of the object it was last made equal to


def refresh_folder(folder: Path, suffix: str) -> None:
    """Make the local copies of a store folder's ``*suffix`` files (saved profiles, snapshots)
    equal to its objects: new and changed ones fetched, ones deleted in the bucket removed."""
    remote = remote_of(Path(folder) / f"x{suffix}")
    if remote is None:
        return
    bucket, key = remote
    relative = key.rsplit("/", 1)[0] if "/" in key else ""
    tags = {n: t for n, t in bucket.etags(relative).items() if n.endswith(suffix) and local_name_ok(n)}
    for name, tag in tags.items():
        path = Path(folder) / name
        if _fetched.get(path.resolve()) != tag or not path.is_file():
            refresh(path)
    names = set(tags)
    if Path(folder).is_dir():
        for path in Path(folder).glob(f"*{suffix}"):
            if path.name not in names:
                path.unlink(missing_ok=True)


@contextmanager
def held(path: Path):
    """A read-modify-write of a store file on an s3:// home: the object is read (with its ETag)
    into the local copy, the block changes the local copy, and a change is written back with a
    conditional PUT (or DELETE). A concurrent writer's change is never overwritten: the block's
    change is dropped (the local copy restored) and ``ConflictError`` raised. A local home: a
    no-op."""
    remote = remote_of(path)
    if remote is None:
        yield
        return
    bucket, key = remote
    resolved = Path(path).resolve()
    etag = refresh(path)
    before = Path(path).read_bytes() if Path(path).is_file() else None
    _held_paths().add(resolved)
    try:
        yield
    finally:
        _held_paths().discard(resolved)
    after = Path(path).read_bytes() if Path(path).is_file() else None
    if after == before:
        return
    try:
        if after is None:
            current = bucket.get(key)
            if current is not None and current[1] != etag:
                raise ConflictError(f"another writer changed {bucket.home.url_of(key)} at the same time; "
                                    "this change was not saved — reload and try again")
            bucket.delete(key)
            _fetched.pop(resolved, None)
        else:
            _fetched[resolved] = bucket.put(key, after, if_match=etag, if_absent=etag is None)
    except ObjectStoreError:
        refresh(path)  # the shared state wins; the local copy follows it
        raise
