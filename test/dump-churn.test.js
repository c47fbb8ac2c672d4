'use strict';
// customlabels-dump --sample over a thread that switches label sets every
// few microseconds (test/fixtures/dump_churn.js): reads of the running
// thread see the set change under them most of the time, and the sampler
// must still count nearly every sample, each under the set the thread was
// really in (it reads such a thread stopped, as an interrupting profiler
// does), so that the shares match the work.  Hooks mode on every Node;
// frame mode where it runs (Node 22 with --experimental-async-context-frame,
// 24, 26).

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { skipUnderEmulation, why } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { killAll, startFixture } = require('./helpers/children');

const ROOT = path.join(__dirname, '..');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'dump_churn.js');

const dump = (args) => promisify(execFile)(DUMP, args, { encoding: 'utf8', timeout: 30000 });
const jsonLines = (s) => s.split('\n').filter(Boolean).map((l) => JSON.parse(l));

// The fixture's next line of time spent per set, asked for on stdin.
function workSince(child) {
  return new Promise((resolve) => {
    let buf = '';
    const on = (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      child.stdout.off('data', on);
      resolve(JSON.parse(buf.slice(0, nl)));
    };
    child.stdout.on('data', on);
    child.stdin.write('\n');
  });
}

// Samples the fixture's main thread for 3 s and checks what was counted.
async function sampleChurn(env) {
  const { child, pid } = await startFixture(process.execPath, [...process.execArgv, FIXTURE], { env });
  await workSince(child); // starts the count of the work
  const rows = jsonLines((await dump(['--json', '--sample', '200', '--duration', '3', String(pid)])).stdout);
  const work = await workSince(child);
  const main = rows.filter((r) => r.tid === pid);
  const count = { total: 0, dropped: 0, a: 0, b: 0, flow: 0, other: 0 };
  const errors = new Set();
  for (const r of main) {
    count.total += r.samples;
    if (r.error) {
      count.dropped += r.samples;
      errors.add(r.error);
    } else if (r.labels && r.labels.work) {
      // Never a torn mix: a whole set of the fixture's.
      assert.deepEqual(Object.keys(r.labels).sort(), ['flow', 'work'], JSON.stringify(r));
      assert.ok(['a', 'b'].includes(r.labels.work), JSON.stringify(r));
      count[r.labels.work] += r.samples;
    } else if (r.labels && r.labels.flow === 'churn') {
      count.flow += r.samples;
    } else {
      count.other += r.samples;
    }
  }
  const what = `${JSON.stringify(count)}, work ${JSON.stringify(work)}, errors ${JSON.stringify([...errors])}`;
  // The sets really switched every few microseconds (a few more where the
  // addon is built with sanitizers): faster than a read of the running
  // thread, a few dozen system calls, can keep up with.
  assert.ok(work.meanSetNs > 0 && work.meanSetNs < 50000, what);
  assert.ok(count.total >= 200, what);
  // At most 1 % of the thread's samples could not be read.
  assert.ok(count.dropped <= 0.01 * count.total, what);
  // "a" takes about a quarter of the time inside a or b: the samples say
  // so.  A set is published during part of withLabels' own work, so its
  // true share lies between its share of the callbacks' time and of the
  // whole calls' time; the samples must fall there, give or take their
  // statistical error (some 0.02 at this count: three times that).
  assert.ok(count.a + count.b >= 0.3 * count.total, what);
  const sampled = count.a / (count.a + count.b);
  const inCallback = work.a / (work.a + work.b);
  const inCall = work.aCall / (work.aCall + work.bCall);
  const low = Math.min(inCallback, inCall) - 0.06;
  const high = Math.max(inCallback, inCall) + 0.06;
  assert.ok(sampled >= low && sampled <= high,
    `share of a: sampled ${sampled.toFixed(3)}, spent ${inCallback.toFixed(3)} in the callback, ${inCall.toFixed(3)} in the call; ${what}`);
}

describe(`customlabels-dump --sample over sets that switch every few microseconds, on Node ${process.versions.node}`, function () {
  this.timeout(60000);
  afterEach(killAll);

  before(function () {
    needs.platform(this);
    skipUnderEmulation(this, why.dump);
    if (!fs.existsSync(DUMP)) needs.feature(this, 'customlabels-dump', 'build/Release/customlabels-dump is not built (npm install builds it)');
  });

  it('hooks mode: at most 1 % of samples dropped, and the shares match the work', async function () {
    await sampleChurn({ CUSTOMLABELS_PUBLISH: 'hooks' });
  });

  it('frame mode: at most 1 % of samples dropped, and the shares match the work', async function () {
    needs.frameMode(this);
    await sampleChurn({ CUSTOMLABELS_PUBLISH: 'frame' });
  });
});
