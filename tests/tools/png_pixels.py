#!/usr/bin/python3
"""Counts the pixels of a PNG inside a box that are not the background colour.

    png_pixels.py FILE X Y W H [BACKGROUND]

Decodes the PNG with the standard library only (zlib and the five scanline filters of the PNG
specification, W3C 2nd ed., section 9; 8-bit greyscale, RGB, grey+alpha and RGBA, no interlace)
and prints one line: "WIDTH HEIGHT INK COLOURED", where INK counts the pixels of the box that
differ from BACKGROUND (hex RRGGBB, default ffffff) by more than 24 in some channel and COLOURED
those whose channels differ from each other by more than 60 (drawn in colour, not grey).
Exit status 2 on a file it cannot read, with the reason on stderr.
"""
import struct
import sys
import zlib

CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    if pb <= pc:
        return b
    return c


def decode(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG file (no signature)')
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
        pos += 12 + length
    if header is None:
        raise ValueError('no IHDR chunk')
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError('unsupported PNG: depth %d, colour type %d, interlace %d'
                         % (depth, colour, interlace))
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b''.join(idat))
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        ftype = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                line[x] = (line[x] + paeth(a, b, c)) & 255
            elif ftype != 0:
                raise ValueError('bad filter type %d' % ftype)
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def rgb(line, x, bpp):
    if bpp <= 2:
        v = line[x * bpp]
        return v, v, v
    return line[x * bpp], line[x * bpp + 1], line[x * bpp + 2]


def main(argv):
    if len(argv) not in (6, 7):
        sys.stderr.write('usage: png_pixels.py FILE X Y W H [BACKGROUND]\n')
        return 2
    try:
        width, height, bpp, rows = decode(argv[1])
    except (OSError, ValueError, zlib.error) as e:
        sys.stderr.write('%s: %s\n' % (argv[1], e))
        return 2
    x0, y0, w, h = (int(v) for v in argv[2:6])
    bg = bytes.fromhex(argv[6] if len(argv) == 7 else 'ffffff')
    ink = coloured = 0
    for y in range(max(0, y0), min(height, y0 + h)):
        line = rows[y]
        for x in range(max(0, x0), min(width, x0 + w)):
            r, g, b = rgb(line, x, bpp)
            if abs(r - bg[0]) > 24 or abs(g - bg[1]) > 24 or abs(b - bg[2]) > 24:
                ink += 1
            if max(r, g, b) - min(r, g, b) > 60:
                coloured += 1
    print(width, height, ink, coloured)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
