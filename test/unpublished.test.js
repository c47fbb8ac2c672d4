'use strict';
// Where the package cannot publish, it installs nothing: withLabels,
// enterLabels and getLabels keep their meaning with an AsyncLocalStorage
// alone, and Node's async hooks, V8's promise hooks and the frame class's
// statics are as an AsyncLocalStorage alone leaves them.  Seen from Node's
// side (--expose-internals) by test/fixtures/unpublished-child.js, which
// watches each of them from before the package loads, against the same
// work done with an AsyncLocalStorage alone, on the Node.js that runs the
// suite (CI runs it on 20, 22, 24 and 26).

const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');

const CHILD = path.join(__dirname, 'fixtures', 'unpublished-child.js');
const FAKE = path.join(__dirname, 'helpers', 'fake-platform.js');
const REFUSE = path.join(__dirname, 'fixtures', 'refuse-addon.js');
const major = Number(process.versions.node.split('.')[0]);

function run(flags, env = {}, arg = []) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...flags, '--expose-internals', CHILD, ...arg], {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: '', ...env },
  });
  assert.strictEqual(r.status, 0, `child failed: ${r.stderr}`);
  return { ...JSON.parse(r.stdout.trim().split('\n').pop()), stderr: r.stderr };
}

describe('where nothing is published, nothing is installed', function () {
  this.timeout(120000);
  let baseline;
  before(function () {
    baseline = run([], {}, ['baseline']);
  });

  function same(r) {
    assert.strictEqual(r.supported, false);
    assert.strictEqual(r.publishMode, null);
    assert.deepStrictEqual(r.seen, baseline.seen, 'getLabels() inside the work');
    assert.strictEqual(r.liveHooks, baseline.liveHooks, 'async hooks enabled through async_hooks.createHook');
    assert.strictEqual(r.livePromiseHooks, baseline.livePromiseHooks, 'V8 promise hooks set');
    assert.strictEqual(r.enabledHooksExist, baseline.enabledHooksExist, "Node's enabledHooksExist()");
    assert.strictEqual(r.sameStatics, true, "the frame class's set, exchange and current");
  }

  it('where the package publishes, the watch sees its hooks (the check can fail)', function () {
    needs.platform(this);
    const r = run([]);
    assert.strictEqual(r.supported, true);
    assert.deepStrictEqual(r.seen, baseline.seen);
    assert.ok(r.liveHooks > baseline.liveHooks, `${r.liveHooks} hooks, ${baseline.liveHooks} with AsyncLocalStorage alone`);
  });

  it('with --no-addons', function () {
    same(run(['--no-addons']));
  });

  it('under the permission model without --allow-addons', function () {
    const flag = major >= 22 ? '--permission' : '--experimental-permission';
    same(run([flag, '--allow-fs-read=*']));
  });

  it('where the addon does not load', function () {
    needs.platform(this);
    same(run(['-r', REFUSE]));
  });

  it('on a platform without the ABI (macOS)', function () {
    same(run(['-r', FAKE], { CUSTOMLABELS_FAKE_PLATFORM: 'darwin' }));
  });

  it('on musl', function () {
    same(run(['-r', FAKE], { CUSTOMLABELS_FAKE_LIBC: 'musl' }));
  });

  it('with CUSTOMLABELS_PUBLISH=frame where the addon does not load', function () {
    needs.platform(this);
    same(run(['-r', REFUSE], { CUSTOMLABELS_PUBLISH: 'frame' }));
  });
});
