'use strict';
// customlabels-dump reads memory and ELF files of other processes, which may
// be hostile, so binding.gyp builds it hardened: PIE, full RELRO, stack
// protector and _FORTIFY_SOURCE.  These tests read the built binary with
// readelf, as a distribution's hardening check would.  So that each check is
// known to be able to fail, the same checks are also run on a copy of the
// tool built here without any of the hardening, and must all report it
// missing.
//
// Needs Linux (x86-64 or aarch64), readelf (binutils) and gcc.

const assert = require('node:assert/strict');
const { execFile, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const needs = require('./helpers/needs');
const { promisify } = require('node:util');

const ROOT = path.resolve(__dirname, '..');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const SRC = path.join(ROOT, 'dump');

function readelf(file, ...args) {
  const r = spawnSync('readelf', ['-W', ...args, file], { encoding: 'utf8' });
  assert.equal(r.status, 0, `readelf ${args.join(' ')} ${file} failed: ${r.stderr}`);
  return r.stdout;
}

// What readelf says about the hardening of one ELF file.
function inspect(file) {
  const type = /^\s*Type:\s+(\w+)/m.exec(readelf(file, '-h'))?.[1];
  const dynamic = readelf(file, '-d');
  const flags = (/\(FLAGS\)\s+(.*)$/m.exec(dynamic)?.[1] ?? '').split(/\s+/).filter(Boolean);
  const flags1 = (/\(FLAGS_1\)\s+Flags:\s+(.*)$/m.exec(dynamic)?.[1] ?? '').split(/\s+/).filter(Boolean);
  const segments = readelf(file, '-l').split('\n')
    .map((line) => /^\s+([A-Z_]+)\s+0x/.exec(line)?.[1]).filter(Boolean);
  const symbols = readelf(file, '--dyn-syms').split('\n')
    .map((line) => /^\s*\d+:\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)/.exec(line)?.[1])
    .filter(Boolean).map((name) => name.split('@')[0]);
  return {
    type,
    flags,
    flags1,
    segments,
    symbols,
    pie: type === 'DYN' && flags1.includes('PIE'),
    relro: segments.includes('GNU_RELRO'),
    bindNow: flags.includes('BIND_NOW') || flags1.includes('NOW') || /\(BIND_NOW\)/.test(dynamic),
    stackProtector: symbols.includes('__stack_chk_fail'),
    fortified: symbols.filter((s) => /^__\w+_chk$/.test(s) && !s.startsWith('__stack_chk')),
  };
}

describe('customlabels-dump hardening (readelf)', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    needs.tool(this, 'readelf');
    assert.ok(fs.existsSync(DUMP), `${DUMP} is missing: run npm install`);
  });

  describe('the built tool', () => {
    let elf;
    before(() => { elf = inspect(DUMP); });

    it('is a position-independent executable: type DYN with PIE in DT_FLAGS_1', () => {
      assert.equal(elf.type, 'DYN', `ELF type is ${elf.type}`);
      assert.ok(elf.flags1.includes('PIE'), `DT_FLAGS_1 is [${elf.flags1}], without PIE`);
    });

    it('has a GNU_RELRO segment', () => {
      assert.ok(elf.relro, `program headers: ${elf.segments.join(' ')}`);
    });

    it('binds every symbol at startup (BIND_NOW), so the GOT can be read-only: full RELRO', () => {
      assert.ok(elf.bindNow, `DT_FLAGS [${elf.flags}], DT_FLAGS_1 [${elf.flags1}]: no BIND_NOW or NOW`);
    });

    it('calls __stack_chk_fail (-fstack-protector-strong)', () => {
      assert.ok(elf.stackProtector, 'no __stack_chk_fail among the dynamic symbols');
    });

    it('calls fortified __*_chk functions (-D_FORTIFY_SOURCE=2)', () => {
      assert.ok(elf.fortified.length > 0,
        `no __*_chk function among the dynamic symbols: ${elf.symbols.join(' ')}`);
    });
  });

  describe('the checks themselves, on a build without hardening', () => {
    let tmp;
    let elf;

    before(async function () {
      needs.tool(this, 'gcc');
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-hardening-'));
      const exe = path.join(tmp, 'customlabels-dump-plain');
      const arch = process.arch === 'arm64' ? 'arch_aarch64.c' : 'arch_x86_64.c';
      const sources = fs.readdirSync(SRC)
        .filter((n) => n.endsWith('.c') && !n.startsWith('arch_') && n !== 'tlsmath_test.c')
        .concat(arch).map((n) => path.join(SRC, n));
      await promisify(execFile)('gcc', ['-std=c11', '-O2', '-fno-stack-protector', '-U_FORTIFY_SOURCE',
        '-D_FORTIFY_SOURCE=0', '-fno-PIE', '-no-pie', '-Wl,-z,norelro', '-Wl,-z,lazy',
        '-o', exe, ...sources]);
      elf = inspect(exe);
    });

    after(() => {
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('report every protection missing', () => {
      assert.deepEqual(
        { pie: elf.pie, relro: elf.relro, bindNow: elf.bindNow, stackProtector: elf.stackProtector,
          fortified: elf.fortified },
        { pie: false, relro: false, bindNow: false, stackProtector: false, fortified: [] });
      assert.equal(elf.type, 'EXEC');
    });
  });
});
