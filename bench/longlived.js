'use strict';
// What long-lived contexts cost in memory: LONG contexts, each kept by an
// AsyncResource.bind callback made inside its own withLabels (as a
// connection, a pooled resource or a captured snapshot keeps one), made
// between batches of BATCH short request flows (a route and a unique trace
// id, one await).  After three collections, prints the external memory,
// the ArrayBuffer memory and RSS, for the package in the given mode and for
// AsyncLocalStorage alone (the baseline), one child process each; then
// checks that every long-lived context still reads its own labels.
// RSS is printed also less V8's new space (the young generation, committed):
// V8 doubles it each time the bytes that survived scavenges since it last
// grew pass its capacity, up to 64 MB committed here (node --trace-gc-nvp:
// new_space_capacity, new_space_survived; Node 24 and 26), and keeps it
// while the process allocates.  So whether a run ends just before or just
// after a step moves RSS by 16 or 32 MB in any variant: AsyncLocalStorage
// alone ends the default run at 32 or 64 MB of it on Node 24, and reaches
// 64 MB on Node 26 with --long 10000.  Frame mode allocates more per flow
// (a set, its labels and its store object), so it scavenges more often and
// reaches each step sooner; the column less new space is what the package
// itself keeps.
//
// Usage: node bench/longlived.js [--node 24 --node 26] [--long 5000]
//        [--batch 200] [--variants als,frame,hooks]
//   --node PATH|MAJOR   Node binary (repeatable; see bench/cli.js; default this one)
//   --long N            long-lived contexts (5000)
//   --batch N           short flows between two long-lived contexts (200)
//   --variants a,b      of als (AsyncLocalStorage alone), frame, hooks
//                       (default als,frame,hooks)
// Exit code 0: a report, not a test (a context that read wrong labels
// makes it 1).

const { spawnSync } = require('node:child_process');
const path = require('node:path');

if (process.env.LONGLIVED_CHILD) {
  child().catch((err) => { console.error(err); process.exit(1); });
} else {
  main();
}

async function child() {
  const variant = process.env.LONGLIVED_CHILD;
  const LONG = Number(process.env.LONGLIVED_LONG);
  const BATCH = Number(process.env.LONGLIVED_BATCH);
  const { AsyncLocalStorage, AsyncResource } = require('node:async_hooks');
  let withLabels;
  let getLabels;
  if (variant === 'als') {
    const als = new AsyncLocalStorage();
    withLabels = (labels, fn) => als.run(labels, fn);
    getLabels = () => als.getStore();
  } else {
    process.env.CUSTOMLABELS_PUBLISH = variant;
    const cl = require(path.join(__dirname, '..'));
    if (cl.publishMode !== variant) throw new Error(`${variant}: the package publishes with ${cl.publishMode}`);
    ({ withLabels, getLabels } = cl);
  }
  const kept = [];
  let sink = 0;
  const flow = async () => {
    await null;
    if (getLabels().trace_id !== undefined) sink++;
  };
  let t = 0;
  for (let i = 0; i < LONG; i++) {
    const ps = [];
    for (let j = 0; j < BATCH; j++) {
      ps.push(withLabels({ route: '/api/orders', trace_id: (t++).toString(16).padStart(32, '0') }, flow));
    }
    await Promise.all(ps);
    kept.push(withLabels({ connection: `conn-${i}` }, () => AsyncResource.bind(() => getLabels().connection)));
  }
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const m = process.memoryUsage();
  const young = require('node:v8').getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
  let wrong = 0;
  for (let i = 0; i < LONG; i++) if (kept[i]() !== `conn-${i}`) wrong++;
  console.log(JSON.stringify({ external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss, newSpace: young === undefined ? 0 : young.physical_space_size, heapUsed: m.heapUsed, wrong, flows: sink }));
}

function main() {
  const { resolveNode, parseOptions } = require('./cli');
  const o = parseOptions(process.argv.slice(2), __filename, { node: [], long: 5000, batch: 200, variants: 'als,frame,hooks' }, {
    '--node': (x, v) => x.node.push(v),
    '--long': (x, v) => { x.long = Number(v); },
    '--batch': (x, v) => { x.batch = Number(v); },
    '--variants': (x, v) => { x.variants = v; },
  });
  const nodes = (o.node.length ? o.node : [process.execPath]).map(resolveNode);
  const { long, batch } = o;
  const variants = o.variants.split(',');
  const mb = (x) => (x / 1048576).toFixed(1).padStart(6);
  let failed = false;
  for (const node of nodes) {
    const rows = {};
    for (const v of variants) {
      const r = spawnSync(node, ['--expose-gc', __filename], {
        encoding: 'utf8',
        env: { ...process.env, LONGLIVED_CHILD: v, LONGLIVED_LONG: String(long), LONGLIVED_BATCH: String(batch) },
      });
      if (r.status !== 0) { console.log(`${node} ${v}: failed\n${r.stderr}`); failed = true; continue; }
      rows[v] = JSON.parse(r.stdout.trim().split('\n').pop());
      if (rows[v].wrong !== 0) failed = true;
    }
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    console.log(`Node ${version}: ${long} long-lived contexts, ${batch} flows between two, after 3 collections (MB)`);
    console.log('variant   external  (over als)  arrayBuffers       rss  (over als)  new space  rss less it  (over als)  wrong');
    for (const v of Object.keys(rows)) {
      const r = rows[v];
      const b = rows.als;
      const over = (x, y) => (b ? (x - y >= 0 ? '+' : '') + ((x - y) / 1048576).toFixed(1) : '').padStart(10);
      console.log(`${v.padEnd(8)} ${mb(r.external)}  ${over(r.external, b?.external)}  ${mb(r.arrayBuffers).padStart(12)}  ${mb(r.rss).padStart(8)}  ${over(r.rss, b?.rss)}  ${mb(r.newSpace).padStart(9)}  ${mb(r.rss - r.newSpace).padStart(11)}  ${over(r.rss - r.newSpace, b ? b.rss - b.newSpace : undefined)}  ${String(r.wrong).padStart(5)}`);
    }
  }
  if (failed) process.exitCode = 1;
}
