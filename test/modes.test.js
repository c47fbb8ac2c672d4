'use strict';
// Which files of lib/ each mode loads: hooks mode (lib/hooks/) and frame
// mode (lib/frame/) each load their own folder and what both share, never
// the other's, and frame mode compiles no WebAssembly.  Each mode runs in a child
// process, since the mode is chosen once per thread when the package loads;
// the child labels, enables the thread context, labels again, and lists
// require.cache.

const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');

const ROOT = path.join(__dirname, '..');

// The lib/ files the child loaded, relative to lib/, the mode it ran in,
// and how many WebAssembly modules it compiled.
function loaded(mode) {
  const code = `
    let compiled = 0;
    const count = (f) => function (...args) { compiled++; return f.apply(this, args); };
    WebAssembly.Module = new Proxy(WebAssembly.Module, { construct(t, a) { compiled++; return Reflect.construct(t, a); } });
    WebAssembly.compile = count(WebAssembly.compile);
    WebAssembly.instantiate = count(WebAssembly.instantiate);
    const cl = require('.');
    cl.withLabels({ route: '/a', user: 'u1' }, () => cl.getLabels());
    cl.enableThreadContext();
    cl.withLabels({ route: '/b', 'clé': 'välue' }, () => cl.getLabels());
    const lib = ${JSON.stringify(path.join(ROOT, 'lib') + path.sep)};
    const files = Object.keys(require.cache).filter((f) => f.startsWith(lib)).map((f) => f.slice(lib.length)).sort();
    process.stdout.write(JSON.stringify({ mode: cl.publishMode, files, compiled }));`;
  return child(mode, code);
}

// Runs `code` in a child of this Node in `mode`, with `args` before it;
// what the child wrote, as JSON.
function child(mode, code, args = []) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...args, '-e', code],
    { cwd: ROOT, encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: mode } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('the files of lib/ each mode loads', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
  });

  it('hooks mode loads lib/hooks/ and what both modes share, and nothing of lib/frame/', () => {
    const { mode, files } = loaded('hooks');
    assert.equal(mode, 'hooks');
    assert.deepEqual(files.filter((f) => f.startsWith('frame/')), [], files.join(', '));
    for (const f of ['index.js', 'labelset.js', 'setbytes.js', 'hooks/follow.js', 'hooks/encode.js', 'hooks/arena.js']) {
      assert.ok(files.includes(f), `${f} among ${files.join(', ')}`);
    }
  });

  it('frame mode loads lib/frame/ and what both modes share, nothing of lib/hooks/, and compiles no WebAssembly', function () {
    needs.frameMode(this);
    const { mode, files, compiled } = loaded('frame');
    assert.equal(mode, 'frame');
    assert.deepEqual(files.filter((f) => f.startsWith('hooks/')), [], files.join(', '));
    for (const f of ['index.js', 'labelset.js', 'setbytes.js', 'frame/follow.js', 'frame/sets.js']) {
      assert.ok(files.includes(f), `${f} among ${files.join(', ')}`);
    }
    assert.equal(compiled, 0, 'WebAssembly modules compiled');
  });
});

// The AsyncContextFrame current when the package loads is the one current
// after: the probes of lib/platform.js and lib/frame/follow.js run an
// AsyncLocalStorage of their own, whose run() and disable() would otherwise
// leave an empty frame current, copied into every frame made after it.
// Read with Node's own accessor (--expose-internals) in a child, right
// before and right after require().
describe('loading the package leaves the current AsyncContextFrame as it found it', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
    if (!require('../lib/platform').usesAsyncContextFrame()) {
      needs.feature(this, 'AsyncContextFrame', 'AsyncLocalStorage does not run on AsyncContextFrame in this Node (Node 24 and later, or 22 with --experimental-async-context-frame)');
    }
  });

  function frames(mode) {
    const code = `
      const ACF = require('internal/async_context_frame');
      const show = (f) => (f === undefined ? 'none' : 'a frame of ' + f.size);
      const before = show(ACF.current());
      const cl = require('.');
      const after = show(ACF.current());
      process.stdout.write(JSON.stringify({ mode: cl.publishMode, before, after }));`;
    return child(mode, code, ['--expose-internals']);
  }

  it('hooks mode', () => {
    const r = frames('hooks');
    assert.equal(r.mode, 'hooks');
    assert.deepEqual({ before: r.before, after: r.after }, { before: 'none', after: 'none' });
  });

  it('frame mode', function () {
    needs.frameMode(this);
    const r = frames('frame');
    assert.equal(r.mode, 'frame');
    assert.deepEqual({ before: r.before, after: r.after }, { before: 'none', after: 'none' });
  });
});
