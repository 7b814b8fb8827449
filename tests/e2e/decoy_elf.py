# SPDX-License-Identifier: GPL-2.0-only
"""A shared object that is slow to read and harmless to probe: many C++
function symbols (none a runtime function's name), all on one `ret`. What
a hostile user can put where the daemon looks for runtime libraries."""
import struct


def write(path, nsyms):
    text_off = text_addr = 0x1000
    text = b"\xc3" * 16
    strtab = bytearray(b"\0")
    syms = [bytes(24)]
    for i in range(nsyms):
        # Elf64_Sym: name, info (GLOBAL FUNC), other, shndx (.text), value, size
        syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 1, text_addr, 1))
        strtab += b"_ZN5decoy2fnILi%dEEEvv\0" % i
    symtab = b"".join(syms)
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    off_sym = text_off + len(text)
    off_str = off_sym + len(symtab)
    off_shs = off_str + len(strtab)
    off_sh = (off_shs + len(shstr) + 7) & ~7
    # Elf64_Ehdr: ET_DYN, EM_X86_64, one program header, five sections
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0,
                       64, off_sh, 0, 64, 56, 1, 64, 5, 4)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, off_sym, off_sym, 0x1000)  # PT_LOAD r-x
    shdr = "<IIQQQQIIQQ"
    sections = [bytes(64),
                struct.pack(shdr, 1, 1, 6, text_addr, text_off, len(text), 0, 0, 16, 0),  # .text
                struct.pack(shdr, 7, 2, 0, 0, off_sym, len(symtab), 3, 1, 8, 24),  # .symtab
                struct.pack(shdr, 15, 3, 0, 0, off_str, len(strtab), 0, 0, 1, 0),  # .strtab
                struct.pack(shdr, 23, 3, 0, 0, off_shs, len(shstr), 0, 0, 1, 0)]  # .shstrtab
    with open(path, "wb") as f:
        f.write(ehdr + phdr)
        f.seek(text_off)
        f.write(text + symtab + bytes(strtab) + shstr)
        f.seek(off_sh)
        f.write(b"".join(sections))


def write_hostile(path, kind):
    """A library crafted against its reader, named like the runtime's:
    sparse: 1 GiB of which 4 KiB are on disk, its string table the rest;
    cold: a runtime function and 4,096 cold parts of it, each as large as
    the file (2 MiB); phdrs: 65,534 program headers, the one that maps the
    code last, and 150,000 symbols."""
    nsyms = {"sparse": 1000, "cold": 4097, "phdrs": 150000}[kind]
    nph = 65534 if kind == "phdrs" else 1
    text_off = text_addr = 0x1000
    text = b"\xc3" * 16
    strtab = bytearray(b"\0")
    syms = [bytes(24)]
    size = 2 << 20 if kind == "cold" else 0
    for i in range(nsyms):
        if kind == "cold":
            name = b"_ZN4flex13RuntimeStream9launchH2DEv" + (b".cold" if i else b"")
            syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 1, text_addr, 1 if not i else size - 0x1000))
        else:
            name = b"_ZN5decoy2fnILi%dEEEvv" % i
            syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 1, text_addr + (i % 16), 1))
        strtab += name + b"\0"
    symtab = b"".join(syms)
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    off_ph = 64
    text_off = text_addr = max(0x1000, (off_ph + 56 * nph + 0xfff) & ~0xfff)
    off_sym = text_off + len(text)
    off_str = off_sym + len(symtab)
    off_shs = off_str + len(strtab)
    off_sh = (off_shs + len(shstr) + 7) & ~7
    end = off_sh + 5 * 64
    total = max(end, size, 1 << 30 if kind == "sparse" else 0)
    str_size = total - off_str if kind == "sparse" else len(strtab)
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0,
                       off_ph, off_sh, 0, 64, 56, nph, 64, 5, 4)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, total, total, 0x1000)
    # segments far above the code first, each a page
    decoys = b"".join(struct.pack("<IIQQQQQQ", 1, 4, 0, (1 << 40) + i * 0x1000, 0, 0x1000, 0x1000, 0x1000)
                      for i in range(nph - 1))
    shdr = "<IIQQQQIIQQ"
    sections = [bytes(64),
                struct.pack(shdr, 1, 1, 6, text_addr, text_off, len(text), 0, 0, 16, 0),
                struct.pack(shdr, 7, 2, 0, 0, off_sym, len(symtab), 3, 1, 8, 24),
                struct.pack(shdr, 15, 3, 0, 0, off_str, str_size, 0, 0, 1, 0),
                struct.pack(shdr, 23, 3, 0, 0, off_shs, len(shstr), 0, 0, 1, 0)]
    with open(path, "wb") as f:
        f.write(ehdr + decoys + phdr)
        f.seek(text_off)
        f.write(text + symtab + bytes(strtab) + shstr)
        f.seek(off_sh)
        f.write(b"".join(sections))
        f.truncate(total)
