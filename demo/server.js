'use strict';
// The demo's HTTP service: every request runs in withLabels({ route, user }),
// and the two routes cost different amounts of CPU.  It also keeps the CPU
// time it measured inside each route's handler, which the demo shows as the
// expected share.  Prints "listening PORT" once ready; 127.0.0.1 only.

const http = require('node:http');
const path = require('node:path');
const { withLabels } = require(path.join(__dirname, '..', 'lib'));

// CPU cost of a request, in units of ITERATIONS loop turns (about 2 ms).
const COST = { '/checkout': 3, '/search': 1 };
const ITERATIONS = 800000;

let stats = fresh();

function fresh() {
  const s = {};
  for (const route of Object.keys(COST)) s[route] = { requests: 0, cpuMicros: 0 };
  return s;
}

function burn(units) {
  let x = 0;
  for (let i = 0; i < units * ITERATIONS; i++) x = (x * 31 + i) | 0;
  return x;
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname === '/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stats));
    if (url.searchParams.has('reset')) stats = fresh();
    return;
  }
  const cost = COST[url.pathname];
  if (cost === undefined) {
    res.statusCode = 404;
    res.end();
    return;
  }
  const user = url.searchParams.get('user') || 'anonymous';
  // Measured around everything that runs under the labels.
  const before = process.cpuUsage();
  withLabels({ route: url.pathname, user }, () => {
    res.end(`${burn(cost)}\n`);
  });
  const used = process.cpuUsage(before);
  const entry = stats[url.pathname];
  entry.requests++;
  entry.cpuMicros += used.user + used.system;
});

server.keepAliveTimeout = 10000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

// The demo ends us with SIGTERM or by closing our stdin.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
