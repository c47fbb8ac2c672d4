'use strict';
// Reading this process's own TLS the way an eBPF profiler reads another's,
// without ptrace, so that it also works under qemu-user (.ci/arm64): the
// addon's TLSDESC descriptor for custom_labels_current_set, read from its
// GOT through /proc/self/mem at the load base (/proc/self/maps) plus the
// relocation's offset (readelf), and the calling thread's thread pointer,
// from a test addon (test/fixtures/tp_addon.c).  test/static-tls.test.js
// checks that the descriptor is glibc's static one.

const assert = require('node:assert/strict');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { cc } = require('./emulation');

const SOURCE = path.join(__dirname, '..', 'fixtures', 'tp_addon.c');

// Node-API headers: beside this node, else the system's.
function nodeInclude() {
  const beside = path.resolve(path.dirname(process.execPath), '../include/node');
  return fs.existsSync(path.join(beside, 'node_api.h')) ? beside : '/usr/include/node';
}

// test/fixtures/tp_addon.c, built once per test process (every test file
// that reads thread pointers shares it) into a directory removed at exit;
// returns the file's path.
let tpAddon = null;
function threadPointerAddon() {
  if (tpAddon !== null) return tpAddon;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-tp-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'tp.node');
  execFileSync(cc, ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC',
    `-I${nodeInclude()}`, '-o', file, SOURCE]);
  tpAddon = file;
  return file;
}

// `length` bytes of this process's memory at `address` (a BigInt), read as
// a debugger would but from inside, without ptrace (so under qemu-user too,
// where guest addresses are the emulator's own).
function peek(address, length) {
  const fd = fs.openSync('/proc/self/mem', 'r');
  try {
    const buf = Buffer.alloc(length);
    assert.equal(fs.readSync(fd, buf, 0, length, Number(address)), length, `read ${length} bytes at 0x${address.toString(16)}`);
    return buf;
  } finally {
    fs.closeSync(fd);
  }
}

const word = (address) => peek(address, 8).readBigUInt64LE(0);

// The offset in `file` of the GOT descriptor for `symbol` (readelf): the
// address of its one TLSDESC relocation.
function descriptorOffset(file, symbol = 'custom_labels_current_set') {
  const r = spawnSync('readelf', ['-W', '-r', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, `readelf -r ${file} failed: ${r.error ?? r.stderr}`);
  const relocs = r.stdout.split('\n')
    .map((line) => /^([0-9a-f]{8,})\s+[0-9a-f]{8,}\s+(R_\w+_TLSDESC)\s+[0-9a-f]+\s+(\S+)/.exec(line))
    .filter((m) => m && m[3].split('@')[0] === symbol);
  assert.equal(relocs.length, 1, `one TLSDESC relocation for ${symbol}`);
  return BigInt(`0x${relocs[0][1]}`);
}

// { resolver, arg } of the descriptor at `offset` in `file` as loaded in
// this process: at its load base (/proc/self/maps) plus the offset.
function descriptorAt(file, offset) {
  const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\n');
  const first = maps.map((line) => /^([0-9a-f]+)-[0-9a-f]+ \S{4} 0+ \S+ \d+\s+(.*)$/.exec(line))
    .find((m) => m && m[2] === file);
  assert.ok(first, `${file} is not mapped from offset 0`);
  const words = peek(BigInt(`0x${first[1]}`) + offset, 16);
  return { resolver: words.readBigUInt64LE(0), arg: words.readBigInt64LE(8) };
}

// { resolver, arg } of `file`'s descriptor for `symbol`.
function descriptor(file, symbol = 'custom_labels_current_set') {
  return descriptorAt(file, descriptorOffset(file, symbol));
}

module.exports = { nodeInclude, threadPointerAddon, descriptor, descriptorOffset, descriptorAt, peek, word };
