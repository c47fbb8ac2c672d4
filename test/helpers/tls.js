'use strict';
// What an external profiler would see on this thread, read natively from
// the addon's TLS by a test addon that knows only what a reader knows
// (test/fixtures/reader_addon.c): the TLSDESC descriptors that the module's
// relocations filled in (found in the file and /proc/self/maps), followed
// to the thread's custom_labels_current_set and otel_thread_ctx_v1, and the
// set read by the ABI's rules (NULL-key entries skipped, first entry of a
// key wins).  The process context is read from its OTEL_CTX mapping through
// /proc/self/mem.
//
// In frame mode (CUSTOMLABELS_PUBLISH=frame, where it runs) the set is read
// from the frame V8 holds in the isolate's CPED slot instead: the store of
// the package's AsyncLocalStorage there, its internal field 0's record, the
// set at record + 24 checked by the token at + 32, and the set's bytes read
// through /proc/self/mem by the same rules.

const fs = require('node:fs');
const path = require('node:path');
const { cc } = require('./emulation');
const { nodeInclude, peek } = require('./descriptor');
const { sharedAddon } = require('./fixtures');

// The addon the tests build, which lib/ loads in a checkout.
const ADDON = path.resolve(__dirname, '../../build/Release/customlabels.node');

const FIXTURES = path.join(__dirname, '..', 'fixtures');
const SOURCES = ['reader_addon.c', 'abi_read.h'].map((name) => path.join(FIXTURES, name));

// The reader addon, built once per source, compiler and Node-API headers
// and shared by every process of the run (test/helpers/fixtures.js).
function readerAddon() {
  const file = sharedAddon('reader', cc, ['-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC',
    `-I${nodeInclude()}`, SOURCES[0]], [...SOURCES, path.join(__dirname, '../../src/customlabels.h')]);
  const module = { exports: {} };
  process.dlopen(module, file);
  return module.exports;
}

const native = readerAddon();

// ---------------------------------------------------------------------------
// Frame mode.

const { isMap } = require('node:util').types;
const TOKEN = 0xEC9EB507FB5D7903n;

function frameMode() {
  return require('../..').publishMode === 'frame';
}

// The address of the set in this thread's frame, or 0.
function frameSet() {
  const internals = require('../../lib/internals');
  const frame = internals.companion.v8.cped();
  if (!isMap(frame)) return 0;
  const store = frame.get(internals.context.state().storage);
  if (store === undefined) return 0;
  const record = internals.companion.v8.recordOf(store);
  const r = peek(BigInt(record), 40);
  if (r.readBigUInt64LE(32) !== TOKEN) throw new Error(`record at 0x${record.toString(16)} has no token`);
  return Number(r.readBigUInt64LE(24));
}

// The raw fields and entries of the set at `address`, read from memory,
// including what the ABI's reading rules would hide (holes, duplicates).
function raw(address) {
  const read = (at, length) => (length === 0 ? Buffer.alloc(0) : peek(BigInt(at), length));
  const h = read(address, 24);
  const storage = Number(h.readBigUInt64LE(0));
  const count = Number(h.readBigUInt64LE(8));
  const capacity = Number(h.readBigUInt64LE(16));
  const entries = [];
  for (let i = 0; i < count; i++) {
    const e = read(storage + 32 * i, 32);
    const keyLen = Number(e.readBigUInt64LE(0)), keyBuf = Number(e.readBigUInt64LE(8));
    const valueLen = Number(e.readBigUInt64LE(16)), valueBuf = Number(e.readBigUInt64LE(24));
    entries.push({ keyBuf, valueBuf, key: read(keyBuf, keyLen), value: read(valueBuf, valueLen) });
  }
  return { address, storage, count, capacity, entries };
}

// The set at `address` by the ABI's rules: NULL keys skipped, the first
// entry of a key wins; every label an own property.
function decode(address) {
  const result = {};
  const seen = new Set();
  for (const e of raw(address).entries) {
    if (e.keyBuf === 0) continue;
    const key = e.key.toString('utf8');
    if (seen.has(key)) continue;
    seen.add(key);
    Object.defineProperty(result, key, { value: e.value.toString('utf8'), writable: true, enumerable: true, configurable: true });
  }
  return result;
}

// The offset in `file` (a 64-bit little-endian ELF shared object) of its
// TLSDESC descriptor for `symbol`: the r_offset of the relocation of that
// type and symbol in its SHT_RELA sections.  Read here rather than with
// readelf, so that it works in a process whose PATH has no binutils.
const TLSDESC = { 62: 36, 183: 1031 }; // e_machine: R_X86_64_TLSDESC, R_AARCH64_TLSDESC
function descriptorOffset(file, symbol) {
  const elf = fs.readFileSync(file);
  const type = TLSDESC[elf.readUInt16LE(18)];
  const shoff = Number(elf.readBigUInt64LE(40));
  const section = (i) => {
    const at = shoff + i * elf.readUInt16LE(58);
    return { type: elf.readUInt32LE(at + 4), offset: Number(elf.readBigUInt64LE(at + 24)),
      size: Number(elf.readBigUInt64LE(at + 32)), link: elf.readUInt32LE(at + 40) };
  };
  const found = [];
  for (let i = 0; i < elf.readUInt16LE(60); i++) {
    const rela = section(i);
    if (rela.type !== 4) continue; // SHT_RELA
    const symtab = section(rela.link);
    const strtab = section(symtab.link);
    for (let at = rela.offset; at < rela.offset + rela.size; at += 24) {
      const info = elf.readBigUInt64LE(at + 8);
      if (Number(info & 0xffffffffn) !== type) continue;
      const name = elf.readUInt32LE(symtab.offset + Number(info >> 32n) * 24);
      const end = elf.indexOf(0, strtab.offset + name);
      if (elf.toString('latin1', strtab.offset + name, end) === symbol) found.push(elf.readBigUInt64LE(at));
    }
  }
  if (found.length !== 1) throw new Error(`${file}: ${found.length} TLSDESC relocations for ${symbol}, not one`);
  return found[0];
}

// The address of `file`'s descriptor for `symbol` in this process: its load
// base (/proc/self/maps) plus the relocation's offset.  The file must be
// loaded.
function descriptorAddress(file, symbol) {
  file = fs.realpathSync(file);
  const first = fs.readFileSync('/proc/self/maps', 'utf8').split('\n')
    .map((line) => /^([0-9a-f]+)-[0-9a-f]+ \S{4} 0+ \S+ \d+\s+(.*)$/.exec(line))
    .find((m) => m && m[2] === file);
  if (!first) throw new Error(`${file} is not loaded in this process`);
  return BigInt(`0x${first[1]}`) + descriptorOffset(file, symbol);
}

// A reader of `file`'s TLS, as a profiler that reads that file's
// descriptors sees it on the calling thread.  `file` must be loaded by the
// time it reads; the tests' own addon is loaded here if it is not yet.
function reader(file = ADDON) {
  const descriptors = {};
  const at = (symbol) => {
    if (file === ADDON) require(ADDON);
    return (descriptors[symbol] ??= descriptorAddress(file, symbol));
  };
  // null for a NULL pointer, else { key: value } decoded as UTF-8, every
  // label an own property (a key named __proto__ too).
  const published = () => {
    if (file === ADDON && frameMode()) {
      const set = frameSet();
      return set === 0 ? null : decode(set);
    }
    const pairs = native.labels(at('custom_labels_current_set'));
    if (pairs === null) return null;
    return Object.fromEntries(pairs.map(([key, value]) => [key.toString('utf8'), value.toString('utf8')]));
  };
  return {
    published,
    // The labels a profiler would attribute a sample to: {} for NULL or empty.
    seen: () => published() ?? {},
    // The published pointer's value, as a Number.
    address: () => (file === ADDON && frameMode() ? frameSet() : Number(native.pointer(at('custom_labels_current_set')))),
    // The OpenTelemetry thread-context record, as a Buffer, or null.
    record: () => native.record(at('otel_thread_ctx_v1')),
  };
}

// The OpenTelemetry process context's payload as a reader takes it from the
// OTEL_CTX mapping, or null when there is none.
function otelPayload() {
  const mapping = fs.readFileSync('/proc/self/maps', 'utf8').split('\n')
    .map((line) => /^([0-9a-f]+)-[0-9a-f]+ .*(\[anon:OTEL_CTX\]|\/memfd:OTEL_CTX)/.exec(line))
    .find(Boolean);
  if (!mapping) return null;
  const header = peek(BigInt(`0x${mapping[1]}`), 32);
  if (header.toString('latin1', 0, 8) !== 'OTEL_CTX') return null;
  const size = header.readUInt32LE(12);
  return size === 0 ? Buffer.alloc(0) : peek(header.readBigUInt64LE(24), size);
}

module.exports = {
  reader, otelPayload, raw, frameMode, ...reader(),
  // The tests' own addon, as require() loads it.
  get binding() { return require(ADDON); },
};
