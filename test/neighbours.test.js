'use strict';
// Beside another library that wraps the statics of Node's AsyncContextFrame
// class (set and exchange, which Node's JavaScript calls at every change of
// frame): whether it wraps them before the package does or after, it sees
// every call it sees without the package, and what a reader reads from the
// thread equals getLabels() in every callback.  One that replaces them
// without calling what it replaced is named once, and readers still read
// getLabels().  test/fixtures/neighbour-child.js, in hooks mode, on a
// Node.js with AsyncContextFrame (24 and 26; 22 with the flag).

const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { usesAsyncContextFrame } = require('../lib/platform');

const CHILD = path.join(__dirname, 'fixtures', 'neighbour-child.js');

function run(...args) {
  const r = spawnSync(process.execPath, [...process.execArgv, '--expose-internals', CHILD, ...args], {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'hooks' },
  });
  assert.strictEqual(r.status, 0, `child failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

describe('beside a library that wraps AsyncContextFrame.set and exchange', function () {
  this.timeout(120000);
  let alone;
  before(function () {
    needs.platform(this);
    if (!usesAsyncContextFrame()) {
      needs.feature(this, 'AsyncContextFrame', 'only a Node.js that runs AsyncLocalStorage on AsyncContextFrame has the frame class (24 and later; 22 with --experimental-async-context-frame)');
    }
    alone = run('alone');
    assert.ok(alone.counts.exchange >= 900, `the library saw ${alone.counts.exchange} exchanges without the package`);
  });

  const customlabels = (codes) => codes.filter((c) => String(c).startsWith('CUSTOMLABELS'));

  for (const order of ['before', 'after']) {
    it(`wrapping ${order} the package, it sees every call it sees alone, and readers read getLabels()`, function () {
      const r = run(order);
      assert.deepStrictEqual(r.counts, alone.counts);
      assert.ok(r.checked > 900, `${r.checked} callbacks checked`);
      assert.strictEqual(r.mismatched, 0, JSON.stringify(r.mismatches));
      assert.deepStrictEqual(customlabels(r.warnings), []);
    });
  }

  it('replacing them without calling what it replaced is named once, and readers still read getLabels()', function () {
    const r = run('after', 'replace');
    assert.strictEqual(r.mismatched, 0, JSON.stringify(r.mismatches));
    assert.deepStrictEqual(customlabels(r.warnings), ['CUSTOMLABELS_FRAME_WRAPPER']);
  });
});
