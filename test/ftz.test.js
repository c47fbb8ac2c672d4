'use strict';
// Publication must not depend on the floating-point modes of the thread.  A
// library built with -ffast-math turns on flush-to-zero when it loads
// (x86-64 MXCSR FTZ|DAZ, aarch64 FPCR.FZ); a test addon does the same here,
// in a child process, and every publication is then read back natively.
// On aarch64 (FPCR.FZ) this runs under .ci/arm64.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { supported, unsupportedReason } = require('..');
const { cc, emulated } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { nodeInclude } = require('./helpers/descriptor');

const CHILD = path.join(__dirname, 'fixtures', 'ftz-child.js');
const SOURCE = path.join(__dirname, 'fixtures/ftz_addon.c');

describe('flush-to-zero', function () {
  // Emulated (.ci/arm64), the child's 100000 sets take about 80 s.
  this.timeout(emulated ? 600000 : 120000);
  let tmp;
  let addon;

  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-ftz-'));
    addon = path.join(tmp, 'ftz.node');
    execFileSync(cc, ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC',
      `-I${nodeInclude()}`, '-o', addon, SOURCE]);
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('every set is published exactly, sync, after await, in timers and in a worker', () => {
    const out = JSON.parse(execFileSync(process.execPath, [CHILD, addon, '100000'], { encoding: 'utf8' }));
    // The modes really were on, in both threads.
    const on = process.arch === 'x64' ? (1 << 15) | (1 << 6) : 1 << 24;
    for (const r of [out, out.worker]) {
      assert.equal(r.mode & on, on, `mode 0x${r.mode.toString(16)}`);
      for (const place of ['sync', 'await', 'timers']) {
        assert.ok(r[place].checked > 0, place);
        assert.equal(r[place].wrong, 0, `${place}: ${r[place].wrong} of ${r[place].checked} publications were wrong`);
      }
    }
  });
});
