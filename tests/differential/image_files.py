"""Image files from a seed, for the differential tests of the decoders (images.py) and of ImageFolder's transforms
(transforms.py), and the C++ side's runner (image_probe).

PNG: every colour type at every bit depth the format allows (grey 1/2/4/8/16, RGB 8/16, palette 1/2/4/8, grey+alpha
8/16, RGBA 8/16), with or without tRNS (palette: an alpha per entry or one transparent entry), gAMA, sRGB or iCCP
(a real sRGB profile from Pillow's ImageCms, or bytes that are no profile), tEXt, Adam7 interlacing, random filters
per row and IDAT split at random. Pillow writes what it can (not interlaced; modes 1, L, I;16, RGB, P at 1/2/4/8
bits, LA, RGBA); the others come from png_file below, a PNG writer written from the specification, so that every
colour type and depth is read back by Pillow and by us.
JPEG: Pillow's encoder (its libjpeg-turbo): grey, colour at 4:4:4, 4:2:2 and 4:2:0, colour without the YCbCr
transform (keep_rgb), CMYK, baseline or progressive, optimised Huffman tables or not, restart markers every few
blocks or rows, quality 1 to 100.
Content: noise, gradients, flat areas and stripes, at sizes 1 to 64 mostly and up to 320."""
import argparse
import contextlib
import io
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from PIL import Image, ImageCms, PngImagePlugin

_SRGB_PROFILE = None


def srgb_profile():
    global _SRGB_PROFILE
    if _SRGB_PROFILE is None:
        _SRGB_PROFILE = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    return _SRGB_PROFILE


def random_size(rng, small=64, large=320):
    if rng.random() < 0.8:
        return rng.randint(1, small), rng.randint(1, small)
    return rng.randint(1, large), rng.randint(1, large)


def samples(rng, w, h, channels, maxval):
    """h rows of w pixels of `channels` values in 0..maxval: noise, a gradient, flat or stripes, per channel."""
    kinds = [rng.choice(["noise", "gradient", "flat", "stripes", "low"]) for _ in range(channels)]
    params = [(rng.random() * 3, rng.random() * 3, rng.randint(0, maxval), rng.randint(1, 7)) for _ in range(channels)]
    rows = []
    for y in range(h):
        row = []
        for x in range(w):
            for c in range(channels):
                kind = kinds[c]
                a, b, base, period = params[c]
                if kind == "noise":
                    v = rng.randint(0, maxval)
                elif kind == "gradient":
                    v = int(base + (a * x + b * y) * (maxval + 1) / 64) % (maxval + 1)
                elif kind == "flat":
                    v = base
                elif kind == "stripes":
                    v = maxval if (x // period + y // period) % 2 else 0
                else:  # small values: for 16-bit samples, the range where Pillow's 16-bit grey conversion clips
                    v = rng.randint(0, min(maxval, 300))
                row.append(v)
        rows.append(row)
    return rows


# ---- A PNG writer from the specification (ISO/IEC 15948), for what Pillow does not write ----
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def _chunk(cid, data):
    return struct.pack(">I", len(data)) + cid + data + struct.pack(">I", zlib.crc32(cid + data) & 0xFFFFFFFF)


def _pack_row(row, depth):
    if depth == 16:
        return b"".join(struct.pack(">H", v) for v in row)
    if depth == 8:
        return bytes(row)
    out, acc, bits = bytearray(), 0, 0
    for v in row:
        acc = (acc << depth) | v
        bits += depth
        if bits == 8:
            out.append(acc)
            acc, bits = 0, 0
    if bits:
        out.append(acc << (8 - bits))
    return bytes(out)


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _filter(raw, prev, bpp, ftype):
    out = bytearray([ftype])
    for i, x in enumerate(raw):
        a = raw[i - bpp] if i >= bpp else 0
        b = prev[i] if prev else 0
        c = prev[i - bpp] if prev and i >= bpp else 0
        pred = [0, a, b, (a + b) // 2, _paeth(a, b, c)][ftype]
        out.append((x - pred) & 0xFF)
    return bytes(out)


def png_file(rng, w, h, depth, ctype, rows, interlace=False, palette=None, trns=None, pre_plte=()):
    """PNG bytes of `rows` (h lists of w * channels samples); chunks in `pre_plte` go before PLTE."""
    ch = _CHANNELS[ctype]
    bpp = max(1, ch * depth // 8)
    passes = _ADAM7 if interlace else [(0, 0, 1, 1)]
    data = bytearray()
    for x0, y0, dx, dy in passes:
        xs = range(x0, w, dx)
        ys = range(y0, h, dy)
        if not xs or not ys:
            continue
        prev = None
        for y in ys:
            raw = _pack_row([rows[y][x * ch + c] for x in xs for c in range(ch)], depth)
            data += _filter(raw, prev, bpp, rng.randint(0, 4))
            prev = raw
    z = zlib.compress(bytes(data), rng.randint(0, 9))
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
    for cid, body in pre_plte:
        out += _chunk(cid, body)
    if palette is not None:
        out += _chunk(b"PLTE", bytes(v for rgb in palette for v in rgb))
    if trns is not None:
        out += _chunk(b"tRNS", trns)
    cut = sorted(rng.sample(range(1, len(z)), min(rng.randint(0, 3), len(z) - 1))) if len(z) > 1 else []
    for a, b in zip([0] + cut, cut + [len(z)]):
        out += _chunk(b"IDAT", z[a:b])
    return out + _chunk(b"IEND", b"")


# Pillow's modes for the PNGs it writes: (depth, colour type) -> mode (palette: mode P and bits=depth).
_PILLOW_WRITES = {(1, 0): "1", (8, 0): "L", (16, 0): "I;16", (8, 2): "RGB", (8, 4): "LA", (8, 6): "RGBA",
                  (1, 3): "P", (2, 3): "P", (4, 3): "P", (8, 3): "P"}
PNG_KINDS = [(d, 0) for d in (1, 2, 4, 8, 16)] + [(8, 2), (16, 2)] + [(d, 3) for d in (1, 2, 4, 8)] + \
            [(8, 4), (16, 4), (8, 6), (16, 6)]


def random_png(rng):
    """(bytes, description) of a random PNG."""
    depth, ctype = rng.choice(PNG_KINDS)
    w, h = random_size(rng)
    interlace = rng.random() < 0.3
    ch = _CHANNELS[ctype]
    maxval = (1 << depth) - 1
    palette = None
    if ctype == 3:
        n = rng.randint(1, 1 << depth)
        palette = [(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(n)]
        rows = samples(rng, w, h, 1, n - 1)
    else:
        rows = samples(rng, w, h, ch, maxval)
    trns = None
    if rng.random() < 0.3 and ctype in (0, 2, 3):
        if ctype == 3:
            trns = bytes(rng.randrange(256) for _ in range(rng.randint(1, len(palette))))
            if rng.random() < 0.5:  # one transparent entry, the others opaque (Pillow's "transparency" index)
                t = rng.randrange(len(palette))
                trns = b"\xff" * t + b"\x00"
        else:
            trns = b"".join(struct.pack(">H", rng.randint(0, maxval)) for _ in range(1 if ctype == 0 else 3))
    pre = []
    colour = rng.choice(["none", "gAMA", "gAMA", "sRGB", "iCCP", "junk iCCP"])
    if colour == "gAMA":
        pre.append((b"gAMA", struct.pack(">I", rng.choice([100000, 45455, 55556, 22727, rng.randint(1000, 300000)]))))
    elif colour == "sRGB":
        pre.append((b"gAMA", struct.pack(">I", 45455)))
        pre.append((b"sRGB", bytes([rng.randrange(4)])))
    elif colour != "none":
        profile = srgb_profile() if colour == "iCCP" else bytes(rng.randrange(256) for _ in range(200))
        pre.append((b"iCCP", b"icc\x00\x00" + zlib.compress(profile)))
    if rng.random() < 0.2:
        pre.append((b"tEXt", b"Comment\x00seeded"))
    desc = f"PNG {w}x{h} depth {depth} colour type {ctype}{' interlaced' if interlace else ''}" \
           f"{' tRNS' if trns else ''} {colour}"
    mode = _PILLOW_WRITES.get((depth, ctype))
    if mode and not interlace and rng.random() < 0.75:
        return _pillow_png(rng, w, h, depth, mode, rows, palette, trns, pre), desc + " (Pillow's encoder)"
    return png_file(rng, w, h, depth, ctype, rows, interlace, palette, trns, pre), desc + " (png_file)"


def _pillow_png(rng, w, h, depth, mode, rows, palette, trns, pre):
    flat = [v for row in rows for v in row]
    if mode == "I;16":
        im = Image.frombytes("I;16", (w, h), b"".join(struct.pack(">H", v) for v in flat), "raw", "I;16B")
    elif mode == "1":
        im = Image.frombytes("L", (w, h), bytes(255 * v for v in flat)).convert("1", dither=Image.Dither.NONE)
    else:
        im = Image.frombytes(mode, (w, h), bytes(flat))
        if mode == "P":
            im.putpalette(bytes(v for rgb in palette for v in rgb))
    kw = {"compress_level": rng.randint(0, 9)}
    if mode == "P":
        kw["bits"] = depth
    info = PngImagePlugin.PngInfo()
    for cid, body in pre:
        if cid == b"iCCP":
            kw["icc_profile"] = zlib.decompress(body[5:])
        else:
            info.add(cid, body)
    kw["pnginfo"] = info
    if trns is not None:
        if mode == "P":
            one = trns[-1:] == b"\x00" and set(trns[:-1]) <= {255}  # one transparent entry: Pillow takes its index
            kw["transparency"] = len(trns) - 1 if one else trns
        elif mode == "RGB":
            kw["transparency"] = struct.unpack(">HHH", trns)
        else:
            kw["transparency"] = struct.unpack(">H", trns)[0]
    out = io.BytesIO()
    im.save(out, format="PNG", **kw)
    return out.getvalue()


@contextlib.contextmanager
def _quiet_stderr():
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def random_jpeg(rng):
    """(bytes, description) of a random JPEG written by Pillow."""
    w, h = random_size(rng)
    kind = rng.choice(["L", "RGB", "RGB", "RGB", "keep_rgb", "CMYK"])
    mode = "RGB" if kind == "keep_rgb" else kind
    ch = len(mode)
    im = Image.frombytes(mode, (w, h), bytes(v for row in samples(rng, w, h, ch, 255) for v in row))
    kw = {"quality": rng.randint(1, 100), "progressive": rng.random() < 0.4, "optimize": rng.random() < 0.3}
    if mode == "RGB":
        kw["keep_rgb"] = kind == "keep_rgb"
        kw["subsampling"] = 0 if kw["keep_rgb"] else rng.choice([0, 1, 2])  # Pillow refuses RGB subsampled
    r = rng.random()
    if r < 0.2:
        kw["restart_marker_blocks"] = rng.randint(1, 8)
    elif r < 0.35:
        kw["restart_marker_rows"] = rng.randint(1, 3)
    out = io.BytesIO()
    try:
        with _quiet_stderr():  # libjpeg's own message of the failure below
            im.save(out, format="JPEG", **kw)
    except OSError:
        # Pillow's buffer for optimised or progressive files is a guess (width x height bytes) that noise at a high
        # quality overflows ("Suspension not allowed here"): such a file is written baseline.
        kw["progressive"] = kw["optimize"] = False
        out = io.BytesIO()
        im.save(out, format="JPEG", **kw)
    opts = " ".join(f"{k}={v}" for k, v in sorted(kw.items()))
    return out.getvalue(), f"JPEG {w}x{h} {kind} {opts}"


def pillow_rgb(path):
    """The reference: what torchvision's ImageFolder loader (pil_loader) makes of a file."""
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def run_probe(probe, mode, listing, outdir):
    """Runs `image_probe MODE LISTING OUTDIR`; returns {index: (shape or None, error or None)}."""
    p = subprocess.run([probe, mode, listing, outdir], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"image_probe failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    results = {}
    for line in p.stdout.splitlines():
        i, status, rest = line.split(" ", 2)
        results[int(i)] = ([int(v) for v in rest.split()], None) if status == "ok" else (None, rest)
    return results


def seed_range(text):
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)


def drive(name, doc, script, compare, stats, summary):
    """The drivers' common part. Command line: --probe IMAGE_PROBE, --seeds A-B or --random SECONDS --start N (seeds
    from N in batches of 20 until SECONDS have passed), --keep DIR (write the files there and keep them). For each
    batch, compare(seeds, probe, directory, stats) returns None or (seed, message) of its first difference: printed
    with the command that reproduces it, exit 1. At the end, "differential.NAME: " + summary(stats) and the time."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--seeds")
    ap.add_argument("--random", type=float)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--keep", help="write the files here and keep them (default: a temporary directory)")
    a = ap.parse_args()
    if (a.seeds is None) == (a.random is None):
        ap.error("give --seeds A-B or --random SECONDS")
    t0 = time.time()
    batches = [list(seed_range(a.seeds))] if a.seeds else None
    next_seed = a.start
    while True:
        if batches is not None:
            if not batches:
                break
            batch = batches.pop()
        else:
            if time.time() - t0 >= a.random:
                break
            batch = list(range(next_seed, next_seed + 20))
            next_seed += 20
        work = a.keep or tempfile.mkdtemp(prefix=f"differential_{name}_")
        os.makedirs(work, exist_ok=True)
        found = compare(batch, a.probe, work, stats)
        if found:
            seed, message = found
            print(f"differential.{name}: difference at seed {seed}: {message}")
            print(f"reproduce: {sys.executable} {os.path.abspath(script)} --probe {os.path.abspath(a.probe)} "
                  f"--seeds {seed}-{seed} --keep /tmp/differential_{name}_{seed}")
            sys.exit(1)
        if not a.keep:
            shutil.rmtree(work)
    print(f"differential.{name}: {summary(stats)}, {time.time() - t0:.1f} s "
          f"(seeds {a.seeds or f'{a.start}-{next_seed - 1}'})")
