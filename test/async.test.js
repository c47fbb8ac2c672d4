'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const net = require('node:net');
const dns = require('node:dns');
const { EventEmitter } = require('node:events');
const { AsyncLocalStorage } = require('node:async_hooks');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { withLabels, getLabels } = require('..');
const tls = require('./helpers/tls');

const tick = () => new Promise((resolve) => setImmediate(resolve));

// Starts `start(done)` inside withLabels(labels) and resolves with what the
// TLS held at each point the continuation reported.
function observe(labels, start) {
  return new Promise((resolve, reject) => {
    const seen = [];
    const report = () => seen.push(tls.seen());
    withLabels(labels, () => start(report, () => resolve(seen), reject));
  });
}

describe('labels follow async work', () => {
  const L = { route: '/async', user: '7' };
  const cases = {
    'await': async (report, done) => { await null; report(); await new Promise((r) => setTimeout(r, 1)); report(); done(); },
    'then': (report, done) => Promise.resolve().then(() => { report(); }).then(done),
    'rejection handlers': (report, done) => Promise.reject(new Error('x')).catch(() => { report(); done(); }),
    'setTimeout': (report, done) => setTimeout(() => { report(); done(); }, 1),
    'setInterval': (report, done) => { let n = 0; const t = setInterval(() => { report(); if (++n === 3) { clearInterval(t); done(); } }, 1); },
    'setImmediate': (report, done) => setImmediate(() => { report(); done(); }),
    'process.nextTick': (report, done) => process.nextTick(() => { report(); done(); }),
    'queueMicrotask': (report, done) => queueMicrotask(() => { report(); done(); }),
    'fs callbacks': (report, done) => fs.readFile(__filename, () => { report(); fs.stat(__filename, () => { report(); done(); }); }),
    'fs promises': async (report, done) => { await fsp.readFile(__filename); report(); done(); },
    'dns callbacks': (report, done) => dns.lookup('localhost', () => { report(); done(); }),
    'EventEmitter listeners emitted from a timer': (report, done) => {
      const emitter = new EventEmitter();
      emitter.on('evt', () => { report(); done(); });
      setTimeout(() => emitter.emit('evt'), 1);
    },
  };
  for (const [name, start] of Object.entries(cases)) {
    it(`through ${name}`, async () => {
      const seen = await observe(L, start);
      assert.ok(seen.length > 0);
      for (const s of seen) assert.deepEqual(s, L);
      assert.equal(tls.published(), null);
    });
  }

  it('through net callbacks, exactly as far as AsyncLocalStorage carries the context', async () => {
    // Node's AsyncLocalStorage gives no store to the events of a socket the
    // server accepted nor to server.close()'s callback; there the TLS must
    // agree with getLabels() all the same.
    const seen = {};
    const report = (tag) => { seen[tag] = { tls: tls.seen(), js: getLabels() }; };
    await new Promise((resolve) => withLabels(L, () => {
      const server = net.createServer((socket) => { report('connection'); socket.on('data', () => { report('server data'); socket.end(); }); });
      server.listen(0, '127.0.0.1', () => {
        report('listening');
        const client = net.connect(server.address().port, '127.0.0.1', () => { report('connect'); client.write('hi'); });
        client.on('end', () => { report('client end'); server.close(() => { report('closed'); resolve(); }); });
        client.resume();
      });
    }));
    for (const tag of ['listening', 'connection', 'connect', 'client end']) assert.deepEqual(seen[tag].tls, L, tag);
    for (const [tag, { tls: published, js }] of Object.entries(seen)) assert.deepEqual(published, js, tag);
    assert.equal(Object.keys(seen).length, 6);
  });

  it('and code outside every withLabels sees NULL, even when it runs in between', async () => {
    const outside = [];
    withLabels({ a: '1' }, () => {
      setImmediate(() => {});
      Promise.resolve().then(() => {});
    });
    setImmediate(() => outside.push(tls.published()));
    Promise.resolve().then(() => outside.push(tls.published()));
    process.nextTick(() => outside.push(tls.published()));
    await new Promise((r) => setTimeout(r, 5));
    // The timer may come first on a slow machine (emulated, .ci/arm64); an
    // immediate made now runs after the one above.
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(outside, [null, null, null]);
  });

  it('keeps interleaved concurrent flows apart', async () => {
    const failures = [];
    let checks = 0;
    const steps = [
      () => null,
      () => new Promise((r) => setImmediate(r)),
      () => new Promise((r) => setTimeout(r, Math.random() * 3)),
      () => new Promise((r) => process.nextTick(r)),
      () => Promise.resolve(),
      () => fsp.stat(__filename),
    ];
    async function flow(i) {
      const mine = { flow: String(i), route: `/r${i % 7}` };
      for (let s = 0; s < 25; s++) {
        await steps[(i + s * 7) % steps.length]();
        checks++;
        const seen = tls.seen();
        if (seen.flow !== mine.flow || seen.route !== mine.route) failures.push({ i, s, seen });
        if (s === 12) {
          // A nested context inside the flow, and back.
          await withLabels({ nested: 'yes' }, async () => {
            await null;
            const inner = tls.seen();
            if (inner.nested !== 'yes' || inner.flow !== mine.flow) failures.push({ i, s, inner });
          });
        }
      }
    }
    async function unlabeled(i) {
      for (let s = 0; s < 25; s++) {
        await steps[(i + s) % steps.length]();
        checks++;
        if (tls.published() !== null) failures.push({ unlabeled: i, s, seen: tls.published() });
      }
    }
    const flows = [];
    for (let i = 0; i < 60; i++) flows.push(withLabels({ flow: String(i), route: `/r${i % 7}` }, () => flow(i)));
    for (let i = 0; i < 10; i++) flows.push(unlabeled(i));
    await Promise.all(flows);
    assert.deepEqual(failures, []);
    assert.equal(checks, 70 * 25);
  });

  it('restores the outer set after a nested async withLabels, at each await', async () => {
    await withLabels({ outer: 'o' }, async () => {
      const pending = withLabels({ inner: 'i' }, async () => {
        await tick();
        assert.deepEqual(tls.seen(), { outer: 'o', inner: 'i' });
      });
      assert.deepEqual(tls.seen(), { outer: 'o' });
      await pending;
      assert.deepEqual(tls.seen(), { outer: 'o' });
    });
    assert.equal(tls.published(), null);
  });

  it('keeps labels in rejection paths of async functions', async () => {
    const err = await withLabels({ failing: 'yes' }, async () => {
      await null;
      throw new Error('rejected');
    }).catch((e) => ({ e, seen: tls.published() }));
    assert.equal(err.e.message, 'rejected');
    assert.equal(err.seen, null, 'the catch handler runs outside the labels');
    await withLabels({ catcher: 'yes' }, async () => {
      try {
        await withLabels({ thrower: 'yes' }, async () => { await tick(); throw new Error('x'); });
      } catch {
        assert.deepEqual(tls.seen(), { catcher: 'yes' });
      }
    });
  });

  it('recovers after an uncaught exception in a labeled callback', () => {
    const script = `
      const { withLabels } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      const tls = require(${JSON.stringify(path.resolve(__dirname, 'helpers/tls.js'))});
      const seen = [];
      const { getLabels } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      // The handler runs in the failed callback's context, as AsyncLocalStorage says.
      process.on('uncaughtException', (e) => { seen.push(['handler', e.message, tls.seen(), getLabels()]); });
      withLabels({ crash: 'yes' }, () => setTimeout(() => { throw new Error('uncaught'); }, 1));
      setTimeout(() => {
        seen.push(['later', tls.published()]);
        withLabels({ after: 'ok' }, () => seen.push(['relabel', tls.published()]));
        seen.push(['end', tls.published()]);
        console.log(JSON.stringify(seen));
      }, 20);
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
    assert.deepEqual(out, [
      ['handler', 'uncaught', { crash: 'yes' }, { crash: 'yes' }],
      ['later', null],
      ['relabel', { after: 'ok' }],
      ['end', null],
    ]);
  });

  it('does not disturb another AsyncLocalStorage user (an OpenTelemetry-style context manager)', async () => {
    // The shape of a context manager: its own storage, run/with and bind.
    const otel = new AsyncLocalStorage();
    const withSpan = (span, fn) => otel.run({ span, parent: otel.getStore() }, fn);
    const bind = (fn) => { const ctx = otel.getStore(); return (...a) => otel.run(ctx, () => fn(...a)); };
    const results = [];
    await withSpan('root', () => withLabels({ route: '/x' }, async () => {
      await null;
      results.push([otel.getStore().span, getLabels(), tls.seen()]);
      await withSpan('child', async () => {
        await new Promise((r) => setTimeout(r, 1));
        results.push([otel.getStore().span, otel.getStore().parent.span, tls.seen()]);
        await withLabels({ user: '9' }, async () => {
          await tick();
          results.push([otel.getStore().span, tls.seen()]);
        });
      });
      const bound = bind(() => results.push([otel.getStore().span, tls.seen()]));
      setImmediate(bound);
      await tick();
    }));
    assert.deepEqual(results, [
      ['root', { route: '/x' }, { route: '/x' }],
      ['child', 'root', { route: '/x' }],
      ['child', { route: '/x', user: '9' }],
      ['root', { route: '/x' }],
    ]);
    assert.equal(otel.getStore(), undefined);
  });
});
