'use strict';
// Fault containment: each internal step the package takes is made to fail
// in turn, from outside the package (test/fixtures/fault-child.js), and the
// process lives, getLabels() stays right through awaits, immediates and
// timers, a reader reads no set from the thread (in frame mode: no set, or
// the set of a flow that began before the fault, which is still that
// flow's), and exactly one warning names the cause.

const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { skipUnderEmulation } = require('./helpers/emulation');
const { usesAsyncContextFrame } = require('../lib/platform');

const CHILD = path.join(__dirname, 'fixtures', 'fault-child.js');

function run(fault, env = {}) {
  const r = spawnSync(process.execPath, [...process.execArgv, '--expose-internals', CHILD, fault], {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, ...env },
  });
  assert.strictEqual(r.status, 0, `the process did not live: ${r.signal ?? r.status}\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

// `older`: a reader may read the set of a flow that began before the
// fault, which must then be what getLabels() says there.
function contained(r, code, cause, { older = false } = {}) {
  assert.deepStrictEqual(r.wrong, [], 'getLabels() inside the work');
  assert.ok(r.reads.length > 0);
  for (const { read, got } of r.reads) {
    if (older && read !== null) assert.deepStrictEqual(read, got, 'a reader reads the right set');
    else assert.strictEqual(read, null, `a reader read ${JSON.stringify(read)}`);
  }
  assert.strictEqual(r.warnings.length, 1, JSON.stringify(r.warnings));
  assert.strictEqual(r.warnings[0].code, code);
  assert.match(r.warnings[0].message, cause);
}

// Nothing failed that the mode uses: every read is the right set, and
// `codes` are the only warnings.
function unaffected(r, codes = []) {
  assert.deepStrictEqual(r.wrong, [], 'getLabels() inside the work');
  for (const { read, got } of r.reads) assert.deepStrictEqual(read ?? {}, got, 'a reader reads the right set');
  assert.ok(r.reads.some(({ read }) => read !== null));
  assert.deepStrictEqual(r.warnings.map((w) => w.code), codes);
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

describe('an internal step that fails, in frame mode', function () {
  this.timeout(120000);
  const frame = { CUSTOMLABELS_PUBLISH: 'frame' };
  before(function () {
    needs.frameMode(this);
  });

  const starting = /starting frame mode failed \(Error: injected: the companion's/;
  const writing = /writing a label set failed \(Error: injected: the companion's/;
  // [fault, environment, cause, whether a flow from before the fault goes on]
  const cases = [
    ['companion:cped', {}, starting, false],
    ['companion:storeAls', {}, starting, false],
    ['companion:storeOtelAls', {}, starting, false],
    ['companion:chunk', {}, starting, false],
    ['companion:use', {}, starting, false],
    ['companion:put', {}, writing, false],
    ['companion:chunk:1', {}, writing, true],
    ['companion:use:1', {}, writing, true],
    ['companion:retire', {}, writing, true],
    ['companion:live', {}, writing, true],
    ['companion:move', {}, writing, true],
    ['companion:recordOf', { FAULT_LONG: '400', FAULT_CHURN: '1000' }, writing, true],
    ['companion:fill', { FAULT_OTEL: '1' }, writing, false],
    ['companion:fill:3', { FAULT_OTEL: '1' }, writing, true],
    ['companion:putAscii', { FAULT_OTEL: '1' }, writing, false],
    ['companion:otelStore', { FAULT_OTEL: '1' }, writing, false],
    ['companion:otelStore:5', { FAULT_OTEL: '1' }, writing, true],
  ];
  // Under qemu-user (the arm64 suite) one call of each kind stands for the
  // rest: a call as frame mode starts, one while a set is written, one
  // while a record is; what catches them is JavaScript, the same on every
  // architecture, and x86-64 runs every case.
  const UNDER_EMULATION = new Set(['companion:cped', 'companion:put', 'companion:chunk:1', 'companion:otelStore']);
  for (const [fault, env, cause, older] of cases) {
    it(`${fault.replace('companion:', "the companion's ").replace(/:(\d+)$/, ' after $1 calls')}${env.FAULT_OTEL ? ', thread context on' : ''}`, function () {
      if (!UNDER_EMULATION.has(fault)) {
        skipUnderEmulation(this, 'one companion call of each kind stands for the others (x86-64 runs every case)');
      }
      const r = run(fault, { ...frame, ...env });
      assert.ok(r.calls > 0, 'the call that fails was made');
      contained(r, 'CUSTOMLABELS_FAULT', cause, { older });
    });
  }

  it('views of the thread-locals refused', function () {
    const r = run('slot', frame);
    assert.strictEqual(r.supported, false);
    contained(r, 'CUSTOMLABELS_NO_ADDON', /External buffers are not allowed/);
  });

  it('the frame class not the one it knows: named, with what readers see; labels read as before', function () {
    const r = run('framelength', frame);
    unaffected(r, ['CUSTOMLABELS_FRAME_CLASS']);
    assert.match(r.warnings[0].message, /a set's labels without its record for an instant/);
  });

  it('the frame class not found through an AsyncResource, or its statics frozen: frame mode uses neither', function () {
    unaffected(run('frameclass', frame));
    unaffected(run('readonly', frame));
  });
});
