'use strict';
// The writers of a set's ASCII bytes: the JavaScript one (lib/setbytes.js,
// the default) and the WebAssembly one (lib/hooks/setwriter.js,
// src/setwriter.wat, where CUSTOMLABELS_WRITER=wasm asks for it) publish
// exactly the bytes the addon's writer does, and the WebAssembly one writes
// nothing outside the block it is given.
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const { withLabels, limits } = require('..');
const { binding, setwriter, arena } = require('../lib/internals');
const { freeBlock } = require('./helpers/block');
const needs = require('./helpers/needs');

const root = path.resolve(__dirname, '..');
const v8Major = Number(process.versions.v8.split('.')[0]);
// V8 12 has the JS String Builtins but is not given this writer unless asked.
const hasBuiltins = v8Major >= 12;

// Skips a test of the WebAssembly writer where the addon writes the sets.
const addonWrites = (ctx) => needs.feature(ctx, 'WebAssembly set writer',
  `V8 ${process.versions.v8}: ${setwriter.reason ?? 'the addon writes the sets'}`);

// The tests that call this process's WebAssembly writer: where V8 has the
// builtins but the JavaScript writer writes the sets (the default), they run
// in a child that chooses the WebAssembly one (the test 'runs the tests of
// the writer itself...', below); elsewhere they are skipped with the reason.
const IN_CHILD = /writes a set only inside the block|writes what the addon writes/;
function inChildOrSkip(ctx) {
  if (hasBuiltins && process.env.CUSTOMLABELS_WRITER !== 'wasm') ctx.skip();
  addonWrites(ctx);
}

function child(script, env) {
  return JSON.parse(execFileSync(process.execPath, ['-e', script], {
    encoding: 'utf8', timeout: 120000, env: { ...process.env, ...env },
  }));
}

// A child's script that publishes every shape of set and prints each
// published set's bytes, its pointers made relative to the arena, and how
// many sets the WebAssembly writer was given.
const SAME_BYTES = `
      const { withLabels } = require(${JSON.stringify(root)});
      const { binding, arena, addressOf, setwriter } = require(${JSON.stringify(root + '/lib/internals')});
      const tls = require(${JSON.stringify(root + '/test/helpers/tls')});
      const LAYOUT = binding.layout;
      let wasmWrites = 0;
      function raw() {
        const base = BigInt(addressOf(0));
        const address = BigInt(tls.address());
        if (address === 0n) return null;
        const view = Buffer.from(arena.bytes.buffer);
        const u64 = (a) => view.readBigUInt64LE(Number(a - base));
        const rel = (a) => Number(a - base);
        const storage = u64(address + BigInt(LAYOUT.setStorage));
        const count = Number(u64(address + BigInt(LAYOUT.setCount)));
        const out = { at: rel(address) & 7, storage: rel(storage) - rel(address), count, capacity: Number(u64(address + BigInt(LAYOUT.setCapacity))), entries: [] };
        for (let i = 0; i < count; i++) {
          const e = storage + BigInt(i * LAYOUT.labelSize);
          const kl = Number(u64(e)), kb = rel(u64(e + 8n)), vl = Number(u64(e + 16n)), vb = rel(u64(e + 24n));
          out.entries.push({
            key: view.toString('hex', kb, kb + kl), keyInKeyArea: kb >= LAYOUT.keyArea,
            value: view.toString('hex', vb, vb + vl), valueAt: vb - rel(address),
          });
        }
        return out;
      }
      const sets = [
        { route: '/checkout', user: 'u42', trace: '4bf92f3577b34da6a3ce929d0e0e4736' },
        { only: '' },
        { k: 'x'.repeat(53) },
        { ['k'.repeat(25)]: 'v' },
        Object.fromEntries(Array.from({ length: 10 }, (_, i) => ['key' + i, 'value' + i])),
        { a: '1', b: '2', c: '3', d: '4', e: '5' },
        { route: '/café', user: 'u1' },
        { 'clé': 'v', plain: 'ascii' },
        { route: '/after', user: 'u2', trace: 'ffff' },
      ];
      const out = [];
      for (const labels of sets) {
        out.push(withLabels(labels, () => raw()));
        if (setwriter.write !== null && wasmWrites === 0) {
          const real = setwriter.write;
          setwriter.write = (...args) => { wasmWrites++; return real(...args); };
        }
      }
      console.log(JSON.stringify({ out, wasm: setwriter.available, wasmWrites }));
    `;

describe('the WebAssembly set writer', () => {
  it('is the build of src/setwriter.wat', () => {
    execFileSync(process.execPath, [path.join(root, 'scripts/build-wasm.js'), '--check'], { stdio: 'pipe' });
  });

  it('runs the tests of the writer itself in a child that chooses it (CUSTOMLABELS_WRITER=wasm)', function () {
    if (!hasBuiltins) addonWrites(this);
    if (process.env.CUSTOMLABELS_WRITER === 'wasm') this.skip(); // this process is that child
    const mocha = path.join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
    const r = spawnSync(process.execPath, [...process.execArgv, mocha, __filename, '--grep', IN_CHILD.source, '--reporter', 'dot'],
      { cwd: root, encoding: 'utf8', timeout: 120000, env: { ...process.env, CUSTOMLABELS_WRITER: 'wasm' } });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\b2 passing/, r.stdout);
    assert.doesNotMatch(r.stdout, /pending/, r.stdout);
  });

  it('writes the sets only where CUSTOMLABELS_WRITER=wasm asks for it, and V8 has the builtins', () => {
    const chosen = process.env.CUSTOMLABELS_WRITER;
    const expected = chosen === 'wasm' ? hasBuiltins : false;
    assert.equal(setwriter.available, expected, `V8 ${process.versions.v8}: ${setwriter.reason}`);
    assert.equal(setwriter.reason === null, expected);
    withLabels({ writer: 'chosen' }, () => {});
    assert.equal(setwriter.write !== null, expected, 'the instance exists once the arena does');
  });

  it('publishes the same bytes as the addon\'s writer, set for set', function () {
    if (!hasBuiltins) addonWrites(this);
    // Every shape of set, in both writers, each in its own process: the
    // published set's bytes, its pointers made relative to the arena.  Sets
    // whose values are not ASCII, or whose keys are not in the key area, are
    // written by the general path in both; they are here to show that the
    // two writers' sets sit side by side in the same arena.
    const script = SAME_BYTES;
    const addon = child(script, { CUSTOMLABELS_WRITER: 'addon' });
    const wasm = child(script, { CUSTOMLABELS_WRITER: 'wasm' });
    assert.equal(addon.wasm, false);
    assert.equal(wasm.wasm, true);
    assert.equal(addon.wasmWrites, 0);
    // The first set instantiates the writer.  Of the other 8, WebAssembly is
    // given every one whose keys are all in the key area: 7, one of which
    // it refuses (a value not ASCII) for the general path to write.  The
    // set with a key that is not ASCII goes to the addon's writer, which
    // refuses it too.
    assert.equal(wasm.wasmWrites, 7, 'WebAssembly was given every set whose keys are in the key area');
    assert.equal(wasm.out.length, 9);
    for (let i = 0; i < wasm.out.length; i++) {
      assert.deepEqual(wasm.out[i], addon.out[i], `set ${i}`);
    }
    assert.equal(Buffer.from(wasm.out[0].entries[2].value, 'hex').toString(), '4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('the JavaScript writer (lib/setbytes.js) publishes the same bytes as the addon\'s, set for set', function () {
    if (!require('..').supported) this.skip();
    const addon = child(SAME_BYTES, { CUSTOMLABELS_WRITER: 'addon' });
    const js = child(SAME_BYTES, { CUSTOMLABELS_WRITER: 'js' });
    assert.equal(js.wasm, false);
    assert.equal(js.out.length, 9);
    for (let i = 0; i < js.out.length; i++) {
      assert.deepEqual(js.out[i], addon.out[i], `set ${i}`);
    }
    assert.equal(Buffer.from(js.out[0].entries[2].value, 'hex').toString(), '4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('writes a set only inside the block it is given, and only what lib/hooks/encode.js would pass', function () {
    withLabels({ a: 'b' }, () => {}); // the arena is made
    if (setwriter.write === null) inChildOrSkip(this);
    const write = (offset, end, ...labels) => {
      const args = [offset, end, labels.length >> 1];
      for (let i = 0; i < 2 * limits.maxLabels; i++) args.push(i < labels.length ? labels[i] : (i & 1) === 0 ? 0 : undefined);
      return setwriter.write(...args);
    };
    const layout = binding.layout;
    const bytes = arena.bytes;
    // A key in the key area, past the keys in use: nothing points there.
    const key = arena.keyEnd;
    bytes[key] = 'k'.charCodeAt(0);
    const place = key * 64 + 1;
    const size = 24 + 32 + 5;
    const { offset, guard, fresh, untouched, refuses, holdsOneLabel } = freeBlock(size);
    const refused = [
      ['a block one byte short', offset, offset + size - 1, place, 'value'],
      ['a non-ASCII value', offset, offset + size + 1, place, 'valué'],
      ['a lone surrogate', offset, offset + size, place, 'val\ud800e'],
      ['a number for a string', offset, offset + size, place, 12345],
      ['an object for a string', offset, offset + size, place, { toString: () => 'value' }],
      ['no value', offset, offset + size, place, undefined],
      ['no labels', offset, offset + size],
      ['an unaligned block', offset + 1, offset + size + 1, place, 'value'],
      ['an end before the offset', offset + size, offset, place, 'value'],
      ['an end in the key area', offset, layout.keyArea + 8, place, 'value'],
      ['a negative offset', -8, offset + size, place, 'value'],
      ['a value longer than any limit', offset, offset + 200, place, 'x'.repeat(limits.maxValueBytes + 1)],
      ['a key in a chunk that sets are written into', offset, offset + size, (offset + 64) * 64 + 1, 'value'],
      ['a key past the end of the arena', offset, offset + size, (layout.arenaBytes - 1) * 64 + 2, 'value'],
      ['an empty key', offset, offset + size, key * 64, 'value'],
      ['a key longer than any limit', offset, offset + size, key * 64 + limits.maxKeyBytes + 1, 'value'],
    ];
    refuses(write, refused);
    // More labels than a set holds: the count alone is refused.
    fresh();
    assert.equal(setwriter.write(offset, offset + 4096, limits.maxLabels + 1), -1, 'more labels than a set holds');
    untouched(offset - guard, offset + size + guard, 'more labels than a set holds');

    fresh();
    assert.equal(write(offset, offset + size, place, 'value'), offset + size);
    untouched(offset - guard, offset, 'a set that fits');
    untouched(offset + size, offset + size + guard, 'a set that fits');
    holdsOneLabel({ keyLength: 1, keyAt: key, value: 'value', valueAt: offset + 56 });
    // An empty value still points somewhere (never NULL).
    fresh();
    assert.equal(write(offset, offset + 56, place, ''), offset + 56);
    holdsOneLabel({ keyLength: 1, keyAt: key, value: '', valueAt: offset + 56 });
  });

  it('writes what the addon writes, byte for byte and refusal for refusal, over random sets', function () {
    withLabels({ a: 'b' }, () => {}); // the arena is made
    if (setwriter.write === null) inChildOrSkip(this);
    // Random sets of the kind lib/hooks/encode.js passes (keys in the key area,
    // values that are strings within the limits, mostly ASCII), in blocks
    // that fit, are too short or too long, each written by both writers
    // into the same block, from the same fill: the results and every byte
    // around the block must agree.
    const writeArgs = new Uint32Array(binding.writeArgs());
    const addonWrite = (offset, end, places, values) => {
      writeArgs[0] = offset;
      writeArgs[1] = end;
      const args = [];
      for (let i = 0; i < places.length; i++) {
        writeArgs[2 + i] = places[i];
        args.push('unread', values[i]);
      }
      binding.writeSet(...args);
      return writeArgs[0] === 0xffffffff ? -1 : writeArgs[0];
    };
    const wasmWrite = (offset, end, places, values) => {
      const args = [offset, end, places.length];
      for (let i = 0; i < limits.maxLabels; i++) args.push(places[i] ?? 0, values[i]);
      return setwriter.write(...args);
    };
    let seed = 0x9e3779b9;
    const random = (n) => {
      seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    // Keys written past the keys in use, in the key area: nothing points there.
    const bytes = arena.bytes;
    const keys = [];
    for (let at = arena.keyEnd, i = 0; i < 12; i++) {
      const length = 1 + random(limits.maxKeyBytes);
      for (let j = 0; j < length; j++) bytes[at + j] = 97 + random(26);
      keys.push(at * 64 + length);
      at += length;
    }
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789-/:_ ~\x7f';
    const value = () => {
      const length = random(8) === 0 ? limits.maxValueBytes - random(3) : random(40);
      let v = '';
      for (let j = 0; j < length; j++) v += alphabet[random(alphabet.length)];
      if (length > 0 && random(20) === 0) v = v.slice(0, -1) + (random(2) ? 'é' : '\ud800');
      return v;
    };
    const block = freeBlock(24 + 32 * limits.maxLabels + limits.maxValueBytes * limits.maxLabels + 16);
    const span = [block.offset - block.guard, block.offset + block.size + block.guard];
    const outcomes = { written: 0, refused: 0 };
    for (let round = 0; round < 3000; round++) {
      const n = 1 + random(limits.maxLabels);
      const places = Array.from({ length: n }, () => keys[random(keys.length)]);
      const values = Array.from({ length: n }, value);
      const need = 24 + 32 * n + values.reduce((sum, v) => sum + v.length, 0);
      const offset = block.offset + 8 * random(2);
      const end = offset + need + [0, 0, -1, 1, 8][random(5)];
      block.fresh();
      const fromAddon = addonWrite(offset, end, places, values);
      const addonBytes = Buffer.from(bytes.subarray(...span));
      block.fresh();
      const fromWasm = wasmWrite(offset, end, places, values);
      assert.equal(fromWasm, fromAddon, `round ${round}: ${JSON.stringify({ offset, end, places, values })}`);
      if (fromWasm === -1) {
        // A refused set leaves its block undefined (either writer may
        // have begun it), and everything around it as it was.
        block.untouched(span[0], offset, `round ${round}, WebAssembly`);
        block.untouched(end, span[1], `round ${round}, WebAssembly`);
        const around = Buffer.concat([addonBytes.subarray(0, offset - span[0]), addonBytes.subarray(end - span[0])]);
        assert.ok(around.every((b) => b === around[0]), `round ${round}: the addon wrote outside a refused block`);
      } else {
        assert.ok(Buffer.from(bytes.subarray(...span)).equals(addonBytes), `round ${round}: the bytes differ`);
      }
      outcomes[fromWasm === -1 ? 'refused' : 'written']++;
    }
    assert.ok(outcomes.written > 1000 && outcomes.refused > 300, JSON.stringify(outcomes));
  });

  it('leaves the sets to the addon when V8 cannot make the writer\'s memory', function () {
    if (!hasBuiltins) addonWrites(this);
    // V8 refuses a WebAssembly memory when it cannot reserve the address
    // space around it; the thread's arena is then the addon's own mapping.
    const out = child(`
      WebAssembly.Instance = function () { throw new RangeError('WebAssembly.Instance(): Out of memory'); };
      const { withLabels } = require(${JSON.stringify(root)});
      const { setwriter } = require(${JSON.stringify(root + '/lib/internals')});
      const tls = require(${JSON.stringify(root + '/test/helpers/tls')});
      const read = (labels) => withLabels(labels, () => Object.entries(tls.published()).map(([k, v]) => k + '=' + v));
      console.log(JSON.stringify({ before: setwriter.available, published: [read({ a: 'b' }), read({ route: '/x', trace: 't1' })],
        after: setwriter.available, reason: setwriter.reason, write: setwriter.write }));
    `, { CUSTOMLABELS_WRITER: 'wasm' });
    assert.equal(out.before, true);
    assert.deepEqual(out.published, [['a=b'], ['route=/x', 'trace=t1']]);
    assert.equal(out.after, false);
    assert.match(out.reason, /memory could not be made: WebAssembly.Instance\(\): Out of memory/);
    assert.equal(out.write, null);
  });

  it('adopts one arena per thread, of the arena\'s size only', () => {
    withLabels({ a: 'b' }, () => {}); // this thread's arena exists
    assert.throws(() => binding.adoptArena(), { name: 'TypeError', message: /adoptArena takes an ArrayBuffer of the arena's size/ });
    assert.throws(() => binding.adoptArena(new ArrayBuffer(16)), { name: 'TypeError' });
    assert.throws(() => binding.adoptArena(new Uint8Array(binding.layout.arenaBytes)), { name: 'TypeError' });
    assert.throws(() => binding.adoptArena(new ArrayBuffer(binding.layout.arenaBytes)), { message: /has its memory already/ });
  });

  it('carries into the upper half of an address where the arena crosses a 4 GiB boundary', () => {
    // Sets written from JavaScript (not ASCII) put each pointer as two
    // 32-bit halves.  Pretend the arena starts 4 KiB below a boundary: a set
    // made (never published) past that point must have the next upper half.
    const out = child(`
      const { labelset: { derive }, context: { EMPTY }, arena } = require(${JSON.stringify(root + '/lib/internals')});
      derive(EMPTY, { first: 'set' }, 'test'); // the arena is made
      arena.base = 0x7f00fffff000n;
      arena.baseLow = 0xfffff000;
      arena.baseHigh = 0x7f00;
      arena.cursor = Math.max(arena.cursor, 0x2000);
      const set = derive(EMPTY, { 'clé': 'välue' }, 'test');
      const w = set.offset >> 2;
      console.log(JSON.stringify({ offset: set.offset, storage: [arena.words[w], arena.words[w + 1]], key: [arena.words[w + 8], arena.words[w + 9]] }));
    `);
    assert.ok(out.offset >= 0x1000);
    assert.deepEqual(out.storage, [(0xfffff000 + out.offset + 24) - 2 ** 32, 0x7f01]);
    assert.deepEqual(out.key, [(0xfffff000 + out.offset + 24 + 32) - 2 ** 32, 0x7f01]);
  });
});
