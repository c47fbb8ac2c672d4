'use strict';
// The ELF look-ups of the eBPF profiler's ELF library, libpf/pfelf, which
// Parca Agent's fork and the OpenTelemetry profiler share; re-implemented
// from:
//   parca-dev/opentelemetry-ebpf-profiler @9ece4f9e38358962fb540b43714c5c3bf24713b5
//     libpf/pfelf/file.go: LookupSymbol (DT_GNU_HASH, else DT_HASH, over the
//     dynamic symbols; a symbol's name must match exactly), calcGNUHash,
//     calcSysvHash, VisitRelocations (every SHT_RELA section, the symbol
//     name from the section's linked symbol table, relocations classified
//     per machine), visitSymbolTable;
//     libpf/pfelf/addressmapper.go: FileOffsetToVirtualAddress over the
//     executable PT_LOAD headers, offsets aligned down to the page size.
//   open-telemetry/opentelemetry-ebpf-profiler PR #1229 head
//     @4905b24680d8d3445b42a93bbaec846b517ca188, libpf/pfelf/file.go: the
//     same, plus RelTPOFF64 and the symbol's st_info.

const elf = require('./elf');

const REL = { TLSDESC: 1, DTPMOD64: 2, TPOFF64: 4 };

// calcGNUHash: h = 5381; h += h*32 + c, in 32 bits.
function gnuHash(name) {
  let h = 5381;
  for (const c of Buffer.from(name, 'latin1')) h = (h + Math.imul(h, 32) + c) >>> 0;
  return h;
}

// calcSysvHash.
function sysvHash(name) {
  let h = 0;
  for (const c of Buffer.from(name, 'latin1')) {
    h = (Math.imul(16, h) + c) >>> 0;
    h = (h ^ ((h >>> 24) & 0xf0)) >>> 0;
  }
  return (h & 0x0fffffff) >>> 0;
}

// readAndMatchSymbol: the dynamic symbol n, if its name is `name`.
function matchSymbol(f, n, name) {
  const symtab = elf.fileOffset(f, elf.dynValue(f, elf.DT.SYMTAB));
  const strtab = elf.fileOffset(f, elf.dynValue(f, elf.DT.STRTAB));
  const sym = elf.symbolAt(f, symtab, -1, n);
  const at = strtab + sym.nameAt;
  if (f.buf.toString('latin1', at, at + name.length) !== name || f.buf[at + name.length] !== 0) return null;
  return { name, address: sym.value, size: sym.size, info: sym.info };
}

// LookupSymbol: null where pfelf answers ErrSymbolNotFound.
function lookupSymbol(f, name) {
  const b = f.buf;
  const gnu = elf.dynValue(f, elf.DT.GNU_HASH);
  const sysv = elf.dynValue(f, elf.DT.HASH);
  if (gnu !== null) {
    let o = elf.fileOffset(f, gnu);
    const numBuckets = b.readUInt32LE(o);
    const symbolOffset = b.readUInt32LE(o + 4);
    const bloomSize = b.readUInt32LE(o + 8);
    const bloomShift = b.readUInt32LE(o + 12);
    if (numBuckets === 0 || bloomSize === 0) throw new Error('DT_GNU_HASH corrupt');
    let h = gnuHash(name);
    o += 16;
    const bloom = b.readBigUInt64LE(o + 8 * (Math.floor(h / 64) % bloomSize));
    const mask = (1n << BigInt(h % 64)) | (1n << BigInt((h >>> bloomShift) % 64));
    if ((bloom & mask) !== mask) return null;
    o += bloomSize * 8;
    let i = b.readUInt32LE(o + 4 * (h % numBuckets));
    if (i === 0) return null;
    o += 4 * numBuckets + 4 * (i - symbolOffset);
    h = (h | 1) >>> 0;
    for (;;) {
      const h2 = b.readUInt32LE(o);
      if (h === ((h2 | 1) >>> 0)) {
        const s = matchSymbol(f, i, name);
        if (s) return s;
      }
      if (h2 & 1) break;
      o += 4;
      i++;
    }
    return null;
  }
  if (sysv !== null) {
    let o = elf.fileOffset(f, sysv);
    const numBuckets = b.readUInt32LE(o);
    const numSymbols = b.readUInt32LE(o + 4);
    o += 8;
    let i = b.readUInt32LE(o + 4 * (sysvHash(name) % numBuckets));
    o += 4 * numBuckets;
    while (i !== 0 && i < numSymbols) {
      const s = matchSymbol(f, i, name);
      if (s) return s;
      i = b.readUInt32LE(o + 4 * i);
    }
    return null;
  }
  throw new Error('no symbol hash (ErrNoSymbolHash)');
}

// VisitRelocations(visitor, relTypes): visitor(rela, symName, relType)
// returns false to stop.
function visitRelocations(f, relTypes, visitor) {
  const types = elf.RELOC[f.machine];
  if (!types) return;
  for (const r of elf.relocations(f)) {
    const relType = r.type === types.TLSDESC ? REL.TLSDESC
      : r.type === types.DTPMOD64 ? REL.DTPMOD64
        : r.type === types.TPOFF64 ? REL.TPOFF64 : 0;
    if ((relType & relTypes) === 0) continue;
    if (!visitor(r, r.symName, relType)) return;
  }
}

// VisitSymbols (.symtab) with a visitor that stops at the first symbol
// named `name`: that symbol, or null.  Names are compared as bytes (a
// Node.js binary has some hundred thousand symbols).  A profiler looks a
// file's symbols up once and keeps what it found with the file's
// information, so the answer is kept per parsed file (elf.open makes one
// per file and version) and name: a test that reads a thread many times
// scans the table once, which under qemu-user takes seconds.
const symbolsFound = new WeakMap();
function firstSymbolNamed(f, name) {
  let found = symbolsFound.get(f);
  if (found === undefined) symbolsFound.set(f, (found = new Map()));
  if (!found.has(name)) found.set(name, scanSymbols(f, name));
  const sym = found.get(name);
  return sym === null ? null : { ...sym };
}

function scanSymbols(f, name) {
  const s = f.sections.find((x) => x.name === '.symtab');
  if (!s) return null;
  const strtab = f.sections[s.link].offset;
  const want = Buffer.from(`${name}\0`, 'latin1');
  for (let i = 0; i < s.size / 24; i++) {
    const at = strtab + f.buf.readUInt32LE(s.offset + i * 24);
    if (f.buf.compare(want, 0, want.length, at, at + want.length) === 0) {
      const sym = elf.symbolAt(f, s.offset, strtab, i);
      return { name, address: sym.value, size: sym.size, info: sym.info };
    }
  }
  return null;
}

// FileOffsetToVirtualAddress, with the page size a profiler on this
// machine's kernel would use (4 KiB on x86-64 and on Debian's arm64
// kernels).
const PAGE = 4096n;
function fileOffsetToVirtualAddress(f, fileOffset) {
  for (const p of f.progs) {
    if (p.type !== elf.PT.LOAD || (p.flags & elf.PF_X) === 0) continue;
    const aligned = p.offset & ~(PAGE - 1n);
    if (fileOffset >= aligned && fileOffset < p.offset + p.filesz) return p.vaddr - (p.offset - fileOffset);
  }
  return null;
}

module.exports = { REL, lookupSymbol, visitRelocations, firstSymbolNamed, fileOffsetToVirtualAddress, gnuHash };
