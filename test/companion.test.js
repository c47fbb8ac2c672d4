'use strict';
// Frame mode's companion (customlabels-v8.node, src/frame/) on its own:
// that every call it exports refuses wrong arguments with a TypeError or a
// RangeError rather than letting V8 abort the process, that the layout it
// gives readers is V8's, and that it does not build for a V8 whose layout
// it cannot serve (pointer compression, the sandbox, direct handles).

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');

const ROOT = path.join(__dirname, '..');
const MAJOR = Number(process.versions.node.split('.')[0]);

// The child: frame mode running (a chunk in use, a set current), then each
// call with each wrong set of arguments; prints what each threw, then
// whether the package still publishes.  Arguments are built in the child
// (a store object, buffers, typed arrays), named by a tag here.
const CHILD = String.raw`
const internals = require('./lib/internals');
const cl = require('.');
const v8 = internals.companion.v8;
const store = cl.withLabels({ who: 'before' }, () => internals.context.state().storage.getStore());
const value = (a) => a === 'STORE' ? store : a === 'AB' ? new ArrayBuffer(64) : a === 'U8' ? new Uint8Array(64)
  : a === 'OBJ' ? {} : a === 'NAN' ? NaN : a;
const out = { mode: cl.publishMode, calls: Object.keys(v8).filter((k) => typeof v8[k] === 'function'), results: [] };
for (const [name, args] of JSON.parse(process.argv[1])) {
  let result;
  try {
    result = 'returned ' + typeof v8[name](...args.map(value));
  } catch (e) {
    result = e.name + ': ' + e.message;
  }
  out.results.push(result);
}
out.after = cl.withLabels({ who: 'after' }, () => cl.getLabels());
out.record = v8.recordOf(store);
process.stdout.write(JSON.stringify(out));
`;

const LABELS = Array.from({ length: 22 }, (_, i) => `s${i}`); // 11 labels: one more than a set holds

// [call, arguments, what it throws]: for every call the companion exports.
const CASES = [
  ['storeAls', [], 'TypeError'],
  ['storeAls', [42], 'TypeError'],
  ['storeOtelAls', ['als'], 'TypeError'],
  ['fill', [], 'TypeError'],
  ['fill', [1, 'x', 40, 1], 'TypeError'],
  ['fill', [-1, 64, 40, 1], 'TypeError'],
  ['fill', [1, 65, 40, 1], 'RangeError'], // an odd address: V8 aborts on it in a field
  ['fill', [1, 64, 41, 1], 'RangeError'],
  ['chunk', [], 'TypeError'],
  ['chunk', ['16384'], 'TypeError'],
  ['chunk', [0], 'RangeError'],
  ['chunk', [2 ** 31], 'RangeError'],
  ['putAscii', [], 'TypeError'],
  ['putAscii', ['U8', 0, 'a'], 'TypeError'],
  ['putAscii', ['AB', -1, 'a'], 'TypeError'],
  ['putAscii', ['AB', 0, 42], 'TypeError'],
  ['use', [], 'TypeError'],
  ['use', ['U8', 1, 1, 1], 'TypeError'],
  ['use', ['AB', 1, 1, 'x'], 'TypeError'],
  ['put', [], 'TypeError'],
  ['put', ['k'], 'TypeError'],
  ['put', ['k', 42], 'TypeError'],
  ['put', [42, 'v'], 'TypeError'],
  ['put', ['k', 'v', 'k2'], 'TypeError'],
  ['put', LABELS, 'TypeError'],
  ['recordOf', [], 'TypeError'],
  ['recordOf', [42], 'TypeError'],
  ['recordOf', ['OBJ'], 'TypeError'], // no internal field
  ['retire', [], 'TypeError'],
  ['retire', [1, 2], 'TypeError'],
  ['retire', ['1', 'OBJ'], 'TypeError'],
  ['live', [], 'TypeError'],
  ['live', [-1], 'TypeError'],
  ['move', [], 'TypeError'],
  ['move', ['OBJ', 64, 0], 'TypeError'],
  ['move', ['STORE', 'x', 0], 'TypeError'],
  ['move', ['STORE', 65, 0], 'RangeError'],
  ['move', ['STORE', 64, -1], 'TypeError'],
  ['otelStore', [], 'TypeError'],
  ['otelStore', ['64'], 'TypeError'],
  ['otelStore', [-64], 'RangeError'],
  ['otelStore', [2 ** 60], 'RangeError'],
  ['otelStore', ['NAN'], 'RangeError'],
  ['otelStore', [3], 'RangeError'],
];
// Calls that take no argument.
const NO_ARGUMENTS = ['cped'];

describe('frame mode\'s companion (customlabels-v8)', function () {
  this.timeout(120000);

  describe('its calls', function () {
    before(function () {
      needs.frameMode(this);
    });

    it('refuse wrong arguments with a TypeError or RangeError naming the call, and the process lives on', function () {
      const r = spawnSync(process.execPath, [...process.execArgv, '-e', CHILD, JSON.stringify(CASES)], {
        cwd: ROOT, encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' },
      });
      assert.equal(r.signal, null, `the child was killed by ${r.signal}: ${r.stderr}`);
      assert.equal(r.status, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.equal(out.mode, 'frame');
      // Every call the companion exports has a case here.
      const covered = new Set([...CASES.map(([name]) => name), ...NO_ARGUMENTS]);
      assert.deepEqual(out.calls.filter((name) => !covered.has(name)), []);
      CASES.forEach(([name, args, error], i) => {
        const what = `${name}(${args.map((a) => JSON.stringify(a)).join(', ')})`;
        assert.match(out.results[i], new RegExp(`^${error}: customlabels-v8 ${name}\\(`), what);
      });
      // Nothing the refused calls were given was taken: the package
      // publishes as before, and the store keeps its record.
      assert.deepEqual(out.after, { who: 'after' });
      assert.ok(out.record > 0 && out.record % 8 === 0, `record at ${out.record}`);
    });

    it('give readers V8\'s layout for this Node.js', function () {
      const r = spawnSync(process.execPath, [...process.execArgv, '-e',
        'process.stdout.write(JSON.stringify(require("./lib/internals").companion.v8.layout))'], {
        cwd: ROOT, encoding: 'utf8', timeout: 60000, env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' },
      });
      assert.equal(r.status, 0, r.stderr);
      const layout = JSON.parse(r.stdout);
      // From V8's headers by a fixture that is not the companion.
      const fromHeaders = require('./helpers/fixtures').v8Layout();
      assert.equal(layout.cpedOffset, fromHeaders.cpedOffset);
      assert.equal(layout.recordFieldOffset, fromHeaders.field0Offset);
      assert.equal(layout.otelRecordFieldOffset, fromHeaders.field0Offset);
      assert.deepEqual({ taggedSize: layout.taggedSize, jsMapTableOffset: layout.jsMapTableOffset,
        orderedHashMapHeaderSize: layout.orderedHashMapHeaderSize, entrySize: layout.entrySize },
      { taggedSize: 8, jsMapTableOffset: 0x18, orderedHashMapHeaderSize: 0x10, entrySize: 24 });
    });
  });

  describe('its build', function () {
    let include;
    const FLAGS = ['-std=c++20', '-DNODE_GYP_MODULE_NAME=customlabels_v8', '-DBUILDING_NODE_EXTENSION'];

    before(function () {
      needs.platform(this);
      if (MAJOR < 22) needs.feature(this, 'Node 22+', 'the companion is built for Node.js 22 and later');
      needs.tool(this, 'g++');
      include = path.resolve(path.dirname(process.execPath), '..', 'include', 'node');
      if (!fs.existsSync(path.join(include, 'v8-internal.h'))) {
        needs.feature(this, 'Node.js headers', `no V8 headers beside this Node.js (${include})`);
      }
    });

    // Every file of the companion, as scripts/prebuild.js builds it.
    const SOURCES = fs.readdirSync(path.join(ROOT, 'src', 'frame')).filter((f) => f.endsWith('.cc')).sort();

    // `how`: -fsyntax-only compiles; -E only preprocesses, which is enough
    // for the #error checks of src/frame/v8shims.h and takes far less time.
    function compile(defines, how = '-fsyntax-only') {
      return spawnSync('g++', [how, ...FLAGS, ...defines.map((d) => `-D${d}`), `-I${include}`,
        ...SOURCES.map((f) => path.join(ROOT, 'src', 'frame', f))],
      { encoding: 'utf8', timeout: 120000, stdio: ['ignore', 'ignore', 'pipe'] });
    }

    it('is every .cc file in src/frame, in binding.gyp as in scripts/prebuild.js', function () {
      const gyp = fs.readFileSync(path.join(ROOT, 'binding.gyp'), 'utf8');
      const listed = [...gyp.matchAll(/"src\/frame\/([^"]+\.cc)"/g)].map((m) => m[1]).sort();
      assert.ok(SOURCES.length > 1, SOURCES.join());
      assert.deepEqual(listed, SOURCES);
    });

    it('compiles against this Node.js\'s headers as its config.gypi has V8 (no compression, no sandbox)', function () {
      const config = fs.readFileSync(path.join(include, 'config.gypi'), 'utf8');
      assert.match(config, /"v8_enable_pointer_compression": 0/);
      assert.match(config, /"v8_enable_sandbox": 0/);
      const r = compile([]);
      assert.equal(r.status, 0, r.stderr);
    });

    for (const [defines, message] of [
      [['V8_COMPRESS_POINTERS'], /#error "customlabels-v8: V8 with pointer compression \(V8_COMPRESS_POINTERS\) is not supported/],
      [['V8_ENABLE_SANDBOX'], /#error "customlabels-v8: V8 with the sandbox \(V8_ENABLE_SANDBOX\) is not supported/],
      [['V8_COMPRESS_POINTERS', 'V8_ENABLE_SANDBOX'], /#error "customlabels-v8: V8 with pointer compression/],
      [['V8_ENABLE_DIRECT_HANDLE'], /#error "customlabels-v8: V8 with direct handles/],
      [['V8_ENABLE_DIRECT_LOCAL'], /#error "customlabels-v8: V8 with direct handles/],
    ]) {
      it(`refuses to build with ${defines.join(' and ')}, saying why, in every file`, function () {
        const r = compile(defines, '-E');
        assert.notEqual(r.status, 0, 'it compiled');
        assert.match(r.stderr, message);
        // Every file, built alone or with the others, reads the checks
        // (through v8shims.h) before V8's headers.
        for (const f of SOURCES) {
          assert.ok(r.stderr.includes(`from ${path.join(ROOT, 'src', 'frame', f)}:`), `${f} does not refuse`);
        }
      });
    }
  });
});
