"""Writes an image-folder tree with Pillow, and what Pillow and torchvision's ImageFolder rule say of it: the oracle
of tests/unit/test_images.cpp and the data of examples/image_folder.
Usage: make_images.py ROOT [--per-class N] [--size S]
ROOT/tree/<class>/...: PNG (8-bit gray, gray+alpha, RGB, RGBA, palette, palette with transparency) and JPEG (colour,
4:2:0 and 4:4:4, grayscale) files, nested directories, upper-case extensions and a non-image file;
ROOT/expected/<i>.rgb: Pillow's Image.open(f).convert("RGB") bytes of sample i (height*width*3), and
ROOT/expected.json: the classes and the (file, class) list by torchvision's find_classes/make_dataset rule.
ROOT/bad/: a truncated PNG, a corrupt PNG, a truncated JPEG, a corrupt JPEG, a text file named .jpg."""
import json, os, random, sys
from PIL import Image

root = sys.argv[1]
per_class = int(sys.argv[sys.argv.index("--per-class") + 1]) if "--per-class" in sys.argv else 3
size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 40
rng = random.Random(0)
tree = os.path.join(root, "tree")

def pattern(w, h, k):
    """A smooth pattern with some noise, different per k (JPEG has something to compress)."""
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 7 + k * 40) % 256, (y * 5 + k * 90) % 256, ((x + y) * 3 + rng.randrange(16)) % 256)
    return im

kinds = [("png", "L"), ("png", "LA"), ("png", "RGB"), ("png", "RGBA"), ("png", "P"), ("png", "PT"),
         ("jpg", "RGB"), ("JPEG", "RGB444"), ("jpeg", "L")]
classes = ["cat", "Dog", "bird", "zebra_2"]  # sorted by code point: 'Dog' < 'bird' < 'cat' < 'zebra_2'
k = 0
for c in classes:
    for i in range(per_class):
        ext, mode = kinds[k % len(kinds)]
        w, h = size + rng.randrange(-8, 9), size + rng.randrange(-8, 9)
        # Each class its own tint, so that the example has something to learn.
        tint = [(220, 40, 40), (40, 200, 40), (40, 40, 220), (200, 200, 40)][classes.index(c)]
        im = Image.blend(pattern(w, h, k), Image.new("RGB", (w, h), tint), 0.6)
        sub = os.path.join(tree, c, "nested") if i % 4 == 3 else os.path.join(tree, c)
        os.makedirs(sub, exist_ok=True)
        f = os.path.join(sub, f"img_{k:03d}.{ext}")
        if mode == "PT":
            p = im.convert("P", palette=Image.ADAPTIVE, colors=16)
            p.info["transparency"] = 3
            p.save(f, transparency=3)
        elif mode == "P":
            im.convert("P", palette=Image.ADAPTIVE, colors=64).save(f)
        elif mode == "RGBA":
            a = Image.linear_gradient("L").resize((w, h))
            im2 = im.copy(); im2.putalpha(a); im2.save(f)
        elif mode == "LA":
            im.convert("LA").save(f)
        elif mode == "RGB444":
            im.save(f, format="JPEG", quality=90, subsampling=0)
        elif ext.lower() in ("jpg", "jpeg"):
            (im.convert("L") if mode == "L" else im).save(f, format="JPEG", quality=85)
        else:
            im.convert(mode).save(f)
        k += 1
open(os.path.join(tree, "cat", "notes.txt"), "w").write("not an image\n")

# torchvision.datasets.folder: find_classes and make_dataset (IMG_EXTENSIONS cut to the formats decoded here).
def find_classes(d):
    return sorted(e.name for e in os.scandir(d) if e.is_dir())
def make_dataset(d, classes):
    out = []
    for ci, c in enumerate(classes):
        for r, _, names in sorted(os.walk(os.path.join(d, c), followlinks=True)):
            for n in sorted(names):
                if n.lower().endswith((".png", ".jpg", ".jpeg")):
                    out.append((os.path.join(r, n), ci))
    return out
cls = find_classes(tree)
samples = make_dataset(tree, cls)
os.makedirs(os.path.join(root, "expected"), exist_ok=True)
for i, (f, _) in enumerate(samples):
    with Image.open(f) as im:
        rgb = im.convert("RGB")
        open(os.path.join(root, "expected", f"{i}.rgb"), "wb").write(rgb.tobytes())
json.dump({"classes": cls, "samples": samples,
           "jpeg": [f.lower().endswith((".jpg", ".jpeg")) for f, _ in samples],
           "sizes": [list(Image.open(f).size) for f, _ in samples]}, open(os.path.join(root, "expected.json"), "w"))

bad = os.path.join(root, "bad")
os.makedirs(bad, exist_ok=True)
good_png = open(samples[[i for i, (f, _) in enumerate(samples) if f.endswith(".png")][0]][0], "rb").read()
good_jpg = open([f for f, _ in samples if f.lower().endswith((".jpg", ".jpeg"))][0], "rb").read()
open(os.path.join(bad, "truncated.png"), "wb").write(good_png[: len(good_png) // 2])
corrupt = bytearray(good_png); corrupt[60:80] = b"\x00" * 20
open(os.path.join(bad, "corrupt.png"), "wb").write(bytes(corrupt))
open(os.path.join(bad, "truncated.jpg"), "wb").write(good_jpg[: len(good_jpg) // 2])
corrupt = bytearray(good_jpg); m = corrupt.index(b"\xff\xc4"); corrupt[m + 4] = 0x1F  # a Huffman table index out of range
open(os.path.join(bad, "corrupt.jpg"), "wb").write(bytes(corrupt))
open(os.path.join(bad, "text.jpg"), "w").write("hello\n")
print(f"make_images.py: {len(samples)} images in {len(cls)} classes under {tree}")
