'use strict';
// bench/workload.js, a module of the benchmarks (not a script).  The labels
// a service puts on each request, for the benchmarks: a route
// pattern from 20, a user from 1000, and a trace id unique to the request
// (32 lowercase hex characters, as W3C trace context carries it).  The
// strings are made up front, as a service would have read them from a
// header before labeling.  65536 trace ids, so no two calls within 65536
// share one.
if (require.main === module) require('./cli').printUsage(__filename);

const ROUTES = Array.from({ length: 20 }, (_, i) => `/api/v1/resource${i}/:id`);
const USERS = Array.from({ length: 1000 }, (_, i) => `user-${100000 + i * 7}`);
const TRACE_IDS = Array.from({ length: 65536 }, (_, i) => {
  const x = Math.imul(i + 1, 0x9e3779b1) >>> 0;
  return (x.toString(16).padStart(8, '0') + (i * 2654435761 % 4294967296).toString(16).padStart(8, '0')).repeat(2);
});

// A generator of the labels objects of successive requests, over the given
// strings: a new object literal per call, as application code builds it.
function requests({ routes = ROUTES, users = USERS, traces = TRACE_IDS } = {}) {
  let next = 0;
  return function labels() {
    const i = next++;
    return { route: routes[i % 20], user: users[(i * 7) % 1000], trace: traces[i & 65535] };
  };
}

module.exports = { ROUTES, USERS, TRACE_IDS, requests };
