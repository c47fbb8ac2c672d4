'use strict';
// A small ELF64 little-endian reader for test/readers/: the parts of a file
// that profilers parse to find a thread-local variable.  Each reader module
// calls these the way its profiler's ELF library does (the lookup rules
// are cited there); this file only knows the ELF format.

const PT = { LOAD: 1, DYNAMIC: 2, INTERP: 3, TLS: 7 };
const PF_X = 1;
const SHT = { RELA: 4 };
const DT = { NULL: 0, HASH: 4, STRTAB: 5, SYMTAB: 6, GNU_HASH: 0x6ffffef5, FLAGS_1: 0x6ffffffb };
const EM = { X86_64: 62, AARCH64: 183 };
const STT_TLS = 6;

// Relocation types, by machine (the ELF psABIs for x86-64 and AArch64).
const RELOC = {
  [EM.X86_64]: { TLSDESC: 36, DTPMOD64: 16, TPOFF64: 18 },
  [EM.AARCH64]: { TLSDESC: 1031, DTPMOD64: 1028, TPOFF64: 1030 },
};

function cstr(buf, at) {
  if (at < 0 || at >= buf.length) return null;
  const end = buf.indexOf(0, at);
  return buf.toString('latin1', at, end < 0 ? buf.length : end);
}

function parse(buf) {
  if (buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) throw new Error('not a little-endian ELF64 file');
  const f = {
    buf,
    type: buf.readUInt16LE(16),
    machine: buf.readUInt16LE(18),
    progs: [],
    sections: [],
    dynamic: [],
  };
  const phoff = Number(buf.readBigUInt64LE(32));
  const shoff = Number(buf.readBigUInt64LE(40));
  const phentsize = buf.readUInt16LE(54);
  const phnum = buf.readUInt16LE(56);
  const shentsize = buf.readUInt16LE(58);
  const shnum = buf.readUInt16LE(60);
  const shstrndx = buf.readUInt16LE(62);
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    f.progs.push({
      type: buf.readUInt32LE(o), flags: buf.readUInt32LE(o + 4),
      offset: buf.readBigUInt64LE(o + 8), vaddr: buf.readBigUInt64LE(o + 16),
      filesz: buf.readBigUInt64LE(o + 32), memsz: buf.readBigUInt64LE(o + 40), align: buf.readBigUInt64LE(o + 48),
    });
  }
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * shentsize;
    f.sections.push({
      nameAt: buf.readUInt32LE(o), type: buf.readUInt32LE(o + 4), addr: buf.readBigUInt64LE(o + 16),
      offset: Number(buf.readBigUInt64LE(o + 24)), size: Number(buf.readBigUInt64LE(o + 32)),
      link: buf.readUInt32LE(o + 40), entsize: Number(buf.readBigUInt64LE(o + 56)),
    });
  }
  const shstr = f.sections[shstrndx];
  for (const s of f.sections) s.name = shstr ? cstr(buf, shstr.offset + s.nameAt) : '';
  const dyn = f.progs.find((p) => p.type === PT.DYNAMIC);
  if (dyn) {
    for (let o = Number(dyn.offset); o + 16 <= Number(dyn.offset + dyn.filesz); o += 16) {
      const tag = Number(buf.readBigInt64LE(o));
      if (tag === DT.NULL) break;
      f.dynamic.push({ tag, value: buf.readBigUInt64LE(o + 8) });
    }
  }
  return f;
}

// The file offset of virtual address `vaddr`, through the PT_LOAD headers.
function fileOffset(f, vaddr) {
  for (const p of f.progs) {
    if (p.type === PT.LOAD && vaddr >= p.vaddr && vaddr < p.vaddr + p.filesz) return Number(vaddr - p.vaddr + p.offset);
  }
  return -1;
}

function dynValue(f, tag) {
  const d = f.dynamic.find((e) => e.tag === tag);
  return d ? d.value : null;
}

function symbolAt(f, table, strings, index) {
  const o = table + index * 24;
  const nameAt = f.buf.readUInt32LE(o);
  return {
    nameAt,
    info: f.buf[o + 4],
    shndx: f.buf.readUInt16LE(o + 6),
    value: f.buf.readBigUInt64LE(o + 8),
    size: f.buf.readBigUInt64LE(o + 16),
    name: strings >= 0 ? cstr(f.buf, strings + nameAt) : null,
  };
}

// The relocations of every SHT_RELA section, with their symbols' names
// from the symbol table the section links to.
function* relocations(f) {
  for (const s of f.sections) {
    if (s.type !== SHT.RELA) continue;
    const symtab = f.sections[s.link];
    const strtab = symtab && f.sections[symtab.link];
    for (let o = s.offset; o + 24 <= s.offset + s.size; o += 24) {
      const info = f.buf.readBigUInt64LE(o + 8);
      const symIndex = Number(info >> 32n);
      const sym = symtab ? symbolAt(f, symtab.offset, strtab ? strtab.offset : -1, symIndex) : null;
      yield {
        offset: f.buf.readBigUInt64LE(o),
        type: Number(info & 0xffffffffn),
        symIndex,
        addend: f.buf.readBigInt64LE(o + 16),
        symName: sym ? sym.name : '',
      };
    }
  }
}

// Symbols of a symbol-table section (.dynsym or .symtab), by name.
function* symbols(f, sectionName) {
  const s = f.sections.find((x) => x.name === sectionName);
  if (!s) return;
  const strtab = f.sections[s.link];
  for (let i = 0; i < s.size / 24; i++) yield symbolAt(f, s.offset, strtab.offset, i);
}

// The parsed file at `file`, once per file and version: profilers cache
// what they learn from a file (by its identity).  A Node.js binary is some
// hundred megabytes, of which the readers need the headers and the
// sections of symbols, strings, hashes, relocations and the dynamic
// table: only those are read into the file's image.  null for a file that
// is not ELF64 (skipped, as pfelf.ErrNotELF).
const cache = new Map();
const WANTED = new Set([2, 3, 4, 5, 6, 11, 0x6ffffff6]); // SYMTAB STRTAB RELA HASH DYNAMIC DYNSYM GNU_HASH
function open(file) {
  const fs = require('node:fs');
  let fd;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    const key = `${file}\0${st.dev}:${st.ino}:${st.mtimeMs}`;
    if (cache.has(key)) return cache.get(key);
    let f = null;
    try {
      const buf = Buffer.allocUnsafeSlow(st.size);
      const fill = (at, n) => {
        if (at < 0 || n <= 0 || at + n > st.size) return;
        if (fs.readSync(fd, buf, at, n, at) !== n) throw new Error(`short read of ${file}`);
      };
      fill(0, Math.min(64, st.size));
      if (st.size >= 64 && buf.readUInt32BE(0) === 0x7f454c46 && buf[4] === 2 && buf[5] === 1) {
        const phoff = Number(buf.readBigUInt64LE(32));
        const shoff = Number(buf.readBigUInt64LE(40));
        fill(phoff, buf.readUInt16LE(54) * buf.readUInt16LE(56));
        fill(shoff, buf.readUInt16LE(58) * buf.readUInt16LE(60));
        const shentsize = buf.readUInt16LE(58);
        for (let i = 0; i < buf.readUInt16LE(60); i++) {
          const o = shoff + i * shentsize;
          if (WANTED.has(buf.readUInt32LE(o + 4))) fill(Number(buf.readBigUInt64LE(o + 24)), Number(buf.readBigUInt64LE(o + 32)));
        }
        for (let i = 0; i < buf.readUInt16LE(56); i++) {
          const o = phoff + i * buf.readUInt16LE(54);
          if (buf.readUInt32LE(o) === PT.DYNAMIC) fill(Number(buf.readBigUInt64LE(o + 8)), Number(buf.readBigUInt64LE(o + 32)));
        }
        f = parse(buf);
      }
    } catch {
      f = null;
    }
    cache.set(key, f);
    return f;
  } finally {
    fs.closeSync(fd);
  }
}

module.exports = { open, PT, PF_X, DT, EM, STT_TLS, RELOC, parse, fileOffset, dynValue, symbolAt, relocations, symbols, cstr };
