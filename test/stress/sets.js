'use strict';
// The label sets of the stress test (test/stress/soak.js), as the server
// and its workers make them and the checker reads them back.  Each set
// carries a checksum of its other values, so a sample that mixed two sets,
// or caught one half written, does not add up.
//
//   HTTP request:  { route, user, trace, sum }, sum = httpSum(route, user, trace)
//   worker job:    { worker, job, trace, sum }, sum = workerSum(worker, job, trace)
//   nested step:   the enclosing set + { step, ssum }, ssum = stepSum(trace, step)
//   start-up:      { phase: 'startup' }

// FNV-1a, 32 bits, as hex: the checksum that ties a set's values together.
function fnv(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(16);
}

const ROUTE_NAMES = ['users', 'orders', 'carts', 'checkout', 'search', 'products', 'reviews', 'payments',
  'invoices', 'shipments', 'inventory', 'coupons', 'wishlists', 'sessions', 'accounts', 'addresses',
  'notifications', 'recommendations', 'categories', 'refunds'];
const ROUTES = ROUTE_NAMES.map((n) => `/api/v1/${n}/:id`);
const USERS = 1000;
const HTTP_STEPS = ['auth', 'render'];
const WORKER_STEPS = ['compute'];

const httpSum = (route, user, trace) => fnv(`h|${route}|${user}|${trace}`);
const workerSum = (worker, job, trace) => fnv(`w|${worker}|${job}|${trace}`);
const stepSum = (trace, step) => fnv(`${trace}|${step}`);

// Busy for `us` microseconds: CPU spent under the current labels, so that
// samples land inside labelled work.
function spin(us) {
  const end = process.hrtime.bigint() + BigInt(Math.round(us * 1000));
  let x = 0;
  while (process.hrtime.bigint() < end) x++;
  return x;
}

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = { ROUTE_NAMES, ROUTES, USERS, HTTP_STEPS, WORKER_STEPS, httpSum, workerSum, stepSum, spin, immediate, sleep };
