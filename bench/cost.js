'use strict';
// What customlabels adds to a service, per request of the reference HTTP
// server (bench/http-server.js: labels of a route, a user and a trace id
// unique to the request, then 3 awaits), in variants that differ only in
// the mechanism: plain (no context), baseline (AsyncLocalStorage alone),
// floor-switch (AsyncLocalStorage and the least hooks a publisher that
// follows async hops needs: read the store, switch a pointer), labels
// (customlabels' withLabels, hooks mode), frame (the same with
// CUSTOMLABELS_PUBLISH=frame; Node 22 with AsyncContextFrame, 24+) and
// labels-tc (hooks mode with enableThreadContext()).  The one HTTP harness
// of bench/: server CPU time per request in rounds, or instructions per
// request under cachegrind.
//
//   node bench/cost.js [--node 24 --node 26] [--rounds 40] [--variants baseline,labels,frame]
//   node bench/cost.js --instructions [--node 24 --node 26] [--variants baseline,labels,frame] [--baseline REF]
//   node bench/cost.js --compiles [--node 24 --node 26] [--variants labels,frame]
// Options:
//   --node PATH|MAJOR   Node binary for the servers (repeatable; a major is
//                       this Node or .cache/node/<major>, as .ci/run installs)
//   --variants a,b      (plain,baseline,floor-switch,labels; also frame, labels-tc,
//                       method and register: customlabels/register against
//                       withLabels({ method }) by hand)
//   --values V          where the server's label values come from, alike in
//                       every variant (http-server.js --values): `premade`
//                       (default; strings made up front, bench/workload.js)
//                       or `request`: each request carries a W3C
//                       `traceparent` header with a trace id and span id
//                       unique to it, an `x-user-id` header (a user of 1000)
//                       and a URL of one of 20 routes, and the server makes
//                       the labels from them (route from a table by URL,
//                       user = the header, trace_id = the traceparent's
//                       trace id): strings new to every request
//   --help              this text; runs nothing
// CPU-time rounds (what users see):
//   --rounds N          rounds (40)
//   --duration S        seconds of each measured window (1)
//   --warmup S          seconds of saturated load each server gets first (2)
//   --fraction F        the fixed rate as a fraction of what `labels` serves
//                       saturated, measured after the warm-up (0.4)
//   --rate N            a fixed rate in requests/s instead (every Node)
//   --threads K         each server serves from K worker threads, one port
//                       each, the connections spread over them (0: the main
//                       thread)
//   --json FILE         every measurement, rewritten after each round
// Instructions (the measure for differences under a microsecond):
//   --instructions      instead of CPU time: instructions per request under
//                       valgrind's cachegrind (below)
//   --requests N1,N2    the two counts (24000,40000: bench/README.md says
//                       why the window starts there)
//   --reps N            runs per count (3)
//   --baseline REF      also count the package variants (labels, frame,
//                       labels-tc) with the lib/ of git commit REF beside
//                       this checkout's build/ and prebuilds/ (git archive
//                       into a temporary directory), and print this
//                       checkout − REF: whether a change in lib/ moves what
//                       a request pays
//   --compiles          instead: one server per variant, not under
//                       valgrind, with the same V8 flags and --trace-opt;
//                       prints how many functions V8 compiled between
//                       request N1 and N2, and which of them have a name
//                       that the package's lib/ defines (Node has some of
//                       the same names: get, set).  Where the package's
//                       functions of the request path still compile there,
//                       the window counts their tiering up
//
// --instructions counts what the machine's load does not move: each server
// runs under `valgrind --tool=cachegrind --cache-sim=no` (all its threads,
// GC and compiler included), with V8's --single-threaded --hash-seed=1
// --random-seed=1 (the compilers and the GC run on the main thread, in the
// same order in every run: two totals of one count differ by a few
// million, not a hundred), answers N requests sent one at a time on each
// of 10 keep-alive connections, and exits; per request = (total for N2 -
// total for N1) / (N2 - N1), which leaves out starting Node and loading the
// package, with the median total of `reps` runs for each count.  Prints per
// Node and variant the instructions per request, the difference from
// baseline and every run's total.  A variant the Node cannot run (frame on
// Node 20) is skipped with a line that says so.  Needs valgrind (Debian:
// apt-get install valgrind).  Per-hop counts (await, setImmediate,
// withLabels...): bench/instructions.js.
//
// The CPU-time rounds: one server process per variant and Node, all started
// first and kept up.  The load, from this process over 50 keep-alive
// connections per server, moves from one server to the next: a round
// measures, for each Node, one window of each variant at the fixed rate
// (requests due evenly in time, sent on a 1 ms clock), then one window of
// each saturated (each connection sends its next request when the last one
// is answered), the variants back to back in an order rotated each round.
// Server CPU per request = the server's CPU time in the window (all its
// threads, /proc/PID/task/*/schedstat, ns) over the requests it answered in
// it.  Results: per variant the median µs per request; for each pair the
// median of the differences within a round, their range, and a sign test (a
// difference is inside the noise unless p <= 0.05); then each server's peak
// RSS over the whole run (VmHWM; no gc() anywhere).  Exit code 0: a report,
// not a test.  docs/cost.md has the details.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { resolveNode, parseOptions, firstJsonLine, baselinePackage, checkoutCommit, ROOT } = require('./cli');
const { alternate, orderOf, median, paired } = require('./rounds');

const CONNECTIONS = 50;
const REQUEST = Buffer.from('GET /api/items/42 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 'latin1');

// The requests the load generator sends: `premade`, the same request each
// time; `request`, each request its own, with what http-server.js
// --values request makes its labels from: a URL of one of 20 routes, a user
// of 1000 (x-user-id) and a traceparent (W3C trace context, version 00,
// sampled) whose trace id and span id no other request of this process
// carries.
function requests(values) {
  if (values === 'premade') return () => REQUEST;
  // A random half of every trace id, so that two runs share none either.
  const prefix = require('node:crypto').randomBytes(8).toString('hex');
  let i = 0;
  return () => {
    const k = i++;
    const traceId = prefix + k.toString(16).padStart(16, '0');
    const spanId = (Math.imul(k + 1, 0x9e3779b1) >>> 0).toString(16).padStart(8, '0') + (k >>> 0).toString(16).padStart(8, '0');
    const user = `user-${100000 + ((k * 7) % 1000) * 7}`;
    return Buffer.from(`GET /api/v1/resource${k % 20}/${1000 + (k % 9973)} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
      `traceparent: 00-${traceId}-${spanId}-01\r\nx-user-id: ${user}\r\n\r\n`, 'latin1');
  };
}
const BODY = '{"ok":true}\n'; // what http-server.js answers, and only at a response's end

// The CPU time of every thread of process `pid`, in ns (on-CPU time as the
// scheduler counts it, not rounded to clock ticks).
function serverCpuNs(pid) {
  let ns = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch { /* a thread that just ended */ }
  }
  return ns;
}

// CONNECTIONS keep-alive connections spread over `ports`, one request in flight at
// most on each.  load(mode, seconds) sends requests until the time is up,
// then waits for the answers, and returns how many were answered.
async function openPool(ports, values) {
  const nextRequest = requests(values);
  const conns = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => new Promise((resolve, reject) => {
    const sock = net.connect(ports[i % ports.length], '127.0.0.1', () => resolve(sock));
    sock.once('error', reject);
    sock.setNoDelay(true);
  })));
  const free = [];
  let answered = 0;
  let inFlight = 0;
  let onFree = null; // what to do with a connection that became free
  let latencies = [];
  const send = (c) => {
    c.t0 = process.hrtime.bigint();
    inFlight++;
    c.sock.write(nextRequest());
  };
  const pool = conns.map((sock) => {
    const c = { sock, tail: '', t0: 0n };
    sock.on('data', (chunk) => {
      const s = c.tail + chunk.latin1Slice(0, chunk.length);
      let at = s.indexOf(BODY);
      while (at !== -1) {
        answered++;
        inFlight--;
        latencies.push(Number(process.hrtime.bigint() - c.t0) / 1e6);
        onFree(c);
        at = s.indexOf(BODY, at + BODY.length);
      }
      c.tail = s.slice(-(BODY.length - 1));
    });
    sock.on('error', () => {});
    return c;
  });

  function load(mode, seconds, rate) {
    return new Promise((resolve) => {
      answered = 0;
      latencies = [];
      let late = 0;
      const t0 = process.hrtime.bigint();
      const deadline = t0 + BigInt(Math.round(seconds * 1e9));
      let timer = null;
      let sent = 0;
      const finish = () => {
        if (inFlight > 0) return;
        if (timer) clearInterval(timer);
        const s = latencies.sort((a, b) => a - b);
        resolve({ answered, seconds: Number(process.hrtime.bigint() - t0) / 1e9, late,
          p50: s[s.length >> 1], p99: s[Math.floor(s.length * 0.99)] });
      };
      if (mode === 'saturated') {
        onFree = (c) => {
          if (process.hrtime.bigint() < deadline) send(c);
          else finish();
        };
        for (const c of pool) send(c);
      } else {
        // Open loop: by time t, rate * t requests are due; each goes out on a
        // free connection, or waits for one (counted in `late`).
        free.length = 0;
        free.push(...pool);
        let pending = 0;
        onFree = (c) => {
          if (pending > 0) { pending--; late++; send(c); } else { free.push(c); }
          if (timer === null && inFlight === 0) finish();
        };
        timer = setInterval(() => {
          const now = process.hrtime.bigint();
          if (now >= deadline) {
            clearInterval(timer);
            timer = null;
            pending = 0;
            if (inFlight === 0) finish();
            return;
          }
          const due = Math.floor(rate * Number(now - t0) / 1e9);
          while (sent < due) {
            sent++;
            const c = free.pop();
            if (c) send(c); else pending++;
          }
        }, 1);
      }
    });
  }
  const close = () => { for (const c of pool) c.sock.destroy(); };
  return { load, close };
}

// A server process of `variant`, warmed up with --warmup s of saturated
// load.  window(load, seconds, rate) measures one window; stop() ends it.
async function startServer(node, variant, o) {
  const child = spawn(node, ['http-server.js', variant, String(o.threads), '--values', o.values], { cwd: __dirname, env: process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  const stop = () => { child.stdin.end(); child.kill(); };
  try {
    const { ports, pid } = await firstJsonLine(child);
    const pool = await openPool(ports, o.values);
    await pool.load('saturated', o.warmup);
    const window = async (load, seconds, rate) => {
      const cpu0 = serverCpuNs(pid);
      const l = await pool.load(load, seconds, rate);
      const cpuNs = serverCpuNs(pid) - cpu0;
      return { us: cpuNs / 1e3 / l.answered, rps: l.answered / l.seconds, cores: cpuNs / 1e9 / l.seconds, late: l.late, p50: l.p50, p99: l.p99 };
    };
    // The peak resident memory of the server so far, all threads, in bytes.
    const peakRss = () => {
      try {
        return Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
      } catch {
        return NaN;
      }
    };
    return { window, peakRss, stop: () => { pool.close(); stop(); } };
  } catch (err) {
    stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------

function summarize(rounds, variants, load) {
  const us = (v) => rounds.map((r) => r[v]?.[load]?.us);
  const perVariant = Object.fromEntries(variants.map((v) => [v, {
    us: median(us(v)), rps: median(rounds.map((r) => r[v]?.[load]?.rps)),
    p99: median(rounds.map((r) => r[v]?.[load]?.p99)), late: rounds.reduce((s, r) => s + (r[v]?.[load]?.late || 0), 0),
  }]));
  // Paired: a - b within each round, and (a - b) / b.
  const pair = (a, b) => ({ a, b, ...paired(us(a), us(b)) });
  const pairs = [];
  for (let i = 0; i < variants.length; i++) {
    for (let j = 0; j < i; j++) pairs.push(pair(variants[i], variants[j]));
  }
  return { perVariant, pairs };
}

const NAMES = { plain: 'no context', baseline: 'AsyncLocalStorage', 'floor-switch': 'least hooks', labels: 'customlabels', frame: 'customlabels, frame mode', method: 'withLabels({ method }) by hand', register: 'customlabels/register' };
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const f2 = (x) => (Number.isFinite(x) ? (x >= 0 ? '+' : '') + x.toFixed(2) : 'n/a');
const pct = (x) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %` : 'n/a');

// One table of every Node and load: each variant's median µs per request,
// then the paired differences of customlabels (and of the least hooks
// against AsyncLocalStorage), median with the range and the median %.
function summaryTable(results, o) {
  const cols = [];
  for (const r of results) {
    if (r.rounds.length === 0) continue;
    for (const load of ['rate', 'saturated']) {
      cols.push({ title: `Node ${r.version.replace(/^v/, '').split('.')[0]}, ${load === 'rate' ? `${r.rate} req/s` : 'saturated'}`, s: summarize(r.rounds, o.variants, load) });
    }
  }
  const lines = [`| server CPU per request | ${cols.map((c) => c.title).join(' | ')} |`, `| --- |${cols.map(() => ' --- |').join('')}`];
  for (const v of o.variants) lines.push(`| ${NAMES[v] || v} | ${cols.map((c) => `${f1(c.s.perVariant[v].us)} µs`).join(' | ')} |`);
  const want = [['labels', 'plain'], ['labels', 'baseline'], ['labels', 'floor-switch'], ['frame', 'baseline'], ['frame', 'labels'],
    ['labels-tc', 'labels'], ['floor-switch', 'baseline'], ['baseline', 'plain']];
  for (const [a, b] of want) {
    const cells = cols.map((c) => {
      const p = c.s.pairs.find((x) => x.a === a && x.b === b);
      if (!p) return 'n/a';
      return `${f2(p.median)} µs, ${pct(p.fraction)} (${f2(p.min)} … ${f2(p.max)})${p.noise ? ' noise' : ''}`;
    });
    if (cells.some((x) => x !== 'n/a')) lines.push(`| ${NAMES[a]} − ${NAMES[b]} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function report(results, o) {
  const lines = ['', summaryTable(results, o)];
  const mb = (b) => (Number.isFinite(b) ? `${(b / 1048576).toFixed(1)} MB` : 'n/a');
  lines.push('', `| peak RSS of the server over the run (VmHWM) | ${o.variants.map((v) => NAMES[v] || v).join(' | ')} |`, `| --- |${o.variants.map(() => ' --- |').join('')}`);
  for (const r of results) lines.push(`| Node ${r.version} | ${o.variants.map((v) => mb(r.peakRss?.[v])).join(' | ')} |`);
  for (const r of results) {
    if (r.rounds.length === 0) continue;
    for (const load of ['rate', 'saturated']) {
      const s = summarize(r.rounds, o.variants, load);
      lines.push('', `Node ${r.version}, ${load === 'rate' ? `fixed rate ${r.rate} requests/s` : 'saturated (50 connections)'}, ${r.rounds.length} rounds:`, '');
      lines.push('| variant | server CPU per request (median) | requests/s | p99 |', '| --- | --- | --- | --- |');
      for (const v of o.variants) {
        const p = s.perVariant[v];
        lines.push(`| ${NAMES[v] || v} | ${f1(p.us)} µs | ${p.rps.toFixed(0)} | ${p.p99.toFixed(2)} ms${p.late ? ` (${p.late} sent late)` : ''} |`);
      }
      lines.push('', '| difference (paired within rounds) | median µs | middle half µs | range µs | median % | rounds above 0 |', '| --- | --- | --- | --- | --- | --- |');
      for (const p of s.pairs) {
        lines.push(`| ${NAMES[p.a] || p.a} − ${NAMES[p.b] || p.b} | ${f2(p.median)}${p.noise ? ' (inside the noise)' : ''} | ${f2(p.q1)} … ${f2(p.q3)} | ${f2(p.min)} … ${f2(p.max)} | ${pct(p.fraction)} | ${p.above}/${p.n} |`);
      }
    }
  }
  return lines.join('\n');
}

// V8's flags for a server under --instructions: one thread runs the
// compilers and the GC where it would hand them to others, and hashes and
// random numbers start from the same seeds, so that two runs of one count
// do the same work in the same order, as bench/instructions.js runs its
// children.  (Cachegrind counts every thread either way.)
const STEADY_FLAGS = ['--single-threaded', '--hash-seed=1', '--random-seed=1'];

// Sends `n` requests from nextRequest() to the server at `port`, one at a
// time on each of 10 keep-alive connections, and resolves when all are
// answered.
async function oneAtATime(port, n, nextRequest) {
  let left = n;
  await Promise.all(Array.from({ length: 10 }, () => new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let tail = '';
    const send = () => {
      if (left-- > 0) sock.write(nextRequest());
      else { sock.end(); resolve(); }
    };
    sock.once('connect', send);
    sock.once('error', reject);
    sock.on('data', (chunk) => {
      tail += chunk;
      let i;
      while ((i = tail.indexOf(BODY)) >= 0) {
        tail = tail.slice(i + BODY.length);
        send();
      }
    });
  })));
}

// The total instructions of one server of `variant` on `node`, with the
// package at `root`, that answers `n` requests, under cachegrind.
async function countInstructions(node, variant, n, root, values) {
  const os = require('node:os');
  const out = path.join(os.tmpdir(), `customlabels-cost-${process.pid}-${variant}-${n}-${Date.now()}.cg`);
  const proc = spawn('valgrind', ['--tool=cachegrind', '--cache-sim=no', `--cachegrind-out-file=${out}`,
    node, ...STEADY_FLAGS, path.join(__dirname, 'http-server.js'), variant, '0', '--values', values],
  { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, CUSTOMLABELS_ROOT: root } });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  try {
    const { ports } = await firstJsonLine(proc);
    await oneAtATime(ports[0], n, requests(values));
  } catch (err) {
    proc.stdin.end();
    proc.kill();
    await exited;
    fs.rmSync(out, { force: true });
    throw err;
  } finally {
    proc.stdin.end();
  }
  await exited;
  const m = /^summary: (\d+)/m.exec(fs.readFileSync(out, 'utf8'));
  fs.rmSync(out, { force: true });
  if (!m) throw new Error(`cachegrind wrote no summary for ${variant} on ${node}`);
  return Number(m[1]);
}

// The variants that load the package, which --baseline counts twice.
const PACKAGE_VARIANTS = new Set(['labels', 'frame', 'labels-tc', 'method', 'register']);

async function instructions(o) {
  const { spawnSync } = require('node:child_process');
  if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) throw new Error('valgrind is not installed (Debian: apt-get install valgrind)');
  const [n1, n2] = o.requests;
  const os = require('node:os');
  const tmp = o.baseline ? fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-cost-')) : null;
  try {
    const packages = [{ name: 'this checkout', root: ROOT }];
    let base = '';
    if (o.baseline) {
      const hash = baselinePackage(o.baseline, tmp);
      packages.unshift({ name: `${o.baseline}`, root: tmp });
      base = `; baseline: ${o.baseline} = ${hash.slice(0, 12)}`;
    }
    console.log(`customlabels cost in instructions per request: ${new Date().toISOString()}; this checkout: ${checkoutCommit()}${base}; ` +
      `(median of ${o.reps} totals for ${n2} - for ${n1}) / ${n2 - n1}, cachegrind --cache-sim=no; label values: ${o.values}`);
    for (const spec of o.nodes) {
      const node = resolveNode(spec);
      const version = require('node:child_process').execFileSync(node, ['--version']).toString().trim();
      const per = {};
      for (const v of o.variants) {
        for (const pkg of (PACKAGE_VARIANTS.has(v) ? packages : [packages[packages.length - 1]])) {
          const totals = { [n1]: [], [n2]: [] };
          try {
            // The two counts alternate, so that a change in the machine meets both.
            for (let r = 0; r < o.reps; r++) for (const n of [n1, n2]) totals[n].push(await countInstructions(node, v, n, pkg.root, o.values));
          } catch (err) {
            // frame on a Node without AsyncContextFrame: http-server.js says so.
            const why = /frame: the package publishes with \S+ on \S+/.exec(err.message);
            if (!why) throw err;
            console.log(`${version} ${v.padEnd(12)} skipped: ${why[0]}`);
            break;
          }
          const key = PACKAGE_VARIANTS.has(v) && pkg.root !== ROOT ? `${v}@base` : v;
          per[key] = (median(totals[n2]) - median(totals[n1])) / (n2 - n1);
          const spread = (t) => `${t.map((x) => (x / 1e6).toFixed(1)).join(' ')}M`;
          const sign = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(0)}`;
          const notes = [];
          if (per.baseline !== undefined && v !== 'baseline') notes.push(`${sign(per[key] - per.baseline)} over baseline`);
          if (key === v && per[`${v}@base`] !== undefined) notes.push(`${sign(per[v] - per[`${v}@base`])} over ${o.baseline}`);
          const who = PACKAGE_VARIANTS.has(v) && packages.length > 1 ? ` [${pkg.name}]` : '';
          console.log(`${version} ${(v + who).padEnd(12)} ${per[key].toFixed(0).padStart(7)} instructions/request${notes.length ? `  ${notes.join(', ')}` : ''}  (totals ${n1}: ${spread(totals[n1])}, ${n2}: ${spread(totals[n2])})`);
        }
      }
    }
  } finally {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// --compiles: what V8's compilers compile in the window that
// --instructions counts, one server per variant (not under valgrind, with
// --trace-opt).  A function of the package compiled there is a cost of
// tiering up, not of a request: the window should start after the last.
async function compiles(o) {
  const [n1, n2] = o.requests;
  const ours = packageFunctionNames();
  console.log(`customlabels: functions V8 compiled between request ${n1} and ${n2} (--trace-opt; Maglev and TurboFan); label values: ${o.values}`);
  for (const spec of o.nodes) {
    const node = resolveNode(spec);
    const version = require('node:child_process').execFileSync(node, ['--version']).toString().trim();
    for (const v of o.variants) {
      const proc = spawn(node, [...STEADY_FLAGS, '--trace-opt', path.join(__dirname, 'http-server.js'), v, '0', '--values', o.values],
        { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
      let out = '';
      proc.stdout.on('data', (d) => { out += d; });
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      try {
        const { ports } = await firstJsonLine(proc);
        const next = requests(o.values);
        await oneAtATime(ports[0], n1, next);
        const mark = out.length;
        await oneAtATime(ports[0], n2 - n1, next);
        const names = [...out.slice(mark).matchAll(/\[completed (?:compiling|optimizing) \S+ <JSFunction (\S+)/g)].map((m) => m[1]);
        const own = names.filter((name) => ours.has(name));
        console.log(`${version} ${v.padEnd(12)} ${String(names.length).padStart(4)} compiled; the package's names among them: ${own.length ? own.join(' ') : 'none'}`);
      } finally {
        proc.stdin.end();
        await exited;
      }
    }
  }
}

// The names of the functions and methods defined in the package's lib/
// (a name that Node also uses counts too: the list is an upper bound).
function packageFunctionNames() {
  const names = new Set();
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.js')) {
        const text = fs.readFileSync(p, 'utf8');
        for (const m of text.matchAll(/^\s*(?:async\s+)?(?:function\s*\*?\s*)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{/gm)) names.add(m[1]);
        for (const m of text.matchAll(/(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:function|\([^)]*\)\s*=>)/g)) names.add(m[1]);
      }
    }
  };
  walk(path.join(process.env.CUSTOMLABELS_ROOT || ROOT, 'lib'));
  for (const keyword of ['if', 'for', 'while', 'switch', 'catch', 'return']) names.delete(keyword);
  return names;
}

async function main() {
  const o = parseOptions(process.argv.slice(2), __filename,
    { nodes: [], rounds: 40, duration: 1, warmup: 2, fraction: 0.4, rate: 0, threads: 0, variants: ['plain', 'baseline', 'floor-switch', 'labels'], json: null,
      instructions: false, compiles: false, requests: [24000, 40000], reps: 3, baseline: null, values: 'premade' },
    {
      '--instructions': (x) => { x.instructions = true; },
      '--compiles': (x) => { x.compiles = true; },
      '--requests': (x, v) => { x.requests = v.split(',').map(Number); },
      '--reps': (x, v) => { x.reps = Number(v); },
      '--baseline': (x, v) => { x.baseline = v; },
      '--values': (x, v) => { x.values = v; },
      '--node': (x, v) => x.nodes.push(v), '--rounds': (x, v) => { x.rounds = Number(v); },
      '--duration': (x, v) => { x.duration = Number(v); }, '--warmup': (x, v) => { x.warmup = Number(v); },
      '--fraction': (x, v) => { x.fraction = Number(v); }, '--rate': (x, v) => { x.rate = Number(v); },
      '--threads': (x, v) => { x.threads = Number(v); },
      '--variants': (x, v) => { x.variants = v.split(','); }, '--json': (x, v) => { x.json = path.resolve(v); },
    });
  if (o.values !== 'premade' && o.values !== 'request') throw new Error('--values takes premade or request');
  if (o.baseline && !o.instructions) throw new Error('--baseline goes with --instructions');
  if (o.requests.length !== 2 || !(o.requests[1] > o.requests[0])) throw new Error('--requests takes N1,N2 with N2 > N1');
  if (o.nodes.length === 0) o.nodes = [process.execPath];
  if (o.compiles) return compiles(o);
  if (o.instructions) return instructions(o);
  const started = new Date();
  const results = [];
  for (const spec of o.nodes) {
    const node = resolveNode(spec);
    const version = require('node:child_process').execFileSync(node, ['--version']).toString().trim();
    const servers = {};
    for (const v of o.variants) servers[v] = await startServer(node, v, o);
    let rate = o.rate;
    if (!rate) {
      // The fixed rate: a fraction of what `labels` serves saturated.
      const sat = (await servers.labels.window('saturated', Math.max(3, o.duration))).rps;
      rate = Math.round((sat * o.fraction) / 100) * 100;
      console.error(`${version}: labels saturated at ${sat.toFixed(0)} requests/s; fixed rate ${rate}`);
    }
    results.push({ node, version, rate, servers, rounds: [] });
  }
  // Every server stays up; the load moves from one to the next.  A round
  // measures, for each Node (their order swapped each round) and each load,
  // one window of every variant back to back, the order rotated each round.
  const measureRound = async (i, round) => {
    const r = results[i];
    const order = orderOf(o.variants, round, 'rotate');
    const got = { order };
    for (const v of order) got[v] = {};
    for (const load of ['rate', 'saturated']) {
      for (const v of order) got[v][load] = await r.servers[v].window(load, o.duration, r.rate);
    }
    console.error(`round ${round + 1}/${o.rounds} ${r.version}: ${order.map((v) => `${v} ${f1(got[v].rate.us)}/${f1(got[v].saturated.us)}`).join(', ')} (µs at rate/saturated)`);
    return got;
  };
  const save = (round, got) => {
    results.forEach((r, i) => { r.rounds = got[i]; });
    if (o.json) fs.writeFileSync(o.json, JSON.stringify({ options: o, started, results }, (key, value) => (key === 'servers' ? undefined : value), 1));
  };
  try {
    await alternate(o.rounds, results.map((r, i) => i), measureRound, { afterRound: save });
  } finally {
    for (const r of results) {
      r.peakRss = {};
      for (const v of o.variants) {
        r.peakRss[v] = r.servers[v].peakRss();
        r.servers[v].stop();
      }
    }
  }
  console.log(`customlabels cost: ${started.toISOString()} to ${new Date().toISOString()}; label values: ${o.values}; ${require('node:os').cpus().length} CPUs (${require('node:os').cpus()[0].model})`);
  console.log(report(results, o));
}

if (require.main === module) main().catch((err) => { console.error(err.stack || err); process.exit(1); });

module.exports = { summarize, report, requests };
