'use strict';
// What the package says where Node.js, or what is on disk, keeps it from
// publishing, and that each message names the fix for that case:
// - Node.js refusing every addon: the permission model without
//   --allow-addons, and --no-addons (building cannot help, the flag can);
// - frame mode's companion present but built for another Node.js (dlopen:
//   "undefined symbol", as after switching Node.js versions): rebuild it
//   for this Node.js, with the command that does it in an install and in a
//   checkout (where `npm rebuild customlabels` finds nothing to rebuild).
// Each case runs in a child process.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { cc: CC, skipUnderEmulation } = require('./helpers/emulation');

const ROOT = path.join(__dirname, '..');
// The permission model's flag in this Node.js: --permission from 22.13,
// before that --experimental-permission (Node.js 20 knows only that one).
const PERMISSION = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';

function node(args, code, env = {}) {
  return spawnSync(process.execPath, [...args, '-e', code], {
    cwd: ROOT, encoding: 'utf8', timeout: 60000, env: { ...process.env, ...env },
  });
}

// The package's warnings in a child's stderr: [code, message].
function warnings(stderr) {
  return [...stderr.matchAll(/\[(CUSTOMLABELS_[A-Z_]+)\] Warning: (.*)/g)].map((m) => [m[1], m[2]]);
}

const REPORT = 'const cl = require(process.cwd()); process.stdout.write(JSON.stringify({ supported: cl.supported, reason: cl.unsupportedReason }));';

describe('messages that name the fix', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
  });

  it(`${PERMISSION} without --allow-addons: the reason and one warning name --allow-addons and the flag this Node.js has, in sentences with one period`, function () {
    const r = node([PERMISSION, '--allow-fs-read=*'], REPORT);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.supported, false);
    assert.ok(out.reason.endsWith(`permission model (${PERMISSION}), which loads no native addon without --allow-addons`), out.reason);
    const w = warnings(r.stderr);
    assert.equal(w.length, 1, r.stderr);
    assert.equal(w[0][0], 'CUSTOMLABELS_NO_ADDON');
    assert.ok(w[0][1].endsWith(`without --allow-addons. Start Node.js with --allow-addons beside ${PERMISSION}.`), w[0][1]);
    assert.doesNotMatch(w[0][1], /\.\./);
    assert.doesNotMatch(w[0][1], /install-scripts|rebuild/, 'building cannot help');
    // And the fix it names works.
    const fixed = node([PERMISSION, '--allow-fs-read=*', '--allow-addons'], REPORT);
    assert.equal(fixed.status, 0, fixed.stderr);
    assert.deepEqual(JSON.parse(fixed.stdout), { supported: true, reason: null });
  });

  it('--no-addons: the warning says to start Node.js without it', function () {
    const r = node(['--no-addons'], REPORT);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).supported, false);
    const w = warnings(r.stderr);
    assert.equal(w.length, 1, r.stderr);
    assert.match(w[0][1], /Node\.js runs with --no-addons, which loads no native addon\. Start Node\.js without --no-addons\.$/);
  });

  describe('a companion built for another Node.js', function () {
    let tmp;

    // A copy of the package at `dir` (lib/, package.json, the built addon,
    // node_modules linked) whose companion is `companion`.
    function packageAt(dir, companion) {
      fs.mkdirSync(path.join(dir, 'build', 'Release', 'v8'), { recursive: true });
      fs.cpSync(path.join(ROOT, 'lib'), path.join(dir, 'lib'), { recursive: true });
      fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
      fs.copyFileSync(require('../lib/addon').file, path.join(dir, 'build', 'Release', 'customlabels.node'));
      fs.copyFileSync(companion, path.join(dir, 'build', 'Release', 'v8', 'customlabels-v8.node'));
      if (!fs.existsSync(path.join(dir, 'node_modules'))) fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    }

    function companionReason(dir) {
      const code = `process.stdout.write(JSON.stringify(require(${JSON.stringify(path.join(dir, 'lib', 'companion.js'))}).loadCompanion().reason))`;
      const r = node([], code);
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout);
    }

    before(function () {
      needs.tool(this, CC);
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cl-advice-'));
    });

    after(function () {
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('exists but does not load (undefined symbol): says so and names the rebuild, from an install and from a checkout', function () {
      // A shared object that needs a symbol this process does not have,
      // as a companion built against another Node.js's V8 does.
      const src = path.join(tmp, 'other.c');
      fs.writeFileSync(src, 'extern void v8_of_another_node(void);\nvoid call(void) { v8_of_another_node(); }\n');
      const other = path.join(tmp, 'other.so');
      execFileSync(CC, ['-shared', '-fPIC', '-o', other, src]);

      const installed = path.join(tmp, 'app', 'node_modules', 'customlabels');
      fs.mkdirSync(path.join(tmp, 'app', 'node_modules'), { recursive: true });
      fs.symlinkSync(path.join(ROOT, 'node_modules', 'node-gyp-build'), path.join(tmp, 'app', 'node_modules', 'node-gyp-build'), 'dir');
      packageAt(installed, other);
      const checkout = path.join(tmp, 'checkout');
      packageAt(checkout, other);

      for (const [dir, fix] of [
        [installed, /rebuild it for this Node\.js with `npm rebuild customlabels --build-from-source` in the project that installed it/],
        [checkout, new RegExp(`rebuild it for this Node\\.js with \`npm run install --build-from-source\` in ${checkout.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`)],
      ]) {
        const reason = companionReason(dir);
        assert.match(reason, new RegExp(`^the companion customlabels-v8 was built for another Node\\.js than ${process.versions.node.replace(/\./g, '\\.')} \\(ABI ${process.versions.modules}\\)`));
        assert.match(reason, /customlabels-v8\.node \(undefined symbol: v8_of_another_node\) did not load/);
        assert.match(reason, fix);
        assert.equal(reason.split(path.join(dir, 'build', 'Release', 'v8', 'customlabels-v8.node')).length, 2, `the file is named once: ${reason}`);
      }
    });

    it('exists but cannot be read (EACCES): says so, with the file and the OS error, and not that it was built for another Node.js', function () {
      // Under emulation the suite runs in a user namespace of its own
      // (.ci/arm64), where a child cannot take another user's id.
      if (process.getuid() === 0) skipUnderEmulation(this, 'the suite runs in a user namespace where a child cannot run as another user');
      const dir = path.join(tmp, 'unreadable');
      packageAt(dir, require('../lib/addon').file);
      const companion = path.join(dir, 'build', 'Release', 'v8', 'customlabels-v8.node');
      fs.chmodSync(companion, 0o000);
      // root reads any file: the child runs as nobody there, and nobody
      // needs to reach the copy.
      const asNobody = process.getuid() === 0;
      if (asNobody) {
        for (let d = dir; d !== path.dirname(tmp); d = path.dirname(d)) fs.chmodSync(d, 0o755);
      }
      const code = `process.stdout.write(JSON.stringify(require(${JSON.stringify(path.join(dir, 'lib', 'companion.js'))}).loadCompanion().reason))`;
      const r = spawnSync(process.execPath, ['-e', code], {
        cwd: '/', encoding: 'utf8', timeout: 60000, ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
      });
      assert.equal(r.status, 0, r.stderr);
      const reason = JSON.parse(r.stdout);
      assert.equal(reason, `the companion customlabels-v8 cannot be read: ${companion} (EACCES: permission denied); let the user that runs Node.js read it`);
    });
  });
});
