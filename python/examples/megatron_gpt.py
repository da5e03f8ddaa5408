"""A minimal Megatron-style GPT dataset over a fusefs mount: token files
(.bin + .idx, Megatron-LM's MMapIndexedDataset format) read through
np.memmap at random sample offsets, the epoch's sample order published to
fusefs as byte ranges so that the samples are on local disk before the
loader reaches them.

    python3 megatron_gpt.py /mnt/data tokens/train_00 tokens/train_01 \\
        --seq-len 2048 --epochs 2 --workers 4

Each sample is seq_len + 1 tokens (inputs and the next-token labels), as
Megatron's GPTDataset builds them; a RandomSampler draws the order, seeded
per epoch by PrefetchingSampler, which publishes epoch e and e + 1 and
marks each epoch's start (docs/epochs.md, "Sample ranges")."""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fusefs_prefetch as fp  # noqa: E402


class GPTDataset:
    """samples of TokenRanges as (inputs, labels) int64 arrays"""

    def __init__(self, ranges):
        self.ranges = ranges
        self._maps = {}             # per worker process, opened lazily

    def __len__(self):
        return len(self.ranges)

    def __getitem__(self, i):
        f, tok = self.ranges.locate(i)
        if f not in self._maps:
            self._maps[f] = self.ranges.memmap(f)
        seq = np.asarray(self._maps[f][tok:tok + self.ranges.seq_len + 1], dtype=np.int64)
        return seq[:-1], seq[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mount")
    ap.add_argument("prefixes", nargs="+", help="token files without .bin/.idx")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--samples", type=int, default=0, help="per epoch (0: all)")
    ap.add_argument("--name", default=None, help="list name (default: rank/pid)")
    a = ap.parse_args(argv)

    import torch
    from torch.utils.data import DataLoader, RandomSampler

    ranges = fp.TokenRanges(a.mount, a.prefixes, a.seq_len)
    ds = GPTDataset(ranges)
    base = RandomSampler(ds, num_samples=a.samples or None)
    sampler = fp.PrefetchingSampler(base, paths=ranges, mount=a.mount, name=a.name)
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        t0, n, total = time.time(), 0, 0
        for x, y in loader:
            n += x.shape[0]
            total += int(torch.sum(x[:, 0]))      # touch the data
        print(f"epoch {epoch}: {n} samples in {time.time() - t0:.2f} s "
              f"(checksum {total})")
        print(fp.status(a.mount, sampler.name).split("# last publish")[0].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
