"""A dataset's index shared through an s3:// ``$RWB_HOME`` (``retrieval.object_store``).

Layout under the prefix (the folder is keyed by the dataset's content, not by where it sits on
a disk, so every machine with the same dataset shares it)::

    indexes/<dataset>-<fingerprint>/<embedder>/<analyzer>/builds/<build id>/   every file of a build
    indexes/<dataset>-<fingerprint>/<embedder>/<analyzer>/current.json         the pointer

Publishing (``SharedIndex.publish``): a build made and verified locally (``retrieval.index``)
is uploaded under ``builds/<build id>/``; only then is the pointer — the build id and its whole
manifest, with the size and sha256 of every file — written in one PUT, which S3 applies
atomically. A build interrupted before that PUT leaves the published index as it was; its
orphan files are removed by a later publish once they are an hour old.

Opening (``SharedIndex.pull``): the pointer is read, and the build it names is downloaded into
the local mirror's ``builds/<build id>/`` (a folder written aside and renamed) unless a copy is
there already; the copy is checked against the pointer's manifest (``retrieval.index._check``, lent
as ``BuildChecks``:
every file's size and sha256, then Tantivy and LanceDB open it) before it becomes the local
``current``. A copy whose checksums differ is never trusted: it is fetched again, and a
published build that fails the check is reported and replaced by a fresh build. Tantivy cannot
open an index on S3, so queries always run on the verified local copy; the LanceDB table under
``builds/<id>/lance`` is a complete Lance dataset that ``lancedb.connect`` also opens at its
``s3://`` URL (``object_store.lance_storage_options``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text, fsync_dir, fsync_tree, safe_component
from retrieval.object_store import Bucket, bucket_of, configured_home, local_name_ok

POINTER = "current.json"
ORPHAN_SECONDS = 3600   # a build folder not named by the pointer is removed once this old
THREADS = 8


@dataclass(frozen=True)
class BuildChecks:
    """What ``retrieval.index`` lends: its check of a build against a manifest (raising
    ``corrupt``), and its atomic switch of the local ``current`` to a build."""

    check: Callable[[Path, dict], None]
    publish: Callable[[Path, Path], None]
    corrupt: type[Exception]


def shared_index(dataset: Dataset, embedder_name: str, analyzer_name: str,
                 checks: BuildChecks) -> "SharedIndex | None":
    """The shared index of (dataset, embedder, analyzer) when ``$RWB_HOME`` is s3://; else None."""
    home = configured_home()
    if home is None:
        return None
    folder = (f"indexes/{safe_component(dataset.name)}-{dataset.fingerprint[:16]}/"
              f"{safe_component(embedder_name)}/{safe_component(analyzer_name)}")
    return SharedIndex(bucket_of(home), folder, checks)


def _relative_ok(relative: str) -> bool:
    pure = PurePosixPath(relative)
    return bool(relative) and not pure.is_absolute() and "\\" not in relative and "\x00" not in relative \
        and all(part not in ("", ".", "..") and local_name_ok(part) for part in pure.parts)


class SharedIndex:
    def __init__(self, bucket: Bucket, folder: str, checks: BuildChecks):
        self.bucket = bucket
        self.folder = folder
        self.checks = checks

    @property
    def url(self) -> str:
        return self.bucket.home.url_of(self.folder)

    def pointer(self) -> dict | None:
        """The published pointer (``build``, ``manifest``), None when nothing is published or the
        pointer is unreadable."""
        found = self.bucket.get(f"{self.folder}/{POINTER}")
        if found is None:
            return None
        try:
            record = json.loads(found[0])
            build = record["build"]
            ok = (isinstance(build, str) and safe_component(build) == build and not build.startswith("tmp-")
                  and isinstance(record.get("manifest"), dict))
        except (ValueError, KeyError, TypeError):
            ok = False
        return record if ok else None

    def pull(self, directory: Path, wanted: dict, notice: Callable[[str], None]) -> bool:
        """Make the local ``current`` the published build, verified; False when there is none that
        fits ``wanted`` (nothing published, another model or analyzer, or damaged: the caller
        builds and publishes)."""
        record = self.pointer()
        if record is None:
            return False
        manifest, build_id = record["manifest"], record["build"]
        if any(manifest.get(k) != v for k, v in wanted.items()):
            return False
        builds = directory / "builds"
        local = builds / build_id
        if local.is_dir():
            try:
                if json.loads((local / "manifest.json").read_text("utf-8")) != manifest:
                    raise self.checks.corrupt("its manifest differs from the published one")
                self.checks.check(local, manifest)
            except (self.checks.corrupt, OSError, ValueError) as error:
                notice(f"local copy {local} of the shared index is damaged ({error}); fetching it again")
                shutil.rmtree(local, ignore_errors=True)
        if not local.is_dir():
            try:
                self._download(build_id, manifest, builds)
            except self.checks.corrupt as error:
                notice(f"the shared index at {self.url} (build {build_id}) is damaged ({error}); "
                       "building and publishing a new one")
                return False
        self.checks.publish(directory, local)
        return True

    def _download(self, build_id: str, manifest: dict, builds: Path) -> None:
        """Fetch every object of the build into ``builds/<build_id>``, checked, written aside."""
        builds.mkdir(parents=True, exist_ok=True)
        for stale in builds.glob("tmp-*"):  # left by a killed download or build (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = builds / f"tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            names = [n for n in self.bucket.listing(f"{self.folder}/builds/{build_id}") if n != "manifest.json"]
            if not all(_relative_ok(n) for n in names):
                raise self.checks.corrupt("an object's name leaves the build folder")
            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(lambda n: self.bucket.download(f"{self.folder}/builds/{build_id}/{n}", tmp / n),
                              names))
            # the pointer's manifest is the truth, whatever builds/<id>/manifest.json holds
            atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2))
            self.checks.check(tmp, manifest)
            fsync_tree(tmp)
            os.rename(tmp, builds / build_id)
            fsync_dir(builds)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def publish(self, build: Path) -> None:
        """Upload a verified local build, then point ``current.json`` at it (one PUT)."""
        previous = self.pointer()
        names = sorted(p.relative_to(build).as_posix() for p in build.rglob("*")
                       if p.is_file() and not p.name.endswith(".lock"))
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda n: self.bucket.upload(f"{self.folder}/builds/{build.name}/{n}", build / n),
                          names))
        manifest = json.loads((build / "manifest.json").read_text("utf-8"))
        self.bucket.put(f"{self.folder}/{POINTER}",
                        json.dumps({"build": build.name, "manifest": manifest}, indent=1).encode("utf-8"))
        keep = {build.name} | ({previous["build"]} if previous else set())
        self._prune(keep)

    def _prune(self, keep: set[str]) -> None:
        """Remove build folders not in ``keep`` whose newest object is older than ``ORPHAN_SECONDS``
        (a younger one may be another machine's publish in progress)."""
        newest: dict[str, float] = {}
        for name, (_, modified) in self.bucket.listing(f"{self.folder}/builds").items():
            build_id = name.split("/", 1)[0]
            newest[build_id] = max(newest.get(build_id, 0.0), modified)
        for build_id, modified in newest.items():
            if build_id not in keep and time.time() - modified > ORPHAN_SECONDS:
                self.bucket.delete_folder(f"{self.folder}/builds/{build_id}")
