#!/usr/bin/env python3
"""Give a libbpf skeleton the bytes of another object.

    skel-object.py TWIN.skel.h TWIN.bpf.o REAL.bpf.o > spyre.skel.h

bpftool 7.1 cannot make a skeleton of a big-endian object. The skeleton is
made from a little-endian twin built from the same source for the same
architecture instead; only its embedded object is swapped for the real one.
The skeleton finds programs, maps and variables by name when it opens the
object, so the two must name the same things: checked here, and the build
stops when they differ."""
import re
import struct
import sys


def elf_names(path):
    """(byte order, section names, {global symbol: section name})."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"skel-object: {path} is not a 64-bit ELF object")
    order = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(order + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        name, stype, _, _, off, size, link, _, _, entsize = struct.unpack_from(
            order + "IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append((name, stype, off, size, link, entsize))
    stroff = sections[shstrndx][2]

    def cstr(base, at):
        return data[base + at:data.index(b"\0", base + at)].decode()

    names = [cstr(stroff, s[0]) for s in sections]
    symbols = {}
    for name, stype, off, size, link, entsize in sections:
        if stype != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][2]
        for at in range(off, off + size, entsize):
            sname, info, _, shndx, _, _ = struct.unpack_from(order + "IBBHQQ", data, at)
            if info >> 4 == 0 or not sname:  # locals do not matter to the skeleton
                continue
            symbols[cstr(strtab, sname)] = names[shndx] if 0 < shndx < len(names) else shndx
    return order, set(n for n in names if n and not n.startswith(".rel")), symbols


def main():
    skel_path, twin_path, real_path = sys.argv[1:4]
    _, twin_secs, twin_syms = elf_names(twin_path)
    order, real_secs, real_syms = elf_names(real_path)
    if twin_secs != real_secs or twin_syms != real_syms:
        diff = sorted((twin_secs ^ real_secs) | set(twin_syms.items()) ^ set(real_syms.items()))
        sys.exit(f"skel-object: {twin_path} and {real_path} differ: {diff[:5]}")
    skel = open(skel_path).read()
    fn = re.compile(r"(static inline const void \*(\w+)__elf_bytes\(size_t \*sz\)\n\{\n)"
                    r".*?\n\}\n", re.S)
    found = [m for m in fn.finditer(skel)]
    if len(found) != 1:
        sys.exit(f"skel-object: {skel_path}: found {len(found)} definitions of __elf_bytes, not 1")
    obj = open(real_path, "rb").read()
    lines = []
    for i in range(0, len(obj), 16):
        lines.append("".join(f"\\x{b:02x}" for b in obj[i:i + 16]) + "\\")
    endian = "big" if order == ">" else "little"
    body = (found[0].group(1) +
            f"\t/* {real_path}: {endian}-endian, {len(obj)} bytes (scripts/skel-object.py) */\n"
            "\tstatic const char data[] __attribute__((__aligned__(8))) = \"\\\n" +
            "\n".join(lines) + "\n\";\n\n\t*sz = sizeof(data) - 1;\n\treturn data;\n}\n")
    sys.stdout.write(skel[:found[0].start()] + body + skel[found[0].end():])


if __name__ == "__main__":
    main()
