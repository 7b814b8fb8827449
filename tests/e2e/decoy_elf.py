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
