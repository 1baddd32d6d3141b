"""Where the store lives: a local LanceDB directory, or a prefix on S3 or an S3-compatible object
store with the options LanceDB's object store needs to reach it (README, "Deploy on Kubernetes")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoreLocation:
    """`uri` is a directory path or `s3://bucket/prefix`; `options` are LanceDB `storage_options`
    (`aws_endpoint`, `aws_region`, `allow_http`, credentials), kept out of the repr."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def local_path(self) -> str | None:
        """The directory of a local store; None on object storage."""
        return None if "://" in self.uri else self.uri
