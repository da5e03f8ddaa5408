"""fusefs_prefetch: tell a fusefs mount what the data loader reads next.

fusefs fetches the files of a published epoch list onto local disk just
ahead of the reader and evicts by known next use, so epoch after epoch the
cache holds what is read soonest.  Standard library only; with PyTorch
importable, PrefetchingSampler is a torch.utils.data.Sampler.

    from fusefs_prefetch import PrefetchingSampler

    sampler = PrefetchingSampler(DistributedSampler(ds), paths=ds.files,
                                 mount="/mnt/data")
    loader = DataLoader(ds, sampler=sampler, num_workers=8, drop_last=True)
    for epoch in range(start_epoch, epochs):
        sampler.set_epoch(epoch)      # publishes epochs e and e + 1, begins e
        for batch in loader: ...

    # WebDataset: the helper decides the shard order and hands it over
    shards = ShardList("/mnt/data", [f"train-{i:06d}.tar" for i in range(N)])
    ds = wds.WebDataset(shards.epoch(e), shardshuffle=False)

    publish("/mnt/data", ["shards/train-000123.tar", ...], name="rank0",
            epoch=3)

    # samples inside big token files (np.memmap): list byte ranges
    ranges = TokenRanges("/mnt/data", ["tokens/train_00"], seq_len=2048)
    sampler = PrefetchingSampler(RandomSampler(ranges), paths=ranges,
                                 mount="/mnt/data")
    tokens = ranges.memmap(0)         # np.memmap, madvise(MADV_RANDOM)

Best effort: a mount that is not fusefs, a refused list or a full control
file logs one warning and training goes on; strict=True raises instead.
publish() and begin() always raise (ListRejected, NotFusefs).  The epoch
protocol (numbers, begins, resume) is docs/epochs.md; lists go through the
mount itself (MOUNT/.fusefs/lists/NAME), so this works from a training
container that only sees the mount of a fusefs sidecar.
"""

import errno
import logging
import os
import random

try:
    import torch
    from torch.utils.data import Sampler as _SamplerBase
except Exception:       # not installed, or a broken install: stdlib only
    torch = None
    _SamplerBase = object

__all__ = ["publish", "begin", "status", "list_status", "list_name", "is_fusefs",
           "PrefetchingSampler", "ShardList", "shard_order", "publish_shards",
           "TokenRanges", "read_megatron_idx", "memmap_random",
           "FusefsError", "ListRejected", "NotFusefs"]
__version__ = "0.1.0"  # = the fusefs release (packaging/debian/changelog)

log = logging.getLogger("fusefs_prefetch")


class FusefsError(OSError):
    """A fusefs control file refused a request."""


class ListRejected(FusefsError):
    """The mount refused a list: no usable line (EINVAL), an epoch older
    than the current one (ESTALE), later epochs already queued (EBUSY), too
    many lists (ENOSPC) or a list larger than a control file takes (EFBIG)."""


class NotFusefs(FusefsError):
    """The directory is not (inside) a fusefs mount root."""


def _ctl(mount, *parts):
    return os.path.join(mount, ".fusefs", *parts)


def is_fusefs(mount):
    """True if @mount is the root of a fusefs mount."""
    return os.path.exists(_ctl(mount, "stats"))


def list_name(sampler=None):
    """The list name of this process: "rankN" from the sampler's rank
    (DistributedSampler), torch.distributed, $RANK or $LOCAL_RANK, else
    "pidN", so that ranks on one node never overwrite each other's list."""
    rank = getattr(sampler, "rank", None)
    if rank is None and torch is not None:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank()
        except Exception:
            rank = None
    for var in ("RANK", "LOCAL_RANK"):
        if rank is None and os.environ.get(var, "").isdigit():
            rank = int(os.environ[var])
    return f"rank{rank}" if rank is not None else f"pid{os.getpid()}"


def _rel(mount, path):
    """@path (str, bytes or path-like) relative to the mount root (absolute
    paths below @mount too), as str: undecodable bytes as surrogates"""
    path = os.fsdecode(path)
    root = os.fsdecode(os.path.abspath(mount)).rstrip("/") + "/"
    if path.startswith(root):
        return path[len(root):]
    return path.lstrip("/")


def _line(mount, p):
    """a list record: a path, or a (path, offset, length) sample range as
    PATH<TAB>OFFSET<TAB>LENGTH (docs/epochs.md, "Sample ranges")"""
    if isinstance(p, tuple):
        path, off, length = p
        return f"{_rel(mount, path)}\t{int(off)}\t{int(length)}"
    return _rel(mount, p)


def _text(paths=(), epoch=None, begin=False, begin_epoch=None, at=0, mount="/"):
    head = []
    if epoch is not None:
        head.append(f"# epoch {int(epoch)}")
    if begin:
        words = ["# begin"]
        if begin_epoch is not None:
            words.append(str(int(begin_epoch)))
        if at:
            words.append(f"at {int(at)}")
        head.append(" ".join(words))
    rels = [_line(mount, p) for p in paths]
    # the names' bytes: a name that is not UTF-8 is one line fusefs
    # refuses ("binary"), not an exception here.  A name with a line
    # break cannot be one line of a list: then every record ends with a
    # NUL byte instead, after a first line "# nul" (docs/epochs.md); a
    # name with a NUL byte cannot be a file's and goes as an empty record
    if any("\n" in r or "\r" in r for r in rels):
        recs = head + ["" if "\0" in r else r for r in rels]
        return b"# nul\n" + os.fsencode("".join(r + "\0" for r in recs))
    return os.fsencode("".join(line + "\n" for line in head + rels))


_NAME_MAX = 63      # the daemon's LIST_NAME_MAX - 1


def _name_ok(name):
    """a list name as the daemon takes it (lists_name_ok()): 1-63 of
    [A-Za-z0-9._-], not starting with '.'; so never a path out of lists/
    ("../evict" would evict the listed files)"""
    return (isinstance(name, str) and 0 < len(name) <= _NAME_MAX
            and name[0] != "." and all(c.isascii() and (c.isalnum() or c in "._-")
                                       for c in name))


def _write(mount, name, data):
    if not _name_ok(name):
        raise ListRejected(errno.EINVAL, f"{name!r} is not a list name "
                           "(1-63 of A-Z a-z 0-9 . _ -, not starting with '.')")
    if not is_fusefs(mount):
        raise NotFusefs(2, f"{mount} is not a fusefs mount root (no .fusefs/stats)")
    try:
        with open(_ctl(mount, "lists", name), "wb") as f:
            f.write(data)
    except OSError as e:
        report = status(mount, name)
        raise ListRejected(e.errno, f"list {name}: {e.strerror}\n{report}") from e
    return status(mount, name)


def publish(mount, paths, name="default", epoch=None, begin=False, at=0):
    """Publish the ordered @paths (relative to @mount) as list @name.  An
    item may be a (path, offset, length) tuple: those bytes of the file
    (a sample of a big file read at random offsets).

    With @epoch, the list is that epoch: while an earlier epoch runs it is
    queued, an older one is refused (ESTALE).  Without, it is the epoch
    after the last one the list knows (queued after them, never replacing
    one; EBUSY once two are queued).  With @begin, the epoch
    begins now (its first @at files were already read: a resume).
    Returns the list's status text (with the publish report).  Raises
    ListRejected or NotFusefs."""
    return _write(mount, name, _text(paths, epoch, begin, None, at, mount))


def begin(mount, name="default", epoch=None, at=0):
    """Epoch @epoch (None: the next one) of list @name begins now, its first
    @at files already read.  If that epoch's list is not published yet, the
    list waits for it.  Raises ListRejected or NotFusefs."""
    return _write(mount, name, _text((), None, True, epoch, at))


def status(mount, name="default"):
    """The status text of list @name: state, epoch, position, lead, hit
    ratio, last publish report ("" if it cannot be read)."""
    if not _name_ok(name):
        return ""
    try:
        with open(_ctl(mount, "lists", name)) as f:
            return f.read()
    except OSError:
        return ""


def list_status(mount, name="default"):
    """status() as a dict: numbers as int or float, the rest as str; the
    last publish report under "last_publish"."""
    out, cur = {}, None
    for line in status(mount, name).splitlines():
        if line.startswith("# last publish"):
            cur = out.setdefault("last_publish", {})
            continue
        key, _, val = line.partition(" ")
        if not val or key == "list":
            continue
        val = val.split(" (first")[0]
        for conv in (int, float):
            try:
                val = conv(val)
                break
            except ValueError:
                pass
        (cur if cur is not None else out)[key] = val
    return out


class _Publisher:
    """Best-effort writes of one list: one warning per kind of failure."""

    def __init__(self, mount, name, strict):
        self.mount, self.name, self.strict = mount, name, strict
        self.warned = set()
        self.published = set()      # epochs whose list fusefs has
        self.enabled = True
        if not is_fusefs(mount):
            self._fail(NotFusefs(2, f"{mount} is not a fusefs mount root"))
            self.enabled = False

    def _fail(self, err):
        if self.strict:
            raise err
        kind = type(err).__name__, getattr(err, "errno", None)
        if kind not in self.warned:
            self.warned.add(kind)
            log.warning("fusefs_prefetch: %s; training goes on without prefetch hints"
                        " for list %s", str(err).splitlines()[0], self.name)

    def send(self, paths=(), epoch=None, begin=False, begin_epoch=None, at=0):
        """one write; the list's status text, or None if it failed"""
        if not self.enabled:
            return None
        try:
            return _write(self.mount, self.name,
                          _text(paths, epoch, begin, begin_epoch, at, self.mount))
        except OSError as e:
            self._fail(e)
            return None

    def begin(self, epoch, at, paths_of):
        """@epoch begins at @at: a begin alone if fusefs has its list (the
        begin acts first: a restarted job may go back to an earlier epoch),
        else the list (paths_of(epoch)) with the begin in one write"""
        if epoch in self.published:
            st = self.send(begin=True, begin_epoch=epoch, at=at)
            if st is not None and "\nstate waiting\n" not in st:
                return
        if self.send(paths_of(epoch), epoch=epoch, begin=True, at=at) is not None:
            self.published.add(epoch)

    def queue(self, epoch, paths_of):
        """publish @epoch's list ahead of time, once"""
        if epoch not in self.published and \
                self.send(paths_of(epoch), epoch=epoch) is not None:
            self.published.add(epoch)


def _unique(paths):
    seen = set()
    return [p for p in paths if not (p in seen or seen.add(p))]


class PrefetchingSampler(_SamplerBase):
    """Wrap a sampler (anything iterable over dataset indices): each epoch
    publishes its order to fusefs, marks its start, and publishes the next
    epoch's order when it can be known in advance, so fusefs prefetches
    across the boundary and evicts for the right epoch.

    @paths maps a dataset index to a path relative to @mount, or absolute
    below it (a sequence or a callable), or to a (path, offset, length)
    sample range (TokenRanges is such a sequence).  @name defaults to list_name(sampler).  The next epoch is
    known for samplers with set_epoch() (DistributedSampler, with or
    without drop_last) and for a torch RandomSampler without a generator
    of its own, which this wrapper seeds with @seed + epoch; for any other
    sampler only the running epoch is published.  Without set_epoch()
    calls, every new iteration is the next epoch.

    Resume mid-epoch: set_epoch(epoch, start=K) (or load_state_dict()):
    the iteration yields the epoch's indices from K on and fusefs counts
    the first K files as read.  Best effort unless @strict."""

    def __init__(self, sampler, paths, mount, name=None, seed=0, strict=False,
                 publish_next=True):
        if _SamplerBase is not object:
            _SamplerBase.__init__(self, None)
        self.sampler = sampler
        self.paths = paths
        self.mount = mount
        self.name = name or list_name(sampler)
        self.seed = seed
        self.publish_next = publish_next
        self.epoch = 0
        self.start = 0
        self._pub = _Publisher(mount, self.name, strict)
        self._orders = {}           # epoch -> indices, the last few
        self._begun = None          # the epoch begun and not yet iterated
        self._iterated = False
        self._yielded = 0
        self._own_generator = (torch is not None and
                               isinstance(sampler, torch.utils.data.RandomSampler) and
                               sampler.generator is None)

    # -- what the epochs are ------------------------------------------------

    def predictable(self):
        """Can the order of a future epoch be computed now?"""
        return self._own_generator or hasattr(self.sampler, "set_epoch")

    def _draw(self, epoch):
        if self._own_generator:
            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            self.sampler.generator = g
            try:
                return list(iter(self.sampler))
            finally:
                self.sampler.generator = None
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
            try:
                return list(iter(self.sampler))
            finally:
                self.sampler.set_epoch(self.epoch)
        return list(iter(self.sampler))

    def order(self, epoch):
        """The indices of @epoch (the whole epoch, not only from start)."""
        if epoch not in self._orders:
            self._orders[epoch] = self._draw(epoch)
            for old in sorted(self._orders)[:-3]:
                del self._orders[old]
        return self._orders[epoch]

    def _path(self, i):
        return self.paths(i) if callable(self.paths) else self.paths[i]

    def _paths(self, indices):
        return _unique(self._path(i) for i in indices)

    # -- telling fusefs -----------------------------------------------------

    def _paths_of(self, epoch):
        return self._paths(self.order(epoch))

    def _begin(self, epoch, start):
        self._pub.begin(epoch, start, self._paths_of)

    def _publish_next(self, epoch):
        if self.publish_next and self.predictable():
            self._pub.queue(epoch, self._paths_of)

    def set_epoch(self, epoch, start=0):
        """Like DistributedSampler.set_epoch(); also publishes this epoch's
        and the next epoch's order and marks the start of @epoch (@start:
        indices already consumed, when resuming)."""
        self.epoch = int(epoch)
        self.start = int(start)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)
        self._begin(self.epoch, self.start)
        self._publish_next(self.epoch + 1)
        self._begun = self.epoch
        self._iterated = False
        self._yielded = 0           # state_dict(): not the last epoch's count

    def state_dict(self):
        """{"epoch", "start"}: where an iteration stopped (torchdata's
        StatefulDataLoader calls this)."""
        return {"epoch": self.epoch, "start": self.start + self._yielded}

    def load_state_dict(self, state):
        """Resume: the next iteration continues @state's epoch."""
        self.set_epoch(state["epoch"], state.get("start", 0))

    # -- the sampler --------------------------------------------------------

    def __len__(self):
        return max(len(self.sampler) - self.start, 0)

    def __iter__(self):
        if self._begun != self.epoch:
            if self._iterated:      # no set_epoch(): the next epoch
                self.epoch += 1
                self.start = 0
                if hasattr(self.sampler, "set_epoch"):
                    self.sampler.set_epoch(self.epoch)
            self._begin(self.epoch, self.start)
            self._publish_next(self.epoch + 1)
        self._begun = None
        self._iterated = True
        indices = self.order(self.epoch)[self.start:]
        self._yielded = 0
        for i in indices:
            self._yielded += 1
            yield i


def shard_order(shards, epoch, seed=0, rank=0, world_size=1):
    """The shards of @rank in @epoch: all @shards shuffled by @seed + @epoch
    (the same on every rank), then every @world_size-th from @rank."""
    order = list(shards)
    random.Random(seed * 1000003 + epoch).shuffle(order)
    return order[rank::world_size]


class ShardList:
    """WebDataset without a sampler: this decides each epoch's shard order
    (seeded, per rank), publishes it and the next one, and returns the
    shards as paths under the mount for wds.WebDataset(...,
    shardshuffle=False).  webdataset itself is never imported.

        shards = ShardList("/mnt/data", names, seed=1, rank=r, world_size=w)
        for e in range(epochs):
            ds = wds.WebDataset(shards.epoch(e), shardshuffle=False)

    @shards are paths relative to @mount (or absolute below it).  Best
    effort unless @strict."""

    def __init__(self, mount, shards, seed=0, name=None, rank=None, world_size=None,
                 strict=False):
        self.mount = mount
        self.shards = [_rel(mount, s) for s in shards]
        self.seed = seed
        self.rank = rank if rank is not None else _rank_or(0)
        self.world_size = world_size or _world_size_or(1)
        self.name = name or (f"rank{rank}" if rank is not None else list_name())
        self._pub = _Publisher(mount, self.name, strict)

    def order(self, epoch):
        """This rank's shards of @epoch, relative to the mount."""
        return shard_order(self.shards, epoch, self.seed, self.rank, self.world_size)

    def epoch(self, epoch, start=0):
        """Begin @epoch (its first @start shards already read) and return its
        shards as paths under the mount, from @start on."""
        self._pub.begin(epoch, start, self.order)
        self._pub.queue(epoch + 1, self.order)
        return [os.path.join(self.mount, s) for s in self.order(epoch)[start:]]


def _rank_or(default):
    name = list_name()
    return int(name[4:]) if name.startswith("rank") else default


def _world_size_or(default):
    if torch is not None:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                return dist.get_world_size()
        except Exception:
            pass
    ws = os.environ.get("WORLD_SIZE", "")
    return int(ws) if ws.isdigit() and int(ws) > 0 else default


def publish_shards(mount, shards, name="default", epoch=None):
    """A plain list of shard paths in read order (raises like publish())."""
    return publish(mount, shards, name, epoch=epoch)


# -- samples inside big files: np.memmap token datasets ---------------------

_MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
_MEGATRON_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64",
                    6: "float64", 7: "float32", 8: "uint16"}


def read_megatron_idx(path):
    """A Megatron-LM .idx (MMapIndexedDataset, version 1): (dtype name,
    sizes, pointers): the token count and byte offset in the .bin of each
    sequence (numpy arrays).  Raises ValueError on another format."""
    import numpy as np
    with open(path, "rb") as f:
        head = f.read(9 + 8 + 1 + 8 + 8)
    if len(head) < 34 or head[:9] != _MEGATRON_MAGIC:
        raise ValueError(f"{path}: not a Megatron .idx (magic)")
    version = int.from_bytes(head[9:17], "little")
    code = head[17]
    count = int.from_bytes(head[18:26], "little")
    if version != 1 or code not in _MEGATRON_DTYPES:
        raise ValueError(f"{path}: .idx version {version}, dtype code {code}")
    sizes = np.memmap(path, dtype=np.int32, mode="r", offset=34, shape=(count,))
    pointers = np.memmap(path, dtype=np.int64, mode="r", offset=34 + 4 * count,
                         shape=(count,))
    return _MEGATRON_DTYPES[code], sizes, pointers


def memmap_random(path, dtype):
    """np.memmap of @path (read only) with madvise(MADV_RANDOM): each sample
    read is a read of its own pages, not the kernel's read-around (what
    fusefs sees as the reader's progress through a list of ranges)"""
    import mmap
    import numpy as np
    arr = np.memmap(path, dtype=dtype, mode="r")
    mm = getattr(arr, "_mmap", None)
    if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        try:
            mm.madvise(mmap.MADV_RANDOM)
        except OSError:
            pass
    return arr


class TokenRanges:
    """The samples of Megatron-style token files as byte ranges: sample k
    of a file is tokens [k * seq_len, (k + 1) * seq_len + 1) of its .bin (a
    GPT sample: seq_len inputs and the next token), samples of all @prefixes
    numbered one after the other.  An item is (path of the .bin, offset,
    length): a sequence for PrefetchingSampler(paths=...) and a dataset
    size for a sampler (len()).

    @prefixes: paths (relative to @mount or absolute below it) without
    .bin/.idx; the token count and dtype come from each .idx (Megatron's
    MMapIndexedDataset), or, without one, from @dtype and the .bin's size."""

    def __init__(self, mount, prefixes, seq_len, dtype="uint32"):
        import numpy as np
        self.mount = mount
        self.seq_len = int(seq_len)
        self.files, self.dtypes, self.first = [], [], [0]
        for pre in prefixes:
            bin_path = os.path.join(mount, _rel(mount, pre)) + ".bin"
            idx_path = bin_path[:-4] + ".idx"
            if os.path.exists(idx_path):
                dt, sizes, _ = read_megatron_idx(idx_path)
                tokens = int(np.asarray(sizes, dtype=np.int64).sum())
            else:
                dt = dtype
                tokens = os.path.getsize(bin_path) // np.dtype(dt).itemsize
            n = max((tokens - 1) // self.seq_len, 0)
            self.files.append(bin_path)
            self.dtypes.append(np.dtype(dt))
            self.first.append(self.first[-1] + n)

    def __len__(self):
        return self.first[-1]

    def locate(self, i):
        """(file number, token offset) of sample @i"""
        import bisect
        if not 0 <= i < len(self):
            raise IndexError(i)
        f = bisect.bisect_right(self.first, i) - 1
        return f, (i - self.first[f]) * self.seq_len

    def __getitem__(self, i):
        f, tok = self.locate(i)
        size = self.dtypes[f].itemsize
        return (self.files[f], tok * size, (self.seq_len + 1) * size)

    def memmap(self, f):
        """file @f's tokens as an np.memmap (MADV_RANDOM)"""
        return memmap_random(self.files[f], self.dtypes[f])
