'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const helper = path.resolve(__dirname, 'helpers/tls.js');

function child(script, flags = []) {
  return JSON.parse(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', timeout: 120000 }));
}

describe('memory', () => {
  it('reclaims sets nobody can install again, never the published one', () => {
    const out = child(`
      const { withLabels } = require(${JSON.stringify(root)});
      const { arenaStats } = require(${JSON.stringify(root + '/lib/labelset.js')});
      const tls = require(${JSON.stringify(helper)});
      const settle = async () => { for (let i = 0; i < 4; i++) { gc(); await new Promise((r) => setTimeout(r, 10)); } };
      const mismatches = [];
      withLabels({ longlived: 'yes', pad: 'x'.repeat(50) }, async () => {
        const mine = tls.published();
        const address = tls.address();
        const baseline = arenaStats();
        for (let round = 0; round < 10; round++) {
          for (let i = 0; i < 20000; i++) withLabels({ user: String(round * 1e6 + i), route: '/churn' }, () => {});
          await settle();
          // The long-lived set is published again after each await; its
          // bytes must be intact although chunks around it were freed.
          const now = tls.published();
          if (JSON.stringify(now) !== JSON.stringify(mine) || tls.address() !== address) mismatches.push({ round, now });
        }
        await settle();
        const end = arenaStats();
        console.log(JSON.stringify({ mismatches, baseline, end }));
      });
    `, ['--expose-gc']);
    assert.deepEqual(out.mismatches, []);
    assert.ok(out.end.chunksAllocated - out.baseline.chunksAllocated > 40, 'the churn went through many chunks');
    assert.ok(out.end.chunksReleased > 40, 'chunks were given back');
    assert.equal(out.end.releaseFailures, 0, 'no release was refused');
    assert.ok(out.end.liveChunks <= out.baseline.liveChunks + 2, `live chunks back near baseline: ${JSON.stringify(out)}`);
  });

  it('makes no native call on async hops, labeled or not', () => {
    // Count every call into the addon after the first set exists.
    const out = child(`
      const binding = require(${JSON.stringify(root + '/build/Release/customlabels.node')});
      const calls = {};
      for (const name of Object.keys(binding)) {
        if (typeof binding[name] !== 'function') continue;
        const original = binding[name];
        binding[name] = function (...args) { calls[name] = (calls[name] || 0) + 1; return original.apply(this, args); };
      }
      const { withLabels } = require(${JSON.stringify(root)});
      (async () => {
        await withLabels({ warm: 'up' }, async () => { await null; });
        const before = JSON.stringify(calls);
        await withLabels({ route: '/hops' }, async () => {
          for (let i = 0; i < 1000; i++) { await null; await new Promise((r) => setImmediate(r)); }
        });
        for (let i = 0; i < 1000; i++) await null;
        console.log(JSON.stringify({ before, after: JSON.stringify(calls) }));
      })();
    `);
    assert.equal(out.after, out.before);
  });
});
