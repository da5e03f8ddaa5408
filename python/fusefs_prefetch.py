"""fusefs_prefetch: tell a fusefs mount what the data loader reads next.

Standard library only; PyTorch is optional.  fusefs fetches the files of a
published list onto local disk just ahead of the reader and evicts by
known next use, so epoch after epoch the cache holds what is read soonest.

    from fusefs_prefetch import PrefetchingSampler, publish

    sampler = PrefetchingSampler(DistributedSampler(ds), paths=ds.files,
                                 mount="/mnt/data")
    loader = DataLoader(ds, sampler=sampler, ...)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)          # as with DistributedSampler
        for batch in loader: ...

    publish("/mnt/data", ["shards/train-000123.tar", ...], name="rank0")

Lists go through the mount itself (MOUNT/.fusefs/lists/NAME), so this works
from a training container that only sees the mount of a fusefs sidecar.
"""

import os

__all__ = ["publish", "status", "PrefetchingSampler", "ListRejected"]


class ListRejected(OSError):
    """No line of the list named a file in the mount."""


def _ctl(mount, *parts):
    return os.path.join(mount, ".fusefs", *parts)


def publish(mount, paths, name="default"):
    """Publish the ordered @paths (relative to @mount) as list @name.

    While the list's current epoch runs, a new one is queued as the next
    epoch.  Returns the status text (with the publish report).  Raises
    ListRejected if no path was usable."""
    data = "".join(p.lstrip("/") + "\n" for p in paths).encode()
    path = _ctl(mount, "lists", name)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        report = status(mount, name)
        raise ListRejected(e.errno, f"list {name} rejected:\n{report}") from e
    return status(mount, name)


def status(mount, name="default"):
    """The status text of list @name: position, lead, hit ratio, report."""
    try:
        with open(_ctl(mount, "lists", name)) as f:
            return f.read()
    except OSError:
        return ""


def _rank_name(sampler, name):
    if name:
        return name
    rank = getattr(sampler, "rank", None)
    return f"rank{rank}" if rank is not None else "default"


class PrefetchingSampler:
    """Wrap a sampler (anything iterable over dataset indices, optionally
    with set_epoch() like torch's DistributedSampler): at the start of each
    epoch it publishes this epoch's order if not yet published and, when
    the wrapped sampler is deterministic per epoch (has set_epoch), the
    next epoch's order too, so fusefs prefetches across the boundary.

    @paths maps a dataset index to a path relative to @mount."""

    def __init__(self, sampler, paths, mount, name=None):
        self.sampler = sampler
        self.paths = paths
        self.mount = mount
        self.name = _rank_name(sampler, name)
        self.epoch = 0
        self._published = set()

    def set_epoch(self, epoch):
        self.epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __len__(self):
        return len(self.sampler)

    def order(self, epoch):
        """The indices of @epoch (needs a sampler with set_epoch)."""
        self.sampler.set_epoch(epoch)
        try:
            return list(iter(self.sampler))
        finally:
            self.sampler.set_epoch(self.epoch)

    def _publish(self, epoch, indices):
        if epoch in self._published:
            return
        publish(self.mount, [self.paths[i] for i in indices], self.name)
        self._published.add(epoch)

    def __iter__(self):
        indices = list(iter(self.sampler))
        self._publish(self.epoch, indices)
        if hasattr(self.sampler, "set_epoch"):
            self._publish(self.epoch + 1, self.order(self.epoch + 1))
        return iter(indices)


def publish_shards(mount, shards, name="default"):
    """WebDataset-style: publish a plain list of shard paths in read order."""
    return publish(mount, shards, name)
