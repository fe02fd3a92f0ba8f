#!/usr/bin/env python3
"""differential.samplers: over all ranks, every epoch's samples are the data set exactly once (evaluation) or the
documented padding (training), every epoch, and after a mid-epoch resume too.

A seed draws a data set of 2 to 40 samples, a world size of 1 to 3, batch sizes, 2 or 3 epochs, a training loader
(TensorLoader shuffled or not; from_torch with LibTorch's DistributedRandomSampler or DistributedSequentialSampler,
padded, or with data::UnrepeatedDistributedSampler, which fit must refuse when its shards are uneven) and a
validation loader (from_torch with data::UnrepeatedDistributedSampler, shuffled or not; TensorLoader;
DistributedSequentialSampler padded). The C++ side (differential_ranks, tests/differential/ranks.cpp) trains it with
fit(train, val) and checkpoint::Disk, stops at a step inside an epoch (max_steps), resumes from the checkpoint in a
new Trainer, and records the sample ids every rank trained and evaluated in each epoch. This driver checks, joining
the stopped and the resumed run:
  - training, TensorLoader: each rank's samples are torch.utils.data.DistributedSampler's indices for that rank
    (drop_last False: padded by wrapping) mapped through one permutation of the data set (the identity unshuffled);
  - training, DistributedSequentialSampler: LibTorch's contiguous shards, wrapped at the end;
  - training, DistributedRandomSampler: every sample at least once, ceil(n / world) per rank, the excess repeated;
  - evaluation: every sample exactly once over the ranks (a padded loader's padding left out); with
    UnrepeatedDistributedSampler, each rank's ids are Lightning's UnrepeatedDistributedSampler's, in order.

  samplers.py --binary PATH --seeds A-B                 the seeds A to B (the quick tier: differential.samplers)
  samplers.py --binary PATH --random SECONDS --start N  fresh seeds from N for about SECONDS (.ci/run)

Run it with a python that has lightning (the venv of the lightning.venv test). On a difference it prints the
first one, the seed and the command that reproduces it, and exits 1; at the end it prints how many inputs it compared.
"""
import collections
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile

import seed_loop

from torch.utils.data import DistributedSampler
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler

TRAIN = ["tensor", "tensor", "random_padded", "sequential_padded", "unrepeated"]
VAL = ["unrepeated", "unrepeated", "tensor", "sequential_padded"]


def draw(seed):
    rng = random.Random(seed)
    world = rng.choice([1, 2, 3])
    n = rng.randint(max(2, world), 40)
    batch = rng.randint(1, 6)
    per_rank = -(-n // world)
    steps = -(-per_rank // batch)
    epochs = rng.choice([2, 3])
    inside = [s for s in range(1, epochs * steps) if s % steps != 0]  # a step inside an epoch
    c = {"seed": seed, "world": world, "n": n, "batch": batch, "val_batch": rng.randint(1, 7), "epochs": epochs,
         "train_loader": rng.choice(TRAIN), "val_loader": rng.choice(VAL), "shuffle": rng.random() < 0.7,
         "val_shuffle": rng.random() < 0.5, "loader_seed": rng.randint(0, 100), "workers": rng.choice([0, 0, 1])}
    if "unrepeated" in (c["val_loader"], c["train_loader"]):
        c["loader_seed"] = 0  # Lightning seeds its order with the epoch alone
    c["stop_step"] = rng.choice(inside) if inside else 1
    return c


class Dataset:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def epoch_ids(ranks, what, epoch):
    """Each rank's ids of `epoch`, the stopped run's then the resumed run's."""
    out = []
    for r in ranks:
        ids = []
        for run in ("stopped", "resumed"):
            ids += r[run].get(what, {}).get(str(epoch), [])
        out.append(ids)
    return out


def check_training(c, shards, epoch):
    n, w = c["n"], c["world"]
    kind = c["train_loader"]
    if kind == "tensor":
        # DistributedSampler's layout over one permutation P of the data set: shard r, position i holds
        # P[DistributedSampler(rank r)[i]]; P must be consistent over the ranks and a permutation (the identity when
        # the loader does not shuffle).
        perm = {}
        for r in range(w):
            layout = list(DistributedSampler(Dataset(n), num_replicas=w, rank=r, shuffle=False, drop_last=False))
            if len(layout) != len(shards[r]):
                return f"rank {r} trained {len(shards[r])} samples, DistributedSampler gives {len(layout)}"
            for pos, got in zip(layout, shards[r]):
                if perm.setdefault(pos, got) != got:
                    return f"rank {r}: position {pos} of the epoch's order holds {perm[pos]} and {got}"
        if sorted(perm.values()) != list(range(n)):
            return f"the epoch's order is not a permutation of the data set: {sorted(perm.items())}"
        if not c["shuffle"] and any(perm[i] != i for i in range(n)):
            return "an unshuffled TensorLoader's order is not the data set's"
        return None
    per_rank = -(-n // w)
    if kind == "unrepeated":  # a data set that divides by the ranks: Lightning's shards, equal
        for r in range(w):
            s = UnrepeatedDistributedSampler(Dataset(n), num_replicas=w, rank=r, shuffle=c["shuffle"])
            s.set_epoch(epoch)  # the Trainer gives the training loader the epoch
            want = list(s)
            if shards[r] != want:
                return f"rank {r} trained {shards[r]}, Lightning's UnrepeatedDistributedSampler gives {want}"
        return None
    if kind == "sequential_padded":
        for r in range(w):
            want = [(r * per_rank + i) % n for i in range(per_rank)]
            if shards[r] != want:
                return f"rank {r} trained {shards[r]}, LibTorch's DistributedSequentialSampler gives {want}"
        return None
    counts = collections.Counter(i for s in shards for i in s)
    if any(len(s) != per_rank for s in shards):
        return f"shards of {[len(s) for s in shards]} samples, expected {per_rank} each"
    if sorted(counts) != list(range(n)) or sum(counts.values()) != per_rank * w:
        return f"the ranks trained {sorted(counts.items())}: not every sample with {per_rank * w - n} repeated"
    return None


def check_evaluation(c, shards):
    n, w = c["n"], c["world"]
    all_ids = sorted(i for s in shards for i in s)
    if all_ids != list(range(n)):
        missing = sorted(set(range(n)) - set(all_ids))
        twice = sorted(i for i, k in collections.Counter(all_ids).items() if k > 1)
        return f"the ranks evaluated {len(all_ids)} samples of {n}: missing {missing}, more than once {twice}"
    if c["val_loader"] == "unrepeated":
        for r in range(w):
            s = UnrepeatedDistributedSampler(Dataset(n), num_replicas=w, rank=r, shuffle=c["val_shuffle"])
            want = list(s)  # the validation loader's epoch stays 0
            if shards[r] != want:
                return f"rank {r} evaluated {shards[r]}, Lightning's UnrepeatedDistributedSampler gives {want}"
    return None


def compare(c, ranks):
    if c["train_loader"] == "unrepeated" and c["n"] % c["world"]:
        # Uneven shards would make the ranks step different numbers of times: fit refuses them by name.
        for r, res in enumerate(ranks):
            if "UnrepeatedDistributedSampler" not in res.get("error", "") or "policytrain::" not in res["error"]:
                return f"rank {r}: expected fit to refuse training on uneven shards, got {json.dumps(res)[:300]}", 0
        return None, 1
    for r, res in enumerate(ranks):
        if "error" in res:
            return f"rank {r}: {res['error']}", 0
    checked = 0
    for e in range(c["epochs"]):
        why = check_training(c, epoch_ids(ranks, "trained", e), e)
        if why:
            return f"epoch {e}, training: {why}", checked
        checked += 1
        # Each validation pass alone (the stopped run validates where max_steps stopped it, inside an epoch, and the
        # resumed run validates that epoch again at its end).
        for run in ("stopped", "resumed"):
            if str(e) not in ranks[0][run].get("evaluated", {}):
                continue
            why = check_evaluation(c, [r[run].get("evaluated", {}).get(str(e), []) for r in ranks])
            if why:
                return f"epoch {e}, validation of the {run} run: {why}", checked
            checked += 1
    return None, checked


def reproduce(seed):
    argv, skip = [sys.executable, os.path.abspath(__file__)], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a in ("--seeds", "--random", "--start"):
            skip = True
        else:
            argv.append(a)
    return shlex.join(argv + ["--seeds", f"{seed}-{seed}"])


def check(binary, seeds, totals):
    cases = [draw(s) for s in seeds]
    with tempfile.TemporaryDirectory(prefix="policytrain-diff-samplers-") as tmp:
        for world in sorted({c["world"] for c in cases}):
            group = [c for c in cases if c["world"] == world]
            path, out = os.path.join(tmp, f"cases{world}.json"), os.path.join(tmp, f"out{world}")
            with open(path, "w") as f:
                json.dump(group, f)
            p = subprocess.run([binary, "samplers", "--nproc", str(world), path, out], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"differential.samplers: differential_ranks on {world} ranks exited {p.returncode}: "
                      f"{p.stderr[-2000:]}\n  reproduce: {reproduce(group[0]['seed'])}")
                return False
            per_rank = []
            for r in range(world):
                with open(f"{out}.rank{r}.json") as f:
                    per_rank.append(json.load(f))
            for i, c in enumerate(group):
                diff, checked = compare(c, [pr[i] for pr in per_rank])
                totals["inputs"] += 1
                totals["values"] += checked
                if diff:
                    print(f"differential.samplers: seed {c['seed']}: {diff}\n  case: {json.dumps(c)}\n"
                          f"  reproduce: {reproduce(c['seed'])}")
                    return False
    return True


def main():
    return seed_loop.drive("samplers", __doc__, check, 12,
                           lambda t: f"{t['values']} training epochs and validation passes")


if __name__ == "__main__":
    sys.exit(main())
