'use strict';
// Tests that need a missing tool skip, and the run ends with one line that
// lists what was skipped and the apt-get line for the tools; with
// CUSTOMLABELS_TEST_STRICT=1 (as in CI) a missing tool fails instead, and a
// missing machine feature still skips (test/helpers/needs.js,
// test/helpers/skip-summary.js).  Each case runs mocha with the project's
// .mocharc.json on test/fixtures/skips/needs.spec.js, with a PATH that
// holds only what the case puts there.  And scripts/prebuild.js, which
// leaves out an architecture it has no cross compiler for, refuses to under
// CUSTOMLABELS_TEST_STRICT=1.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const MOCHA = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js');
const SPEC = path.join(__dirname, 'fixtures', 'skips', 'needs.spec.js');

describe('skips for a missing tool or machine feature, and CUSTOMLABELS_TEST_STRICT', function () {
  this.timeout(60000);
  let tmp;
  let config;

  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-skips-'));
    // The project's mocha configuration, on the fixture only.
    const rc = JSON.parse(fs.readFileSync(path.join(ROOT, '.mocharc.json'), 'utf8'));
    assert.ok(rc.require.includes('test/helpers/skip-summary.js'), '.mocharc.json registers the summary');
    config = path.join(tmp, 'mocharc.json');
    fs.writeFileSync(config, JSON.stringify({ ...rc, spec: [SPEC] }));
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  // A directory for PATH holding `tools` (empty executable scripts).
  function bin(name, tools = []) {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir);
    for (const tool of tools) fs.writeFileSync(path.join(dir, tool), '#!/bin/sh\n', { mode: 0o755 });
    return dir;
  }

  function mocha(PATH, strict) {
    const env = { ...process.env, PATH };
    delete env.CUSTOMLABELS_TEST_STRICT;
    if (strict) env.CUSTOMLABELS_TEST_STRICT = '1';
    const r = spawnSync(process.execPath, [MOCHA, '--config', config], { cwd: ROOT, env, encoding: 'utf8', timeout: 50000 });
    const lines = r.stdout.split('\n').map((l) => l.trim()).filter(Boolean);
    return { status: r.status, out: `${r.stdout}${r.stderr}`, last: lines[lines.length - 1] };
  }

  it('without gdb: its test is pending with the reason, the run passes, and the last line names both groups and apt-get install gdb', () => {
    const r = mocha(bin('none'), false);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /\(skipped: gdb is not installed \(Debian: apt-get install gdb\)\)/);
    assert.match(r.out, /1 passing[\s\S]*2 pending/);
    assert.equal(r.last, 'skipped: gdb (1 test), a feature (1 test: this machine has no such feature); ' +
      'to run the tools\' tests: apt-get install gdb', r.out);
  });

  it('without gdb, CUSTOMLABELS_TEST_STRICT=1: its test fails and says why; the feature is still skipped and listed', () => {
    const r = mocha(bin('none-strict'), true);
    assert.equal(r.status, 1, r.out);
    assert.match(r.out, /1 passing[\s\S]*1 pending[\s\S]*1 failing/);
    assert.match(r.out, /needs gdb:\s+Error: gdb is not installed \(Debian: apt-get install gdb\); CUSTOMLABELS_TEST_STRICT=1 makes a missing tool a failure/);
    assert.equal(r.last, 'skipped: a feature (1 test: this machine has no such feature)', r.out);
  });

  it('with gdb on PATH, CUSTOMLABELS_TEST_STRICT=1: its test runs, and only the feature is listed', () => {
    const r = mocha(bin('gdb', ['gdb']), true);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /2 passing[\s\S]*1 pending/);
    assert.equal(r.last, 'skipped: a feature (1 test: this machine has no such feature)', r.out);
  });

  it('npm pack under CUSTOMLABELS_TEST_STRICT=1 without the cross compiler: prebuild.js fails, naming what to install', () => {
    const other = process.arch === 'x64' ? 'arm64' : 'x64';
    const env = { ...process.env, PATH: bin('prebuild'), CUSTOMLABELS_TEST_STRICT: '1', npm_command: 'pack' };
    const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'prebuild.js')], { cwd: ROOT, env, encoding: 'utf8', timeout: 50000 });
    assert.equal(r.status, 1, `${r.stdout}${r.stderr}`);
    const install = { arm64: 'gcc-aarch64-linux-gnu libc6-dev-arm64-cross', x64: 'gcc-x86-64-linux-gnu libc6-dev-amd64-cross' }[other];
    assert.equal(r.stderr, `prebuild: cannot build linux-${other} (no ${{ arm64: 'aarch64', x64: 'x86_64' }[other]}-linux-gnu-gcc; ` +
      `Debian: apt-get install ${install}), which CUSTOMLABELS_TEST_STRICT=1 requires\n`);
    assert.equal(r.stdout, '', 'nothing was built');
  });
});
