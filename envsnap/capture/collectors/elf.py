"""What a shared object's ELF headers say about it: build-id, soname, and where its strings lie.

Read with struct from the headers alone, never the whole file (a CUDA library is hundreds of MB),
following the ELF format as documented in elf(5) (Linux man-pages 6.x) and the System V gABI
("ELF Header", "Program Header", "Section Header", "Note Section", "Dynamic Section"):

- the ELF header (e_ident: magic, class 32/64, byte order; e_phoff/e_phnum, e_shoff/e_shnum,
  e_shstrndx, with the gABI's escapes: e_shnum 0 and e_shstrndx SHN_XINDEX take the real values
  from section 0's sh_size and sh_link);
- the build-id: the NT_GNU_BUILD_ID note (type 3, owner "GNU") in a PT_NOTE segment, as the
  dynamic loader and debuggers find it (elf(5) "Notes (Nhdr)": namesz, descsz, type, then name
  and descriptor each padded to the segment's alignment, 4 or 8);
- the soname: DT_SONAME (14) of the PT_DYNAMIC segment, an offset into the dynamic string table
  (the section that .dynamic's sh_link names, else DT_STRTAB's address mapped to a file offset
  through the PT_LOAD segments);
- where string literals lie, for the names scan (libstrings.py): the sections whose names start
  with ".rodata" (gcc and clang put every string literal there: .rodata.str1.1 and kin, merged
  into .rodata by the linker) and ".data" (a `char name[] = "..."` array), and the dynamic string
  table (imported symbols: whether the object calls getenv). CUDA's fat binaries (.nv_fatbin,
  __nv_relfatbin: GPU code, most of a CUDA library's size) and code are never read. A file
  without section headers (stripped with sstrip) falls back to its non-executable PT_LOAD segments.

Every offset and size is checked against the file's size and bounded before it is read: a hostile
or truncated file gives "not ELF" or a note, never an exception out of `read_elf` and never a
large read.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Collection, Dict, List, NamedTuple, Optional, Tuple

MAGIC = b"\x7fELF"
PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
PF_X = 1
SHT_NOBITS = 8
NT_GNU_BUILD_ID = 3
DT_NULL, DT_STRTAB, DT_SONAME = 0, 5, 14
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF
ET_EXEC, ET_DYN = 2, 3

# Bounds on what the headers may make us read (real objects are far below them: libtorch_cpu.so has
# 38 sections and 12 program headers; its .dynamic is 672 bytes).
MAX_TABLE_BYTES = 1 << 20  # a program or section header table
MAX_NOTE_BYTES = 1 << 16  # a PT_NOTE segment
MAX_DYNAMIC_BYTES = 1 << 20
MAX_SONAME = 4096


class ElfFacts(NamedTuple):
    elf_type: int  # ET_EXEC / ET_DYN / ...
    build_id: Optional[str]  # hex
    soname: Optional[str]
    string_ranges: List[Tuple[int, int]]  # (file offset, size) of the sections the names scan reads
    dynstr: Optional[Tuple[int, int]]  # (file offset, size) of the dynamic string table
    note: str  # what could not be read (empty when everything was)


class NotElf(Exception):
    """The file is not an ELF object we can read (the message says why)."""


class _Layout(NamedTuple):
    endian: str
    is64: bool
    ehdr: struct.Struct
    phdr: struct.Struct
    shdr: struct.Struct
    dyn: struct.Struct


def _layout(ident: bytes) -> _Layout:
    if ident[:4] != MAGIC:
        raise NotElf("not an ELF file")
    klass, data = ident[4], ident[5]
    if data not in (1, 2) or klass not in (1, 2):
        raise NotElf(f"unknown ELF class {klass} / data encoding {data}")
    e = "<" if data == 1 else ">"
    if klass == 2:
        return _Layout(e, True, struct.Struct(e + "16sHHIQQQIHHHHHH"), struct.Struct(e + "IIQQQQQQ"),
                       struct.Struct(e + "IIQQQQIIQQ"), struct.Struct(e + "qQ"))
    return _Layout(e, False, struct.Struct(e + "16sHHIIIIIHHHHHH"), struct.Struct(e + "IIIIIIII"),
                   struct.Struct(e + "IIIIIIIIII"), struct.Struct(e + "iI"))


def _pread(fd: int, size: int, offset: int, file_size: int) -> bytes:
    """Exactly `size` bytes at `offset`, or NotElf when they lie outside the file."""
    if size < 0 or offset < 0 or offset + size > file_size:
        raise NotElf("a header points outside the file (truncated or not a real ELF object)")
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise NotElf("short read (the file changed while it was read)")
    return data


class _Segment(NamedTuple):
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    align: int


class _Section(NamedTuple):
    name: int
    type: int
    offset: int
    size: int
    link: int
    addr: int


def _segments(fd: int, lay: _Layout, hdr: Tuple[Any, ...], file_size: int) -> List[_Segment]:
    phoff, phentsize, phnum = hdr[5], hdr[9], hdr[10]
    if phnum == 0 or phoff == 0:
        return []
    if phnum == PN_XNUM:  # the real count is in section 0's sh_info; objects this large do not exist in practice
        raise NotElf("more than 65534 program headers")
    if phentsize < lay.phdr.size or phentsize * phnum > MAX_TABLE_BYTES:
        raise NotElf("implausible program header table")
    raw = _pread(fd, phentsize * phnum, phoff, file_size)
    out = []
    for i in range(phnum):
        fields = lay.phdr.unpack_from(raw, i * phentsize)
        if lay.is64:
            p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, p_align = fields
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, _memsz, p_flags, p_align = fields
        out.append(_Segment(p_type, p_flags, p_offset, p_vaddr, p_filesz, p_align))
    return out


def _sections(fd: int, lay: _Layout, hdr: Tuple[Any, ...], file_size: int) -> Tuple[List[_Section], int]:
    shoff, shentsize, shnum, shstrndx = hdr[6], hdr[11], hdr[12], hdr[13]
    if shoff == 0:
        return [], 0
    if shentsize < lay.shdr.size:
        raise NotElf("implausible section header size")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # gABI: the real values are in section 0
        first = lay.shdr.unpack(_pread(fd, lay.shdr.size, shoff, file_size))
        shnum = shnum or first[5]
        if shstrndx == SHN_XINDEX:
            shstrndx = first[6]
    if shnum == 0 or shentsize * shnum > MAX_TABLE_BYTES:
        raise NotElf("implausible section header table")
    raw = _pread(fd, shentsize * shnum, shoff, file_size)
    out = []
    for i in range(shnum):
        name, sh_type, _flags, addr, offset, size, link, _info, _align, _entsize = lay.shdr.unpack_from(raw, i * shentsize)
        out.append(_Section(name, sh_type, offset, size, link, addr))
    return out, shstrndx


def _section_names(fd: int, sections: List[_Section], shstrndx: int, file_size: int) -> List[str]:
    if not 0 < shstrndx < len(sections):
        return [""] * len(sections)
    table = sections[shstrndx]
    if table.size > MAX_TABLE_BYTES:
        raise NotElf("implausible section name table")
    raw = _pread(fd, table.size, table.offset, file_size)
    names = []
    for section in sections:
        end = raw.find(b"\0", section.name)
        names.append(raw[section.name:end].decode("ascii", "replace") if 0 <= section.name < len(raw) and end >= 0 else "")
    return names


def _build_id(fd: int, segments: List[_Segment], sections: List[_Section], names: List[str],
              lay: _Layout, file_size: int) -> Optional[str]:
    """The NT_GNU_BUILD_ID note of the PT_NOTE segments (else of a .note.gnu.build-id section)."""
    notes = [(s.offset, s.filesz, 8 if s.align == 8 else 4) for s in segments if s.type == PT_NOTE]
    if not notes:
        notes = [(s.offset, s.size, 4) for s, n in zip(sections, names) if n == ".note.gnu.build-id"]
    header = struct.Struct(lay.endian + "III")
    for offset, size, align in notes:
        if size <= 0 or size > MAX_NOTE_BYTES:
            continue
        raw = _pread(fd, size, offset, file_size)
        at = 0
        while at + header.size <= len(raw):
            namesz, descsz, note_type = header.unpack_from(raw, at)
            name_at = at + header.size
            desc_at = name_at + ((namesz + align - 1) // align) * align
            end = desc_at + ((descsz + align - 1) // align) * align
            if desc_at + descsz > len(raw):
                break
            if note_type == NT_GNU_BUILD_ID and raw[name_at:name_at + namesz].rstrip(b"\0") == b"GNU" and descsz:
                return raw[desc_at:desc_at + descsz].hex()
            at = end
    return None


def _file_offset(vaddr: int, segments: List[_Segment]) -> Optional[int]:
    for s in segments:
        if s.type == PT_LOAD and s.vaddr <= vaddr < s.vaddr + s.filesz:
            return s.offset + (vaddr - s.vaddr)
    return None


def _dynamic(fd: int, segments: List[_Segment], sections: List[_Section], lay: _Layout,
             file_size: int) -> Tuple[Optional[str], Optional[Tuple[int, int]]]:
    """(DT_SONAME, the dynamic string table's (offset, size))."""
    dynamic = next((s for s in segments if s.type == PT_DYNAMIC), None)
    if dynamic is None or dynamic.filesz <= 0:
        return None, None
    if dynamic.filesz > MAX_DYNAMIC_BYTES:
        raise NotElf("implausible dynamic segment")
    raw = _pread(fd, dynamic.filesz, dynamic.offset, file_size)
    soname_at = strtab_addr = None
    for at in range(0, len(raw) - lay.dyn.size + 1, lay.dyn.size):
        tag, value = lay.dyn.unpack_from(raw, at)
        if tag == DT_NULL:
            break
        if tag == DT_SONAME:
            soname_at = value
        elif tag == DT_STRTAB:
            strtab_addr = value
    strtab: Optional[Tuple[int, int]] = None
    owner = next((s for s in sections if s.offset == dynamic.offset and s.type != SHT_NOBITS), None)
    if owner is not None and 0 < owner.link < len(sections):
        table = sections[owner.link]
        strtab = (table.offset, table.size)
    elif strtab_addr is not None:
        offset = _file_offset(strtab_addr, segments)
        if offset is not None:
            strtab = (offset, max(0, min(file_size - offset, MAX_TABLE_BYTES * 16)))
    soname = None
    if soname_at is not None and strtab is not None and 0 <= soname_at < strtab[1]:
        start = strtab[0] + soname_at
        raw_name = _pread(fd, min(MAX_SONAME, file_size - start), start, file_size)
        end = raw_name.find(b"\0")
        if end > 0:
            soname = raw_name[:end].decode("utf-8", "surrogateescape")
    return soname, strtab


def _string_ranges(segments: List[_Segment], sections: List[_Section], names: List[str],
                   file_size: int) -> List[Tuple[int, int]]:
    """Where string literals can be: .rodata* and .data* sections, else non-executable PT_LOAD segments."""
    ranges = [(s.offset, s.size) for s, n in zip(sections, names)
              if s.type != SHT_NOBITS and s.size > 0 and (n == ".rodata" or n.startswith(".rodata.")
                                                         or n == ".data" or n.startswith(".data."))
              and not n.startswith(".data.rel")]  # .data.rel.ro*: relocated pointers, no text
    if not sections:
        ranges = [(s.offset, s.filesz) for s in segments if s.type == PT_LOAD and not s.flags & PF_X and s.filesz > 0]
    return sorted((offset, min(size, file_size - offset)) for offset, size in ranges if 0 <= offset < file_size)


def read_elf(fd: int, file_size: int) -> ElfFacts:
    """The facts of the ELF object open at `fd` (of `file_size` bytes); NotElf when it is not one.
    Other I/O errors (OSError) propagate: the caller knows the file and says what happened."""
    if file_size < 52:
        raise NotElf("too small to be an ELF object")
    ident = os.pread(fd, 64, 0)
    lay = _layout(ident[:16])
    if len(ident) < lay.ehdr.size:
        raise NotElf("truncated ELF header")
    hdr = lay.ehdr.unpack_from(ident)
    notes: List[str] = []
    segments = _segments(fd, lay, hdr, file_size)
    try:
        sections, shstrndx = _sections(fd, lay, hdr, file_size)
        names = _section_names(fd, sections, shstrndx, file_size)
    except NotElf as exc:  # a damaged section table: the program headers still describe the object
        sections, names = [], []
        notes.append(f"section headers unreadable ({exc})")
    try:
        build_id = _build_id(fd, segments, sections, names, lay, file_size)
    except NotElf as exc:
        build_id = None
        notes.append(f"build-id note unreadable ({exc})")
    try:
        soname, dynstr = _dynamic(fd, segments, sections, lay, file_size)
    except NotElf as exc:
        soname, dynstr = None, None
        notes.append(f"dynamic section unreadable ({exc})")
    return ElfFacts(hdr[1], build_id, soname, _string_ranges(segments, sections, names, file_size), dynstr,
                    "; ".join(notes))


# ---------------------------------------------------------------- dynamic symbols (the live environment)

SHT_DYNSYM = 11
SHN_UNDEF = 0
# libc.so.6's .dynsym is ~3,000 symbols (72 KB) and its .dynstr ~40 KB; a Python executable that exports
# the C API ~2 MB together. Past this the object is not one whose variables we look up.
MAX_DYNSYM_BYTES = 32 << 20


class DynamicSymbols(NamedTuple):
    values: Dict[str, int]  # a wanted name -> st_value (defined symbols only)
    load_vaddr: int  # p_vaddr of the first PT_LOAD segment, page-aligned down
    load_offset: int  # its p_offset, page-aligned down: the file offset mapped at the load address
    pointer_size: int  # 8 for ELFCLASS64, 4 for ELFCLASS32


def dynamic_symbols(fd: int, file_size: int, wanted: Collection[str], page_size: int = 4096) -> DynamicSymbols:
    """The values of the `wanted` names that the object open at `fd` defines in its dynamic symbol
    table (.dynsym, gABI "Symbol Table": st_shndx SHN_UNDEF is a reference, not a definition), and where
    its first PT_LOAD segment lies, so that a caller knowing where the object is mapped can turn a value
    into an address (address = mapping start of `load_offset` - `load_vaddr` + value). NotElf when it is
    not an ELF object or its tables lie outside the file."""
    if file_size < 52:
        raise NotElf("too small to be an ELF object")
    ident = os.pread(fd, 64, 0)
    lay = _layout(ident[:16])
    if len(ident) < lay.ehdr.size:
        raise NotElf("truncated ELF header")
    hdr = lay.ehdr.unpack_from(ident)
    loads = [s for s in _segments(fd, lay, hdr, file_size) if s.type == PT_LOAD]
    if not loads:
        raise NotElf("no loadable segment")
    first = min(loads, key=lambda s: s.vaddr)
    mask = ~(page_size - 1)
    sections, _ = _sections(fd, lay, hdr, file_size)
    found: Dict[str, int] = {}
    symtab = next((s for s in sections if s.type == SHT_DYNSYM), None)
    if symtab is not None and 0 < symtab.link < len(sections):
        strtab = sections[symtab.link]
        if symtab.size > MAX_DYNSYM_BYTES or strtab.size > MAX_DYNSYM_BYTES:
            raise NotElf("implausibly large dynamic symbol table")
        names = _pread(fd, strtab.size, strtab.offset, file_size)
        raw = _pread(fd, symtab.size, symtab.offset, file_size)
        sym = struct.Struct(lay.endian + ("IBBHQQ" if lay.is64 else "IIIBBH"))
        targets = {name.encode(): name for name in wanted}
        for at in range(0, len(raw) - sym.size + 1, sym.size):
            fields = sym.unpack_from(raw, at)
            name_at, shndx, value = (fields[0], fields[3], fields[4]) if lay.is64 else (fields[0], fields[5], fields[1])
            if shndx == SHN_UNDEF or not 0 <= name_at < len(names):
                continue
            end = names.find(b"\0", name_at)
            name = targets.get(names[name_at:end if end >= 0 else len(names)])
            if name is not None and name not in found:
                found[name] = value
    return DynamicSymbols(found, first.vaddr & mask, first.offset & mask, 8 if lay.is64 else 4)
