"""Differential test of data::ImageFolder's sample pipeline (include/policytrain/data/image_folder.hpp) against
torchvision's transforms.v2, on the same decoded image.

Each seed writes one RGB PNG with Pillow (its decode is bit-exact: images.py) at a random size (1 to 96 pixels a
side mostly, up to 400, and 640x480 or 480x640 now and then), and picks a resize (0: none; up- or downscaling; the
shorter side's own size), a crop (0: none; odd and even differences, so the half-pixel rounding of the crop's corner
is hit) and a mean and std per channel. image_probe runs ImageFolder's sample 0 with those options; the reference is
    x = F.to_dtype(F.to_image(Image.open(f).convert("RGB")), torch.float32, scale=True)
    x = F.resize(x, [resize], interpolation=BILINEAR, antialias=True)   # when resize > 0
    x = F.center_crop(x, [crop, crop])                                  # when crop > 0
    x = F.normalize(x, mean, std)
with torchvision.transforms.v2.functional as F. The result must have the same shape and be equal to the bit.
Two departures, documented (docs/your-data.md, "Departures from the reference") and checked as documented:
- a crop larger than the resized image: torchvision pads it with zeros, ImageFolder refuses it with an ImageError
  ("smaller than the crop");
- WIDTH_ONE, a resize to a width of 1 (resize=1 on a portrait image): to_image's tensor is channels-last, and
  LibTorch's antialiased bilinear resize of a channels-last tensor to a width of 1 is wrong (up to 0.48 off; torch
  2.13 and 2.14.1); ImageFolder resizes a contiguous tensor, and equals torchvision's functions on x.contiguous().
Usage: transforms.py --probe IMAGE_PROBE (--seeds A-B | --random SECONDS --start N) [--keep DIR]
On a difference: prints the first one, the seed and the command that reproduces it, and exits 1."""
import os
import random

import numpy as np
import torch
import torchvision
import torchvision.transforms.v2.functional as F
from PIL import Image

import image_files as gen


def case(seed):
    """(width, height, pixel bytes, resize, crop, mean, std) of a seed."""
    rng = random.Random(seed)
    r = rng.random()
    if r < 0.05:
        w, h = rng.choice([(640, 480), (480, 640)])
    else:
        w, h = gen.random_size(rng, 96, 400)
    pixels = rng.randbytes(w * h * 3)
    short = min(w, h)
    r = rng.random()
    resize = 0 if r < 0.2 else short if r < 0.3 else rng.choice([256, 224]) if r < 0.4 else rng.randint(1, 2 * short + 8)
    rw, rh = resized(w, h, resize)
    r = rng.random()
    crop = 0 if r < 0.15 else rng.randint(min(rw, rh) + 1, min(rw, rh) + 4) if r < 0.2 else rng.randint(1, min(rw, rh))
    mean = [round(rng.uniform(0, 1), rng.choice([1, 3, 17])) for _ in range(3)]
    std = [round(rng.uniform(0.05, 1.5), rng.choice([1, 3, 17])) for _ in range(3)]
    return w, h, pixels, resize, crop, mean, std


def reference(path, resize, crop, mean, std, contiguous=False):
    x = F.to_dtype(F.to_image(gen.pillow_rgb(path)), torch.float32, scale=True)
    if contiguous:  # see WIDTH_ONE
        x = x.contiguous()
    if resize:
        x = F.resize(x, [resize], interpolation=F.InterpolationMode.BILINEAR, antialias=True)
    if crop and (crop > x.shape[-1] or crop > x.shape[-2]):
        return None  # torchvision would pad; ImageFolder refuses (the documented departure)
    if crop:
        x = F.center_crop(x, [crop, crop])
    return F.normalize(x, mean, std).as_subclass(torch.Tensor).contiguous()


def compare(seeds, probe, work, stats):
    cases = []
    for s in seeds:
        w, h, pixels, resize, crop, mean, std = case(s)
        root = os.path.join(work, f"s{s}")
        os.makedirs(os.path.join(root, "c"), exist_ok=True)
        path = os.path.join(root, "c", "x.png")
        Image.frombytes("RGB", (w, h), pixels).save(path, compress_level=1)
        cases.append((s, root, path, w, h, resize, crop, mean, std))
    listing = os.path.join(work, "list.txt")
    with open(listing, "w") as f:
        for _, root, _, _, _, resize, crop, mean, std in cases:
            f.write(" ".join([root, str(resize), str(crop)] + [repr(v) for v in mean + std]) + "\n")
    ours = gen.run_probe(probe, "transform", listing, work)
    for i, (s, root, path, w, h, resize, crop, mean, std) in enumerate(cases):
        shape, error = ours[i]
        where = f"{w}x{h} image, resize {resize}, crop {crop}, mean {mean}, std {std}, file {path}"
        want = reference(path, resize, crop, mean, std)
        stats["compared"] += 1
        if want is None:
            if error is None or "smaller than the crop" not in error:
                return s, f"{where}: torchvision pads a crop larger than the image; ImageFolder should refuse it " \
                          f"(docs/your-data.md), got {error or 'a sample'}"
            stats["refused"] += 1
            continue
        if error is not None:
            return s, f"{where}: we refuse it ({error}), torchvision gives {list(want.shape)}"
        if shape != list(want.shape):
            return s, f"{where}: we give {shape}, torchvision {list(want.shape)}"
        got = torch.from_numpy(np.fromfile(os.path.join(work, f"{i}.f32"), dtype=np.float32)).reshape(shape)
        if not torch.equal(got, want) and resize and resized(w, h, resize)[0] == 1 < resized(w, h, resize)[1]:
            if torch.equal(got, reference(path, resize, crop, mean, std, contiguous=True)):
                stats["width_one"] += 1
                continue
        if not torch.equal(got, want):
            diff = (got - want).abs()
            k = int(diff.flatten().argmax())
            c, rest = divmod(k, shape[1] * shape[2])
            y, x = divmod(rest, shape[2])
            return s, (f"{where}: channel {c} pixel (x={x}, y={y}): ours {got.flatten()[k].item()!r}, torchvision "
                       f"{want.flatten()[k].item()!r} (largest difference {diff.max().item():.3g}; "
                       f"{int((diff > 0).sum())} of {diff.numel()} values differ; expected equal)")
        stats["values"] += want.numel()
        if crop:  # a corner at k + 0.5 with k odd: where rounding half to even and half away from zero part
            stats["half_to_even"] += any((d % 2, d // 2 % 2) == (1, 1) for d in (side - crop for side in resized(w, h, resize)))


def resized(w, h, resize):
    """The side lengths after the resize (torchvision's rule: the shorter to `resize`, the longer scaled, truncated)."""
    if not resize:
        return w, h
    return (resize, int(resize * h / w)) if w <= h else (int(resize * w / h), resize)


def summary(stats):
    return (f"{stats['compared']} inputs compared ({stats['values']} values equal, {stats['half_to_even']} crops at a "
            f"corner rounded half to even, {stats['refused']} crops larger than the image refused and "
            f"{stats['width_one']} resizes to a width of 1 correct, as documented), 0 differences "
            f"(torch {torch.__version__}, torchvision {torchvision.__version__})")


if __name__ == "__main__":
    torch.set_num_threads(1)
    gen.drive("transforms", __doc__, __file__, compare,
              dict(compared=0, refused=0, values=0, half_to_even=0, width_one=0), summary)
