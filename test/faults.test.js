'use strict';
// Fault containment: each internal step the package takes is made to fail
// in turn, from outside the package (test/fixtures/fault-child.js), and the
// process lives, getLabels() stays right through awaits, immediates and
// timers, a reader reads no set from the thread, and exactly one warning
// names the cause.

const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { usesAsyncContextFrame } = require('../lib/platform');

const CHILD = path.join(__dirname, 'fixtures', 'fault-child.js');

function run(fault, env = {}) {
  const r = spawnSync(process.execPath, [...process.execArgv, '--expose-internals', CHILD, fault], {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, ...env },
  });
  assert.strictEqual(r.status, 0, `the process did not live: ${r.signal ?? r.status}\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function contained(r, code, cause) {
  assert.deepStrictEqual(r.wrong, [], 'getLabels() inside the work');
  assert.ok(r.lastReads.length > 0);
  for (const read of r.lastReads) assert.strictEqual(read, null, `a reader read ${JSON.stringify(read)}`);
  assert.strictEqual(r.warnings.length, 1, JSON.stringify(r.warnings));
  assert.strictEqual(r.warnings[0].code, code);
  assert.match(r.warnings[0].message, cause);
}

describe('an internal step that fails, in hooks mode', function () {
  this.timeout(120000);
  const hooks = { CUSTOMLABELS_PUBLISH: 'hooks' };
  beforeEach(function () {
    needs.platform(this);
  });

  it('mapping the label arena', function () {
    contained(run('arena', hooks), 'CUSTOMLABELS_FAULT', /writing a label set failed \(Error: .*Cannot allocate memory\)/);
  });

  it('views of the thread-locals refused (a V8 that refuses external ArrayBuffers)', function () {
    const r = run('slot', hooks);
    assert.strictEqual(r.supported, false);
    assert.match(r.reason, /view of its thread-locals/);
    contained(r, 'CUSTOMLABELS_NO_ADDON', /External buffers are not allowed.*external ArrayBuffers/);
  });

  it('publishing a set inside an async hook', function () {
    contained(run('hook', hooks), 'CUSTOMLABELS_FAULT', /publishing a label set failed \(Error: injected/);
  });

  describe('on a Node.js with AsyncContextFrame', function () {
    beforeEach(function () {
      if (!usesAsyncContextFrame()) {
        needs.feature(this, 'AsyncContextFrame', 'only a Node.js that runs AsyncLocalStorage on AsyncContextFrame has the frame class (24 and later; 22 with --experimental-async-context-frame)');
      }
    });

    it("the frame class missing: named, with what readers see", function () {
      contained(run('frameclass', hooks), 'CUSTOMLABELS_FAULT', /frame class.*was not found; without it profilers would read the caller's labels/);
    });

    it('its statics read-only', function () {
      contained(run('readonly', hooks), 'CUSTOMLABELS_FAULT', /attaching the hooks .* failed \(TypeError: /);
    });
  });
});
