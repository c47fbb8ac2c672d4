'use strict';
// npm run demo: starts a small HTTP service whose handlers run in
// withLabels({ route, user }), drives load at it, samples it from outside
// with customlabels-dump, and prints the CPU share per route that the
// sampler saw next to the share expected from what the handlers cost, and
// how the sampler found the labels: through custom_labels_current_set, or,
// with CUSTOMLABELS_PUBLISH=frame in the environment (the service inherits
// it), in V8's AsyncContextFrame ([frame], docs/dump.md).

const http = require('node:http');
const path = require('node:path');

const { setup, pct } = require('./common');

const HZ = 200;
const SECONDS = 4;
const WARMUP_MS = 1000;
const CLIENTS = 4;
const MAX_REQUESTS = 100000; // a hard bound on the load, whatever happens
const USERS = ['alice', 'bob', 'carol'];
const ROUTES = ['/checkout', '/search'];
const COST = { '/checkout': 3, '/search': 1 }; // as in demo/server.js

const { fail, start, sample } = setup('demo');
const { server, port: listening, stop: stopServer } = start([path.join(__dirname, 'server.js')], {}, /listening (\d+)/);

const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });

function get(port, pathAndQuery) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathAndQuery, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
  });
}

// One client: alternates the two routes until the deadline.
async function client(port, id, deadline, counter) {
  for (let i = id; Date.now() < deadline && counter.n < MAX_REQUESTS; i++) {
    counter.n++;
    await get(port, `${ROUTES[i % 2]}?user=${USERS[i % USERS.length]}`);
  }
}

async function main() {
  const port = await listening;
  const pid = server.pid;
  console.log('customlabels-dump demo');
  console.log(`  service  node demo/server.js, pid ${pid}: each request runs in withLabels({ route, user })`);
  console.log(`           GET /checkout costs ${COST['/checkout']} units of CPU, GET /search ${COST['/search']}`);
  console.log(`  load     ${CLIENTS} clients alternating the two routes, users ${USERS.join(', ')}`);
  console.log(`  sampler  customlabels-dump --json --sample ${HZ} --duration ${SECONDS} ${pid}\n`);

  const deadline = Date.now() + WARMUP_MS + SECONDS * 1000 + 500;
  const counter = { n: 0 };
  const load = Promise.all(Array.from({ length: CLIENTS }, (_, id) => client(port, id, deadline, counter)));

  await new Promise((r) => setTimeout(r, WARMUP_MS));
  await get(port, '/stats?reset');
  const samples = await sample(pid, HZ, SECONDS);
  const measured = JSON.parse(await get(port, '/stats'));
  await load;
  agent.destroy();
  stopServer();

  const perRoute = Object.fromEntries(ROUTES.map((r) => [r, 0]));
  const perUser = {};
  let unlabeled = 0;
  let total = 0;
  let viaFrame = 0;
  for (const s of samples) {
    total += s.samples;
    const route = s.labels?.route;
    if (route in perRoute) {
      perRoute[route] += s.samples;
      if (s.via === 'frame') viaFrame += s.samples;
      perUser[s.labels.user] = (perUser[s.labels.user] || 0) + s.samples;
    } else {
      unlabeled += s.samples;
    }
  }
  const labeled = total - unlabeled;
  if (labeled === 0) fail('no sample fell in a handler: is the machine too busy?');
  const cpuTotal = ROUTES.reduce((n, r) => n + measured[r].cpuMicros, 0);
  const costTotal = ROUTES.reduce((n, r) => n + COST[r] * measured[r].requests, 0);

  const row = (cols) => cols.map((c, i) => (i === 0 ? String(c).padEnd(11) : String(c).padStart(14))).join('');
  console.log(row(['route', 'requests', 'sampled CPU', 'expected', 'measured']));
  for (const r of ROUTES) {
    console.log(row([r, measured[r].requests, pct(perRoute[r] / labeled),
      pct((COST[r] * measured[r].requests) / costTotal), pct(measured[r].cpuMicros / cpuTotal)]));
  }
  console.log('\n  sampled CPU  share of the samples taken inside a handler, per route label');
  console.log('  expected     cost x requests: what the handlers were asked to burn');
  console.log('  measured     CPU time the service itself measured inside each handler');
  console.log(`\n${total} samples of running threads: ${labeled} in a handler, ${unlabeled} outside any withLabels (HTTP parsing, GC, idle loop)`);
  console.log(`by user: ${Object.entries(perUser).sort().map(([u, n]) => `${u} ${pct(n / labeled)}`).join(', ')}`);
  const via = viaFrame === labeled ? 'frame mode: each set found in V8\'s AsyncContextFrame ([frame])'
    : viaFrame === 0 ? 'custom_labels_current_set (hooks mode)'
      : `frame mode for ${viaFrame} samples, custom_labels_current_set for ${labeled - viaFrame}`;
  console.log(`labels read through: ${via}`);
}

main().catch((err) => {
  stopServer();
  fail(err.message);
});
