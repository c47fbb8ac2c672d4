'use strict';
// The addon and customlabels-dump load on glibc 2.28 (RHEL 8 and its
// rebuilds, Debian 11's 2.31), though they are built on a newer glibc:
// no symbol version either file needs is newer (src/glibc_compat.h,
// dump/glibc_compat.c).  Checked with readelf, as the dynamic loader
// checks it, on the files built from source and on the prebuilt files that
// `npm pack` made, where there are any.  So that the check is known to be
// able to fail, it must see glibc 2.34's versions in a file built here
// without those bindings.
//
// Needs Linux (x86-64 or aarch64), readelf (binutils) and gcc.

const assert = require('node:assert/strict');
const { execFile, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { OLDEST, compareVersions, newestGlibc } = require('./helpers/glibc');
const { cc } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const ROOT = path.resolve(__dirname, '..');
const FILES = ['customlabels.node', 'customlabels-dump'];

function have(command) {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}

function assertOldEnough(file) {
  const newest = newestGlibc(file);
  assert.ok(newest === null || compareVersions(newest, OLDEST) <= 0,
    `${path.relative(ROOT, file)} needs GLIBC_${newest}, newer than ${OLDEST}`);
}

describe('the glibc the native files need (readelf -V)', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    assert.ok(have('readelf'), 'readelf is needed for this test (Debian: apt-get install binutils)');
  });

  for (const name of FILES) {
    it(`build/Release/${name} needs no glibc newer than ${OLDEST}`, () => {
      const file = path.join(ROOT, 'build', 'Release', name);
      assert.ok(fs.existsSync(file), `${file} is missing: run npm install`);
      assertOldEnough(file);
    });
  }

  for (const arch of ['x64', 'arm64']) {
    for (const name of FILES) {
      it(`prebuilds/linux-${arch}/${name}, where npm pack made it, needs no glibc newer than ${OLDEST}`, function () {
        const file = path.join(ROOT, 'prebuilds', `linux-${arch}`, name);
        if (!fs.existsSync(file)) {
          needs.feature(this, 'prebuilds', `no ${path.relative(ROOT, file)}; npm pack makes it`);
        }
        assertOldEnough(file);
      });
    }
  }

  it('sees the newer versions in a file built without the bindings', async function () {
    if (!have(cc)) assert.fail(`${cc} is needed for this test (Debian: apt-get install build-essential)`);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-glibc-'));
    try {
      const src = path.join(dir, 'plain.c');
      const out = path.join(dir, 'plain.so');
      fs.writeFileSync(src, [
        '#define _GNU_SOURCE',
        '#include <dlfcn.h>',
        '#include <pthread.h>',
        'static pthread_once_t once = PTHREAD_ONCE_INIT;',
        'static void nothing(void) {}',
        'void *plain(void) { pthread_once(&once, nothing); return dlopen("libc.so.6", RTLD_NOW); }',
        '',
      ].join('\n'));
      await promisify(execFile)(cc, ['-shared', '-fPIC', '-o', out, src]);
      const newest = newestGlibc(out);
      if (newest === null || compareVersions(newest, '2.34') < 0) {
        needs.feature(this, 'glibc 2.34', `this machine's glibc is older than 2.34 (a plain build needs GLIBC_${newest}), so no newer version can appear`);
      }
      assert.throws(() => assertOldEnough(out), new RegExp(`needs GLIBC_${newest.replace(/\./g, '\\.')}, newer than`));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
