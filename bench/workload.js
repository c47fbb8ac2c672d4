'use strict';
// The labels a service puts on each request, for the benchmarks: a route
// pattern from 20, a user from 1000, and a trace id unique to the request
// (32 lowercase hex characters, as W3C trace context carries it).  The
// strings are made up front, as a service would have read them from a
// header before labeling.  65536 trace ids, so no two calls within 65536
// share one.
//
// The strings are made by concatenation (a template literal, `repeat`), so
// V8 holds most of them as cons strings, flattened when first read.
// flatten() turns a list into flat sequential strings, the shape of a
// string read from a Buffer (an id generator's `toString('hex')`).

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

// The same requests, each trace id read from a header made for that
// request, as a server reads it: a W3C traceparent header's bytes arrive in
// a Buffer, become one flat string, and the id is sliced out of it.  So the
// id's characters are new in memory, where the pre-made ids were written
// long before.  Making the header costs time of its own, in every variant.
function fromHeaders(next) {
  const HEX = Buffer.from('0123456789abcdef', 'latin1');
  const header = Buffer.from(`00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`, 'latin1');
  let count = 0;
  return function labels() {
    const result = next();
    let x = Math.imul(++count, 0x9e3779b1) >>> 0;
    for (let k = 0; k < 48; k++) {
      if ((k & 7) === 0) x = Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) >>> 0;
      header[3 + k + (k >= 32 ? 1 : 0)] = HEX[(x >>> ((k & 7) * 4)) & 15];
    }
    result.trace = header.latin1Slice(0, header.length).slice(3, 35);
    return result;
  };
}

function flatten(strings) {
  return strings.map((s) => Buffer.from(s, 'latin1').toString('latin1'));
}

module.exports = { ROUTES, USERS, TRACE_IDS, requests, fromHeaders, flatten };
