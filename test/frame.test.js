'use strict';
// Frame mode (CUSTOMLABELS_PUBLISH=frame): choosing it, falling back from
// it, that it installs no hook, that workers ending at any point free what
// they made, and the API tests run again in it.  Each case runs in a child
// process, because the mode is chosen once per thread when the package
// loads.  What readers read in frame mode is test/readers/parca-node.test.js.

const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { emulated } = require('./helpers/emulation');

const ROOT = path.join(__dirname, '..');
const MAJOR = Number(process.versions.node.split('.')[0]);
// The API test files, run again in frame mode: what withLabels, enterLabels,
// getLabels and customlabels/otel mean, and what a reader finds, must not
// depend on the mode (test/helpers/tls.js reads the frame in frame mode).
const API_FILES = ['api', 'async', 'otel', 'workers', 'errors'].map((f) => path.join(__dirname, `${f}.test.js`));

// A child of this Node with this process's flags (AsyncContextFrame may be
// turned on by a flag here rather than by NODE_OPTIONS).
// Under qemu-user a child that reads its own memory thousands of times
// takes several times as long.
const CHILD_TIMEOUT = emulated ? 360000 : 120000;

function node(code, env = {}, args = []) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...args, '-e', code], {
    cwd: ROOT, encoding: 'utf8', timeout: CHILD_TIMEOUT, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame', ...env },
  });
  return r;
}

// Whether frame mode runs for a child of this Node (AsyncContextFrame on,
// a companion for this ABI), and the child's warning if not.
function probe() {
  const r = node(`const cl = require('.'); process.stdout.write(JSON.stringify({ mode: cl.publishMode }));`);
  assert.equal(r.status, 0, r.stderr);
  return { mode: JSON.parse(r.stdout).mode, stderr: r.stderr };
}

describe('frame mode (CUSTOMLABELS_PUBLISH=frame)', function () {
  this.timeout(CHILD_TIMEOUT + 60000);
  let frameRuns = false;

  before(function () {
    needs.platform(this);
    const { supported, unsupportedReason } = require('..');
    if (!supported) needs.feature(this, 'addon', `the addon did not load: ${unsupportedReason}`);
    frameRuns = probe().mode === 'frame';
  });

  it('runs where it can, and elsewhere warns once with the reason and publishes with hooks', function () {
    const { mode, stderr } = probe();
    const acf = MAJOR >= 24 || process.execArgv.includes('--experimental-async-context-frame') ||
      (process.env.NODE_OPTIONS || '').includes('--experimental-async-context-frame');
    if (MAJOR < 22) {
      assert.equal(mode, 'hooks');
      assert.match(stderr, /CUSTOMLABELS_PUBLISH.*has no AsyncContextFrame.*publishes with hooks/);
    } else if (!acf) {
      assert.equal(mode, 'hooks');
      assert.match(stderr, /CUSTOMLABELS_PUBLISH.*AsyncContextFrame is off/);
    } else {
      // Node 22 with the flag, 24, 26: the companion for this ABI is built
      // (binding.gyp) or prebuilt (scripts/prebuild.js); CI must have it.
      if (mode !== 'frame' && process.env.CUSTOMLABELS_TEST_STRICT !== '1') {
        needs.feature(this, 'customlabels-v8', `no companion for Node ${process.version}: ${stderr.trim()}`);
      }
      assert.equal(mode, 'frame', stderr);
      assert.equal(stderr.includes('CUSTOMLABELS_PUBLISH'), false, stderr);
    }
    assert.equal(stderr.match(/\[CUSTOMLABELS_PUBLISH\]/g)?.length ?? 0, mode === 'frame' ? 0 : 1, 'one warning at most');
  });

  it('any other value than hooks or frame: one warning naming it, and hooks', function () {
    const r = node(`process.stdout.write(require('.').publishMode)`, { CUSTOMLABELS_PUBLISH: 'frames' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'hooks');
    assert.match(r.stderr, /CUSTOMLABELS_PUBLISH=frames is neither hooks nor frame/);
    const h = node(`process.stdout.write(require('.').publishMode)`, { CUSTOMLABELS_PUBLISH: 'hooks' });
    assert.equal(h.stdout, 'hooks');
    assert.equal(h.stderr, '');
  });

  it('warns once per process, also where only workers load the package, several at a time', function () {
    // The main thread never loads it, so no worker inherits the fact from
    // worker environment data: the addon's once-per-process word decides.
    const r = node(`
      const { Worker } = require('node:worker_threads');
      const code = "const cl = require(process.cwd()); require('node:worker_threads').parentPort.postMessage(cl.publishMode);";
      let done = 0;
      for (let i = 0; i < 4; i++) {
        const w = new Worker(code, { eval: true });
        w.on('message', (m) => { if (m !== 'hooks') throw new Error('mode ' + m); });
        w.on('exit', () => { if (++done === 4) process.stdout.write('ok'); });
      }`, { CUSTOMLABELS_PUBLISH: 'frames' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'ok');
    if (!require('..').supported) this.skip();
    assert.equal(r.stderr.match(/\[CUSTOMLABELS_PUBLISH\]/g)?.length ?? 0, 1, r.stderr);
  });

  it('leaves no async hook and no promise hook installed, and labels still follow awaits, timers and immediates', function () {
    if (!frameRuns) needs.feature(this, 'frame mode', 'frame mode does not run on this Node (previous test says why)');
    // The package probes, once, whether the runtime calls hooks at all
    // (lib/platform.js missingHooks()): a hook enabled and disabled at once,
    // a promise hook set and stopped.  None may stay.
    const r = node(`
      const ah = require('node:async_hooks');
      const v8 = require('node:v8');
      const calls = [];
      let n = 0;
      const createHook = ah.createHook;
      ah.createHook = (...a) => {
        const hook = createHook(...a);
        const id = 'hook' + n++;
        const { enable, disable } = hook;
        hook.enable = function () { calls.push(id); return enable.call(this); };
        hook.disable = function () { calls.splice(calls.indexOf(id), 1); return disable.call(this); };
        return hook;
      };
      for (const k of ['onInit', 'onBefore', 'onAfter', 'onSettled', 'createHook']) {
        const f = v8.promiseHooks[k];
        v8.promiseHooks[k] = (...a) => {
          const id = 'promiseHooks.' + k + n++;
          calls.push(id);
          const stop = f(...a);
          return () => { calls.splice(calls.indexOf(id), 1); return stop(); };
        };
      }
      const cl = require('.');
      const { setTimeout: sleep } = require('node:timers/promises');
      const seen = [];
      Promise.all([1, 2].map((i) => cl.withLabels({ flow: String(i) }, async () => {
        await null;
        await sleep(2);
        await new Promise((r) => setImmediate(r));
        seen.push(cl.getLabels().flow);
      }))).then(() => {
        process.stdout.write(JSON.stringify({ mode: cl.publishMode, calls, seen: seen.sort() }));
      });
    `);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { mode: 'frame', calls: [], seen: ['1', '2'] });
  });

  it('workers that end, and workers terminated in the middle of a request, leave the process working', function () {
    if (!frameRuns) needs.feature(this, 'frame mode', 'frame mode does not run on this Node');
    const r = node(`
      const { Worker } = require('node:worker_threads');
      const body = \`
        const cl = require(${JSON.stringify(ROOT)});
        if (cl.publishMode !== 'frame') throw new Error('worker publishes with ' + cl.publishMode);
        let n = 0;
        (function loop() {
          for (let i = 0; i < 50; i++) {
            cl.withLabels({ trace_id: 'req-' + (n++), route: '/r' }, async () => {
              await null;
              await new Promise((r) => setTimeout(r, 1));
            });
          }
          if (n === 500) require('node:worker_threads').parentPort.postMessage('busy');
          setImmediate(loop);
        })();
      \`;
      (async () => {
        for (let round = 0; round < 6; round++) {
          const ws = Array.from({ length: 4 }, () => new Worker(body, { eval: true }));
          await Promise.all(ws.map((w) => new Promise((res, rej) => { w.once('message', res); w.once('error', rej); })));
          // Terminated in the middle of requests: flows are waiting on timers.
          await Promise.all(ws.map((w) => w.terminate()));
        }
        const cl = require('.');
        const labels = await cl.withLabels({ after: 'workers' }, async () => { await null; return cl.getLabels(); });
        process.stdout.write(JSON.stringify({ mode: cl.publishMode, labels }));
      })();
    `);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { mode: 'frame', labels: { after: 'workers' } });
  });

  it('sets written whole by the companion (put) and by JavaScript, mixed, over many chunks: the frame holds exactly getLabels() each time', function () {
    if (!frameRuns) needs.feature(this, 'frame mode', 'frame mode does not run on this Node (previous test says why)');
    // put() (src/frame/writer.cc) takes sets of up to six ASCII labels within the
    // limits and remembers, per label position, the key and value strings
    // it last wrote: a value that repeats is not written again, one that
    // keeps changing is compared one set in 32.  Each pattern here goes
    // through those paths (a repeated value, a changing one, a value equal
    // to an earlier one in another string, a value back after many misses),
    // mixed with sets JavaScript writes (a non-ASCII value, seven labels),
    // over enough sets to fill many chunks.
    const r = node(`
      const cl = require('.');
      const tls = require('./test/helpers/tls');
      const routes = ['/a', '/b', '/c'];
      let wrong = 0;
      let checked = 0;
      const first = [];
      for (let i = 0; i < 6000; i++) {
        const labels = { route: routes[i % 40 === 0 ? 1 : 0], trace: 'trace-' + i, user: 'user-' + (i % 7) };
        if (i % 97 === 0) labels.user = 'usér-' + i;
        if (i % 89 === 0) Object.assign(labels, { a: '1', b: '2', c: '3', d: '4' });
        if (i % 13 === 0) labels.route = ['/', 'a'].join('');
        const seen = cl.withLabels(labels, () => ({ tls: tls.published(), js: cl.getLabels() }));
        checked++;
        if (JSON.stringify(seen.tls) !== JSON.stringify(seen.js)) {
          wrong++;
          if (first.length < 3) first.push(seen);
        }
      }
      process.stdout.write(JSON.stringify({ mode: cl.publishMode, wrong, checked, first }));
    `);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.mode, 'frame');
    assert.equal(out.checked, 6000);
    assert.deepEqual(out.first, [], 'the first sets whose published labels differ from getLabels()');
    assert.equal(out.wrong, 0);
  });

  it('the API tests pass in frame mode too', function () {
    if (!frameRuns) needs.feature(this, 'frame mode', 'frame mode does not run on this Node');
    const mocha = path.join(ROOT, 'node_modules', 'mocha', 'bin', 'mocha.js');
    const r = spawnSync(process.execPath, [mocha, '--no-config', '--timeout', '60000', '--reporter', 'dot', ...API_FILES], {
      cwd: ROOT, encoding: 'utf8', timeout: 170000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' },
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /\d+ passing/);
    assert.doesNotMatch(r.stdout, /failing/);
  });
});
