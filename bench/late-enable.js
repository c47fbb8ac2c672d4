'use strict';
// What enableThreadContext() costs when it is called late: with N flows in
// flight, each a withLabels() of its own labels (a route and a unique id)
// waiting, half on a promise, half on a timer.  For each Node, mode and N,
// a child starts the flows, collects garbage, lets the loop idle, then calls
// enableThreadContext() from a timer, and reports:
//   call       how long the enableThreadContext() call itself took (ms)
//   max delay  the longest event-loop delay seen by
//              perf_hooks.monitorEventLoopDelay (resolution 1 ms) from
//              100 ms before the call to 100 ms after it (ms)
//   idle max delay  the same over 200 ms just before, with no call: the
//              loop's own delays (a collection, the machine's load)
//   resume     how long the flows then took to finish once let go, all at
//              once (ms): one long task in any case, the package's share
//              of it small
// With --baseline, the same for another copy of the package (a directory
// that holds one, such as an unchanged checkout, or a git ref of this
// checkout, whose lib/ runs on this checkout's addon and companions).
//
// Usage: node bench/late-enable.js [--node 24] [--node 26] [--flows 100000,20000]
//          [--modes frame,hooks] [--runs 1] [--baseline DIR|REF]
//        node bench/late-enable.js --help     this text; runs nothing
// Frame mode needs the companion for each Node (prebuilds/, or npm pack).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { ROOT, resolveNode, parseOptions, baselinePackage, checkoutCommit } = require('./cli');

if (process.argv[2] === '--child') child(process.argv[3], Number(process.argv[4]));
else main();

function main() {
  const o = parseOptions(process.argv.slice(2), __filename, { nodes: [], flows: [100000, 20000], modes: ['frame', 'hooks'], runs: 1, baseline: null }, {
    '--node': (x, v) => { x.nodes.push(v); },
    '--flows': (x, v) => { x.flows = v.split(',').map(Number); },
    '--modes': (x, v) => { x.modes = v.split(','); },
    '--runs': (x, v) => { x.runs = Number(v); },
    '--baseline': (x, v) => { x.baseline = v; },
  });
  if (o.nodes.length === 0) o.nodes = ['24', '26'];
  const packages = [{ name: `this checkout (${checkoutCommit()})`, root: ROOT }];
  let tmp = null;
  if (o.baseline !== null) {
    if (fs.existsSync(path.join(o.baseline, 'package.json'))) {
      packages.push({ name: `baseline ${o.baseline}`, root: path.resolve(o.baseline) });
    } else {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'late-enable-'));
      const hash = baselinePackage(o.baseline, tmp);
      packages.push({ name: `baseline ${hash.slice(0, 12)}`, root: tmp });
    }
  }
  console.log(`${os.cpus().length} CPUs (${os.cpus()[0].model}), ${new Date().toISOString()}`);
  console.log('| Node | mode | package | flows | call (ms) | max delay (ms) | idle max delay (ms) | resume (ms) |');
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |');
  try {
    for (const node of o.nodes) {
      const exe = resolveNode(node);
      const version = spawnSync(exe, ['--version'], { encoding: 'utf8' }).stdout.trim();
      for (const mode of o.modes) {
        for (const n of o.flows) {
          for (const pkg of packages) {
            for (let run = 0; run < o.runs; run++) {
              const r = spawnSync(exe, ['--expose-gc', __filename, '--child', pkg.root, String(n)],
                { encoding: 'utf8', env: { ...process.env, CUSTOMLABELS_PUBLISH: mode }, timeout: 600000 });
              if (r.status !== 0) throw new Error(`${version} ${mode} ${pkg.name} ${n}: exited ${r.status}: ${r.stderr.slice(-2000)}`);
              const m = JSON.parse(r.stdout.trim().split('\n').pop());
              if (m.mode !== mode) throw new Error(`${version}: asked for ${mode}, the package runs in ${m.mode} mode`);
              console.log(`| ${version} | ${mode} | ${pkg.name} | ${n} | ${m.call.toFixed(2)} | ${m.maxDelay.toFixed(2)} | ${m.idleMax.toFixed(2)} | ${m.resume.toFixed(0)} |`);
            }
          }
        }
      }
    }
  } finally {
    if (tmp !== null) fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// In the child: the package at `root`, `n` flows.
async function child(root, n) {
  const { monitorEventLoopDelay, performance } = require('node:perf_hooks');
  const cl = require(root);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  let open;
  const gate = new Promise((resolve) => { open = resolve; });
  const timers = [];
  const flows = new Array(n);
  for (let i = 0; i < n; i++) {
    flows[i] = cl.withLabels({ route: '/late', id: `flow-${i}` }, async () => {
      if (i % 2 === 0) await gate;
      else await new Promise((resolve) => { timers.push(resolve); setTimeout(resolve, 3600e3).unref(); });
      await null;
      return cl.getLabels().id === `flow-${i}` ? 1 : 0;
    });
  }
  global.gc();
  await sleep(200);
  // The same window with no call, for the loop's own delays (a collection,
  // the machine's load).
  const idle = monitorEventLoopDelay({ resolution: 1 });
  idle.enable();
  await sleep(200);
  idle.disable();
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await sleep(100);
  const call = await new Promise((resolve) => {
    setTimeout(() => {
      const t = performance.now();
      cl.enableThreadContext({ resource: { 'service.name': 'late-enable' } });
      resolve(performance.now() - t);
    }, 0);
  });
  await sleep(100);
  h.disable();
  const t = performance.now();
  open();
  for (const resolve of timers) resolve();
  const done = (await Promise.all(flows)).reduce((a, b) => a + b, 0);
  const resume = performance.now() - t;
  if (done !== n) throw new Error(`${done} of ${n} flows saw their own labels`);
  process.stdout.write(`${JSON.stringify({ mode: cl.publishMode, call, maxDelay: h.max / 1e6, idleMax: idle.max / 1e6, resume })}\n`);
  process.exit(0);
}
