"""Differential test of the image decoders (include/policytrain/data/image_decode.hpp) against Pillow.

Each seed writes 4 PNGs and 2 JPEGs (tests/differential/image_files.py: every PNG colour type and bit depth, tRNS,
gAMA/sRGB/iCCP, interlaced; JPEG grey, colour at every subsampling, keep_rgb, CMYK, progressive, restart markers);
image_probe decodes them with data::read_image, and the reference is Pillow's Image.open(f).convert("RGB"), what
torchvision's ImageFolder loader returns. A PNG must decode to the same bytes; a JPEG to the same size and to bytes
within JPEG_TOLERANCE per channel (Pillow's wheel bundles its own libjpeg-turbo; docs/your-data.md has the measured
difference).
Usage: images.py --probe IMAGE_PROBE (--seeds A-B | --random SECONDS --start N) [--keep DIR]
On a difference: prints the first one, the seed and the command that reproduces it, and exits 1. At the end: how many
inputs were compared, and the JPEG differences seen."""
import os
import random
import warnings

import image_files as gen

# Pillow's advice to convert palette images with tRNS to RGBA: the reference is what convert("RGB") does anyway.
warnings.filterwarnings("ignore", message="Palette images with Transparency")

JPEG_TOLERANCE = 1
PNGS_PER_SEED, JPEGS_PER_SEED = 4, 2


def inputs(seed):
    rng = random.Random(seed)
    return [gen.random_png(rng) + (".png",) for _ in range(PNGS_PER_SEED)] + \
           [gen.random_jpeg(rng) + (".jpg",) for _ in range(JPEGS_PER_SEED)]


def compare(seeds, probe, work, stats):
    """Writes the seeds' files, decodes them both ways; returns (seed, message) of the first difference or None."""
    files = []
    for s in seeds:
        for k, (data, desc, ext) in enumerate(inputs(s)):
            path = os.path.join(work, f"s{s}_{k}{ext}")
            with open(path, "wb") as f:
                f.write(data)
            files.append((s, path, desc))
    listing = os.path.join(work, "list.txt")
    with open(listing, "w") as f:
        f.write("".join(p + "\n" for _, p, _ in files))
    ours = gen.run_probe(probe, "decode", listing, work)
    for i, (s, path, desc) in enumerate(files):
        shape, error = ours[i]
        try:
            ref = gen.pillow_rgb(path)
        except Exception as e:  # noqa: BLE001 - any refusal of Pillow's
            ref, ref_error = None, f"{type(e).__name__}: {e}"
        where = f"{desc}, file {path}"
        if ref is None:
            if error is None:
                return s, f"{where}: Pillow refuses it ({ref_error}), we decode it"
            stats["refused"] += 1
            continue
        if error is not None:
            return s, f"{where}: we refuse it ({error}), Pillow decodes it ({ref.size[0]}x{ref.size[1]})"
        if tuple(shape) != ref.size:
            return s, f"{where}: we decode {shape[0]}x{shape[1]}, Pillow {ref.size[0]}x{ref.size[1]}"
        with open(os.path.join(work, f"{i}.rgb"), "rb") as f:
            got = f.read()
        want = ref.tobytes()
        jpeg = path.endswith(".jpg")
        worst, first = 0, None
        for k, (a, b) in enumerate(zip(got, want)):
            d = abs(a - b)
            if d > worst:
                worst = d
                if first is None or d > JPEG_TOLERANCE:
                    first = k
        stats["compared"] += 1
        if jpeg:
            stats["jpeg"] += 1
            stats["jpeg_worst"] = max(stats["jpeg_worst"], worst)
            stats["jpeg_exact"] += worst == 0
            stats["jpeg_bytes"] += len(want)
            stats["jpeg_bytes_off"] += sum(a != b for a, b in zip(got, want))
        else:
            stats["png"] += 1
        if worst > (JPEG_TOLERANCE if jpeg else 0):
            px, c = divmod(first, 3)
            y, x = divmod(px, ref.size[0])
            return s, (f"{where}: pixel (x={x}, y={y}) channel {'RGB'[c]}: ours {got[first]}, Pillow {want[first]} "
                       f"(largest difference {worst}; allowed {JPEG_TOLERANCE if jpeg else 0})")
    return None


def summary(stats):
    jpeg_rate = stats["jpeg_bytes_off"] / max(1, stats["jpeg_bytes"])
    return (f"{stats['compared']} inputs compared ({stats['png']} PNG equal, {stats['jpeg']} JPEG: "
            f"{stats['jpeg_exact']} equal, largest difference {stats['jpeg_worst']}, {100 * jpeg_rate:.3f}% of bytes "
            f"off), {stats['refused']} refused by both, 0 differences")


if __name__ == "__main__":
    gen.drive("images", __doc__, __file__, compare,
              dict(compared=0, png=0, jpeg=0, jpeg_exact=0, jpeg_worst=0, jpeg_bytes=0, jpeg_bytes_off=0, refused=0),
              summary)
