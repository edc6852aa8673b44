#!/usr/bin/env python3
"""Writes the image-format test's corpus and Pillow's decode of each file.

Usage: pillow_corpus.py OUTDIR

Every variant Pillow can write of PNG, TIFF, BMP, WebP, PNM and JPEG (modes, bit depths,
compressions), a few it reads but does not write (plain PNM, 16-bit PNM, BMP headers and masks
made byte by byte) and byte-level surgery (stray bytes, truncations). OUTDIR gets the files and
manifest.json, one entry a file:

  {"file", "format", "variant", "pillow": "decoded" | "refused", "reason" (refused),
   "mode" (Pillow's), "width", "height", "reference" (raw RGB bytes, a file), "rule"}

"rule" says how the reference was made from Pillow's decode: "rgb" is Image.convert("RGB") (alpha
dropped, palettes and grey expanded); "high byte" takes each 16-bit sample's high byte (v >> 8)
of 16-bit grey (PNG, TIFF, and PGM with a maxval over 255, which Pillow scales to 0..65535), where
Pillow's own convert("RGB") clips values over 255 instead.
"""
import io
import json
import os
import random
import struct
import sys

from PIL import Image, ImageOps, features

W, H = 37, 23  # odd sides: padding, chroma edges, row strides


def picture(mode, seed, w=W, h=H):
    rnd = random.Random(seed)
    rgb = Image.new("RGB", (w, h))
    rgb.putdata([((x * 255) // max(1, w - 1), (y * 255) // max(1, h - 1), (x * 7 + y * 13 + rnd.randrange(40)) % 256)
                 for y in range(h) for x in range(w)])
    if mode == "RGB":
        return rgb
    if mode == "RGBA":
        im = rgb.copy()
        im.putalpha(Image.linear_gradient("L").resize((w, h)))
        return im
    if mode == "LA":
        return picture("RGBA", seed, w, h).convert("LA")
    if mode in ("L", "1", "CMYK"):
        return rgb.convert(mode)
    if mode == "P":
        return rgb.quantize(colors=50, method=Image.Quantize.MEDIANCUT)
    if mode == "PA":
        return picture("RGBA", seed, w, h).convert("PA")
    if mode in ("I;16", "I", "F"):
        values = [(x * 65535) // (w - 1) ^ (y * 997) for y in range(h) for x in range(w)]
        im = Image.new("I", (w, h))
        im.putdata([v & 0xFFFF for v in values])
        return im.convert("F") if mode == "F" else im if mode == "I" else im.convert("I;16")
    raise ValueError(mode)


def reference(im):
    """(mode, rule, bytes) of Pillow's decode `im`."""
    sixteen = im.mode in ("I;16", "I;16B", "I;16L", "I;16N") or (im.mode == "I" and im.format == "PPM")
    if sixteen:
        raw = im.convert("I;16").tobytes("raw", "I;16") if im.mode == "I" else im.tobytes("raw", "I;16")
        out = bytearray()
        for i in range(0, len(raw), 2):
            v = raw[i + 1]  # the high byte
            out += bytes((v, v, v))
        return "high byte", bytes(out)
    return "rgb", im.convert("RGB").tobytes()


entries = []


def add(out, fmt, variant, data, source=None):
    """One file; `source`: the RGB bytes the file was made of, for files Pillow may refuse."""
    name = f"{len(entries):03d}-{fmt.lower()}-{variant.replace(' ', '_').replace('/', '_').replace(':', '')}.{fmt.lower()}"
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    e = {"file": name, "format": fmt, "variant": variant}
    try:
        im = Image.open(io.BytesIO(data))
        orientation = im.getexif().get(0x0112, 1)  # before load(): a TIFF's tags go with its file
        im.load()
        rule, ref = reference(im)
        ref_name = name + ".rgb"
        with open(os.path.join(out, ref_name), "wb") as f:
            f.write(ref)
        e.update(pillow="decoded", mode=im.mode, width=im.width, height=im.height, reference=ref_name, rule=rule)
        if orientation != 1:  # and turned as exif_transpose turns it, for apply_exif_orientation
            turned = ImageOps.exif_transpose(im)
            with open(os.path.join(out, name + ".turned.rgb"), "wb") as f:
                f.write(reference(turned)[1])
            e.update(orientation=orientation, turned=name + ".turned.rgb", turned_width=turned.width, turned_height=turned.height)
    except Exception as x:  # Pillow's refusal, recorded with its reason
        e.update(pillow="refused", reason=f"{type(x).__name__}: {x}")
        if source is not None:  # the pixels as written, where the script made the file byte by byte
            with open(os.path.join(out, name + ".source.rgb"), "wb") as f:
                f.write(source)
            e["source"] = name + ".source.rgb"
    entries.append(e)


def saved(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def bmp_with_header(bits, compression, masks, pixels, w, h, header_size=40, palette=b""):
    """A BMP of header_size (40, 52, 56, 108 or 124) bytes with `masks` (BI_BITFIELDS)."""
    extra = b""
    if header_size >= 52:
        extra = struct.pack("<4I", *(masks + (0,) * (4 - len(masks))))[: header_size - 40]
        extra += b"\0" * (header_size - 40 - len(extra))
    info = struct.pack("<IiiHHIIiiII", header_size, w, h, 1, bits, compression, len(pixels), 2835, 2835, 0, 0) + extra
    after = b""
    if header_size == 40 and compression == 3:
        after = struct.pack(f"<{len(masks)}I", *masks)
    offset = 14 + len(info) + len(after) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + after + palette + pixels


def bmp32_rows(w, h, pack):
    rows = b""
    src = picture("RGBA", 8, w, h)
    for y in range(h - 1, -1, -1):
        for x in range(w):
            rows += struct.pack("<I", pack(*src.getpixel((x, y))))
    return rows


def main(out):
    os.makedirs(out, exist_ok=True)
    # PNG: every mode Pillow writes, palettes of 1, 2 and 4 bits, transparency.
    for mode in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):
        add(out, "PNG", mode, saved(picture(mode, 1), "PNG"))
    for bits in (1, 2, 4):
        add(out, "PNG", f"P {bits}-bit", saved(picture("RGB", 2).quantize(colors=2 ** bits), "PNG", bits=bits))
    p = picture("P", 3)
    add(out, "PNG", "P with tRNS", saved(p, "PNG", transparency=5))
    add(out, "PNG", "RGB optimized", saved(picture("RGB", 4), "PNG", optimize=True))
    # TIFF: modes and compressions.
    for mode in ("1", "L", "LA", "P", "RGB", "RGBA", "CMYK", "I;16", "I", "F"):
        add(out, "TIFF", mode, saved(picture(mode, 5), "TIFF"))
    for comp in ("tiff_lzw", "tiff_adobe_deflate", "packbits", "jpeg"):
        add(out, "TIFF", f"RGB {comp}", saved(picture("RGB", 6), "TIFF", compression=comp))
    add(out, "TIFF", "1 group4", saved(picture("1", 7), "TIFF", compression="group4"))
    add(out, "TIFF", "L lzw predictor", saved(picture("L", 7), "TIFF", compression="tiff_lzw"))
    try:
        add(out, "TIFF", "RGB BigTIFF", saved(picture("RGB", 9), "TIFF", big_tiff=True))
    except (TypeError, ValueError, OSError):
        pass
    # WebP.
    if features.check("webp"):
        for mode in ("RGB", "RGBA"):
            add(out, "WEBP", f"{mode} lossy", saved(picture(mode, 10), "WEBP", quality=80))
            add(out, "WEBP", f"{mode} lossless", saved(picture(mode, 11), "WEBP", lossless=True))
    # BMP: what Pillow writes, and the headers and masks it reads.
    for mode in ("1", "L", "P", "RGB", "RGBA"):
        add(out, "BMP", mode, saved(picture(mode, 12), "BMP"))
    w, h = 13, 7
    add(out, "BMP", "32-bit BGRA bitfields v3", bmp_with_header(32, 3, (0xFF0000, 0xFF00, 0xFF), bmp32_rows(w, h, lambda r, g, b, a: r << 16 | g << 8 | b), w, h))
    add(out, "BMP", "32-bit XBGR bitfields v4", bmp_with_header(32, 3, (0xFF, 0xFF00, 0xFF0000, 0), bmp32_rows(w, h, lambda r, g, b, a: b << 16 | g << 8 | r), w, h, 108),
        source=picture("RGBA", 8, w, h).convert("RGB").tobytes())
    add(out, "BMP", "32-bit ABGR bitfields v5", bmp_with_header(32, 3, (0xFF, 0xFF00, 0xFF0000, 0xFF000000), bmp32_rows(w, h, lambda r, g, b, a: a << 24 | b << 16 | g << 8 | r), w, h, 124))
    add(out, "BMP", "32-bit RGBA bitfields v4", bmp_with_header(32, 3, (0xFF000000, 0xFF0000, 0xFF00, 0xFF), bmp32_rows(w, h, lambda r, g, b, a: r << 24 | g << 16 | b << 8 | a), w, h, 108))
    rows565 = b""
    src = picture("RGB", 13, w, h)
    for y in range(h - 1, -1, -1):
        row = b"".join(struct.pack("<H", (r >> 3) << 11 | (g >> 2) << 5 | b >> 3) for r, g, b in (src.getpixel((x, y)) for x in range(w)))
        rows565 += row + b"\0" * (-len(row) % 4)
    add(out, "BMP", "16-bit 565 bitfields", bmp_with_header(16, 3, (0xF800, 0x07E0, 0x001F), rows565, w, h))
    top_down = bytearray(saved(picture("RGB", 14), "BMP"))
    # The same rows, the height negated and the rows reversed: a top-down BMP.
    hdr_h = struct.unpack_from("<i", top_down, 22)[0]
    off = struct.unpack_from("<I", top_down, 10)[0]
    stride = (W * 3 + 3) // 4 * 4
    rows = [bytes(top_down[off + i * stride: off + (i + 1) * stride]) for i in range(hdr_h)]
    struct.pack_into("<i", top_down, 22, -hdr_h)
    top_down[off:] = b"".join(reversed(rows))
    add(out, "BMP", "RGB top-down", bytes(top_down))
    # RLE8 and RLE4 (Pillow reads, does not write them): runs, absolute runs, a delta, row ends.
    pal = picture("RGB", 15, 16, 1)
    palette = b"".join(bytes((b, g, r, 0)) for r, g, b in pal.getdata())
    rle8 = b""
    for y in range(4):
        rle8 += bytes((3, y)) + bytes((0, 4, 5, 6, 7, 8)) + bytes((2, 9 + y)) + bytes((5, 1)) + b"\0\0"
    rle8 += b"\0\1"
    rle8_palette = palette + b"\0" * (1024 - len(palette))
    add(out, "BMP", "RLE8", bmp_with_header(8, 1, (), rle8, 12, 4, palette=rle8_palette))
    delta = bytes((3, 1)) + b"\0\2\1\1" + bytes((4, 2)) + b"\0\0" * 4 + b"\0\1"
    add(out, "BMP", "RLE8 with a delta", bmp_with_header(8, 1, (), delta, 12, 4, palette=rle8_palette))
    rle4 = b""
    for y in range(3):
        rle4 += bytes((5, 0x12 + y)) + bytes((0, 4, 0x34, 0x56)) + bytes((2, 0x9A)) + b"\0\0"
    rle4 += b"\0\1"
    add(out, "BMP", "RLE4", bmp_with_header(4, 2, (), rle4, 11, 3, palette=palette))
    odd = (bytes((5, 0x12)) + bytes((0, 3, 0x34, 0x50)) + bytes((3, 0x9A)) + b"\0\0") * 3 + b"\0\1"
    add(out, "BMP", "RLE4 odd absolute run", bmp_with_header(4, 2, (), odd, 11, 3, palette=palette))
    # OS/2 1.x core header (12 bytes): 16-bit width and height.
    core = bytearray(b"BM" + struct.pack("<IHHI", 0, 0, 0, 26) + struct.pack("<IHHHH", 12, w, h, 1, 24))
    for y in range(h - 1, -1, -1):
        row = b"".join(bytes((b, g, r)) for r, g, b in (src.getpixel((x, y)) for x in range(w)))
        core += row + b"\0" * (-len(row) % 4)
    struct.pack_into("<I", core, 2, len(core))
    add(out, "BMP", "24-bit OS/2 core header", bytes(core))
    # PNM: raw and plain, 8- and 16-bit, a maxval under 255.
    for mode, kind in (("1", "P4"), ("L", "P5"), ("RGB", "P6")):
        add(out, "PPM", f"{kind} {mode}", saved(picture(mode, 15), "PPM"))
    add(out, "PPM", "P5 16-bit", saved(picture("I;16", 16), "PPM"))
    g = picture("L", 17, 9, 5)
    add(out, "PPM", "P2 plain", ("P2\n# plain grey\n9 5\n255\n" + " ".join(str(v) for v in g.getdata()) + "\n").encode())
    c = picture("RGB", 18, 9, 5)
    add(out, "PPM", "P3 plain", ("P3\n9 5\n255\n" + " ".join(str(v) for px in c.getdata() for v in px) + "\n").encode())
    b1 = picture("1", 19, 9, 5)
    add(out, "PPM", "P1 plain", ("P1\n9 5\n" + " ".join("0" if v else "1" for v in b1.getdata()) + "\n").encode())
    add(out, "PPM", "P5 maxval 100", b"P5\n9 5\n100\n" + bytes((v * 100) // 255 for v in g.getdata()))
    add(out, "PPM", "P6 maxval 1023", b"P6\n9 5\n1023\n" + b"".join(struct.pack(">H", (v * 1023) // 255) for px in c.getdata() for v in px))
    # JPEG: grey, chroma layouts, progressive, optimized tables, CMYK, and surgery.
    add(out, "JPEG", "L", saved(picture("L", 20), "JPEG", quality=90))
    for sub, name in ((0, "4:4:4"), (1, "4:2:2"), (2, "4:2:0")):
        add(out, "JPEG", f"RGB {name}", saved(picture("RGB", 21), "JPEG", quality=90, subsampling=sub))
    add(out, "JPEG", "RGB progressive", saved(picture("RGB", 22), "JPEG", quality=85, progressive=True))
    add(out, "JPEG", "RGB optimized", saved(picture("RGB", 23), "JPEG", quality=75, optimize=True))
    add(out, "JPEG", "CMYK", saved(picture("CMYK", 24), "JPEG", quality=90))
    base = saved(picture("RGB", 25), "JPEG", quality=90)
    app0_end = 4 + struct.unpack(">H", base[4:6])[0]
    add(out, "JPEG", "extraneous bytes before a marker", base[:app0_end] + b"\x00\x3c\x3c" + base[app0_end:])
    add(out, "JPEG", "truncated", base[: len(base) * 2 // 3])
    # EXIF orientation in every format that carries it: the pixels as stored unless asked.
    for o in (2, 3, 4, 5, 6, 7, 8):
        exif = Image.Exif()
        exif[0x0112] = o
        add(out, "JPEG", f"EXIF orientation {o}", saved(picture("RGB", 30 + o), "JPEG", quality=90, exif=exif))
    for o in (6, 8):
        exif = Image.Exif()
        exif[0x0112] = o
        add(out, "PNG", f"EXIF orientation {o}", saved(picture("RGB", 40 + o), "PNG", exif=exif))
        if features.check("webp"):
            add(out, "WEBP", f"EXIF orientation {o}", saved(picture("RGB", 50 + o), "WEBP", lossless=True, exif=exif))
        add(out, "TIFF", f"Orientation tag {o}", saved(picture("RGB", 60 + o), "TIFF", tiffinfo={0x0112: o}))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"pillow": Image.__version__, "entries": entries}, f, indent=1)
    print(f"pillow_corpus: {len(entries)} files, Pillow {Image.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
