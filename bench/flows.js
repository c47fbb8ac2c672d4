'use strict';
// In-process request-like flows: each flow gets a new label set (a unique
// trace id) and awaits three times; FLOWS of them run at a time.  What a
// mechanism costs per flow, next to AsyncLocalStorage alone, measured in the
// same run:
//   als         AsyncLocalStorage.run with a plain object as the store
//   hooks       the package as it is (withLabels, hooks keep the thread's set)
//   frame       the package in frame mode (CUSTOMLABELS_PUBLISH=frame)
// Each variant runs in its own child process (hooks, once enabled, would
// slow every variant after them), in paired rounds whose order rotates
// (bench/rounds.js); the figure is the median over rounds of (variant - als)
// in that round, with the spread of those differences.  No gc() is called.  The figure is the
// child's CPU time (user + system, GC threads included) per flow unless
// --clock wall: on a machine shared with other work, waiting for a core
// would otherwise count as cost.
//
// --labels N: each set has N labels, N - 1 of them the same in every flow
// (route, method, ...) and a unique trace id (default 1).
// --nested: the N - 1 repeating labels are set by an outer call and the
// trace id by an inner one, as middleware and a handler would (two sets per
// flow).
//
// Usage: node bench/flows.js [--rounds 12] [--batches 4000] [--labels 1] [--nested] [--clock cpu|wall]
//                            [--variants als,hooks,frame]
//        node bench/flows.js --help   this text; runs nothing
if (require.main === module) require('./cli').helpOrNothing(process.argv.slice(2), __filename);

const { spawnSync } = require('node:child_process');
const { alternate, median, paired } = require('./rounds');

const FLOWS = 50;
const WARM = 400;

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

const FIXED = [['route', '/api/v1/orders/:id'], ['method', 'GET'], ['tenant', 'acme-corp'], ['region', 'eu-west-1'],
  ['service', 'checkout'], ['version', '2.14.1'], ['shard', '17'], ['pool', 'blue'], ['tier', 'gold']];

// The variant's run(traceId, fn) and get(), with `n` labels per set.
function setup(variant, n, nested) {
  const fixed = FIXED.slice(0, n - 1);
  if (nested) {
    const outer = setup(variant, n, false);
    return { run: (id, fn) => outer.runFixed(() => outer.runId(id, fn)), get: outer.get };
  }
  if (variant === 'als' || variant === 'hooks' || variant === 'frame') {
    if (variant !== 'als') process.env.CUSTOMLABELS_PUBLISH = variant;
    const cl = variant !== 'als' ? require('../lib') : null;
    if (cl && cl.publishMode !== variant) throw new Error(`${variant}: the package publishes with ${cl.publishMode}`);
    const { AsyncLocalStorage } = require('node:async_hooks');
    const als = new AsyncLocalStorage();
    const labels = (id) => {
      const o = {};
      for (const [k, v] of fixed) o[k] = v;
      o.trace_id = id;
      return o;
    };
    const fixedObj = () => {
      const o = {};
      for (const [k, v] of fixed) o[k] = v;
      return o;
    };
    if (cl) {
      return { run: (id, fn) => cl.withLabels(labels(id), fn), get: () => cl.getLabels(),
        runFixed: (fn) => cl.withLabels(fixedObj(), fn), runId: (id, fn) => cl.withLabels({ trace_id: id }, fn) };
    }
    return { run: (id, fn) => als.run(labels(id), fn), get: () => als.getStore(),
      runFixed: (fn) => als.run(fixedObj(), fn), runId: (id, fn) => als.run({ ...als.getStore(), trace_id: id }, fn) };
  }
  throw new Error(`unknown variant ${variant}`);
}

async function child(variant, batches, labelCount, nested) {
  const { run, get } = setup(variant, labelCount, nested);
  let sink = 0;
  let n = 0;
  // Unique trace ids, made before timing as flat strings, as ids from a
  // header or from hex-encoded random bytes are (a concatenated id would
  // make every writer pay for flattening it).
  const ids = new Array((WARM + batches) * FLOWS);
  const hex = Buffer.alloc(32);
  hex.write('4bf92f3577b34da6a3ce929d', 'latin1');
  for (let i = 0; i < ids.length; i++) {
    hex.write(i.toString(16).padStart(8, '0'), 24, 'latin1');
    ids[i] = hex.toString('latin1');
  }
  async function flow() {
    await null;
    await null;
    await null;
    if (get() !== undefined) sink++;
  }
  async function batch() {
    const ps = new Array(FLOWS);
    for (let i = 0; i < FLOWS; i++) ps[i] = run(ids[n++], flow);
    await Promise.all(ps);
  }
  for (let i = 0; i < WARM; i++) await batch();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < batches; i++) await batch();
  const ns = Number(process.hrtime.bigint() - t0);
  const c = process.cpuUsage(c0);
  if (sink !== (WARM + batches) * FLOWS) throw new Error(`${variant}: a flow did not see its store`);
  const flows = batches * FLOWS;
  process.stdout.write(JSON.stringify({ variant, wall: ns / 1000 / flows, cpu: (c.user + c.system) / flows }));
}

function parent() {
  const rounds = Number(arg('rounds', 12));
  const batches = Number(arg('batches', 4000));
  const labels = Number(arg('labels', 1));
  const nested = process.argv.includes('--nested');
  const clock = arg('clock', 'cpu');
  const variants = arg('variants', 'als,hooks,frame').split(',');
  if (!variants.includes('als')) variants.unshift('als');
  // bench/rounds.js: every variant once a round, in an order that rotates.
  const measure = (v) => {
    const c = spawnSync(process.execPath, [...process.execArgv, __filename, '--child', v, '--batches', String(batches),
      '--labels', String(labels), ...(nested ? ['--nested'] : [])],
    { encoding: 'utf8' });
    if (c.status !== 0) throw new Error(`${v}: exit ${c.status}\n${c.stderr}`);
    return JSON.parse(c.stdout)[clock];
  };
  return alternate(rounds, variants, measure, { order: 'rotate', label: 'flows' }).then((results) => {
    console.log(`node ${process.version} ${process.execArgv.join(' ')}; ${clock === 'cpu' ? 'CPU time (user + system)' : 'wall time'} per flow; ${rounds} paired rounds; ${batches} x ${FLOWS} flows per child; a flow = ${nested ? `a set of ${labels - 1} repeating label(s), inside it a set adding a unique trace id,` : `a new set of ${labels} label(s) (one a unique trace id)`} + 3 awaits`);
    const als = results.als;
    console.log(`baseline als: median ${median(als).toFixed(3)} us/flow (min ${Math.min(...als).toFixed(3)}, max ${Math.max(...als).toFixed(3)})`);
    const sign = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(3)}`;
    for (const v of variants) {
      if (v === 'als') continue;
      const d = paired(results[v], als);
      console.log(`${v.padEnd(11)} median ${median(results[v]).toFixed(3)} us/flow; ${v} - als: median ${sign(d.median)} us ` +
        `(quartiles ${sign(d.q1)} to ${sign(d.q3)}, range ${sign(d.min)} to ${sign(d.max)}; above 0 in ${d.above} of ${d.n} rounds${d.noise ? ', not told from noise' : ''})`);
    }
  });
}

if (process.argv.includes('--child')) {
  child(arg('child'), Number(arg('batches', 4000)), Number(arg('labels', 1)), process.argv.includes('--nested')).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  parent().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
