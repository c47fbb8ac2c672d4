'use strict';
// What customlabels/register labels, from the environment, read once per
// thread:
//
//   CUSTOMLABELS_AUTO         the labels to set, comma-separated, of
//                             method, route and trace (trace_id and span_id);
//                             unset or empty: all three; none: none of them
//   CUSTOMLABELS_AUTO_LABELS  fixed labels for every request: key=value,...
//
// A bad value never stops the service: what can be read is used, and one
// warning per variable (its name is the warning's code) says what was left
// out.

const { LIMITS, checkKey, utf8Length } = require('../checks');
const { warnOnce } = require('../warnings');

const NAMES = ['method', 'route', 'trace'];
// The keys each name labels.
const KEYS = { method: ['method'], route: ['route'], trace: ['trace_id', 'span_id'] };

function parseAuto(raw) {
  const on = new Set();
  if (raw === undefined || raw.trim() === '') {
    for (const name of NAMES) on.add(name);
    return on;
  }
  if (raw.trim() === 'none') return on;
  const unknown = [];
  for (const entry of raw.split(',')) {
    const name = entry.trim();
    if (name === '') continue;
    if (NAMES.includes(name)) on.add(name);
    else unknown.push(JSON.stringify(name));
  }
  if (unknown.length > 0) {
    warnOnce('CUSTOMLABELS_AUTO',
      `CUSTOMLABELS_AUTO=${raw}: ${unknown.join(', ')} ${unknown.length > 1 ? 'are not labels' : 'is not a label'} it sets ` +
      `(those are ${NAMES.join(', ')}, or none); customlabels/register labels ${on.size > 0 ? [...on].join(', ') : 'none of them'}`);
  }
  return on;
}

function parseFixed(raw, on) {
  const fixed = {};
  if (raw === undefined || raw.trim() === '') return fixed;
  const taken = new Set([...on].flatMap((name) => KEYS[name]));
  const room = LIMITS.maxLabels - taken.size;
  const problems = [];
  let count = 0;
  for (const entry of raw.split(',')) {
    if (entry.trim() === '') continue;
    const eq = entry.indexOf('=');
    if (eq < 0) {
      problems.push(`${JSON.stringify(entry)} is not key=value`);
      continue;
    }
    const key = entry.slice(0, eq).trim();
    const value = entry.slice(eq + 1).trim();
    try {
      checkKey(key, 'key');
    } catch {
      problems.push(`the key ${JSON.stringify(key)} is not 1 to ${LIMITS.maxKeyBytes} bytes`);
      continue;
    }
    if (utf8Length(value, LIMITS.maxValueBytes) > LIMITS.maxValueBytes) {
      problems.push(`the value of ${JSON.stringify(key)} is more than ${LIMITS.maxValueBytes} bytes`);
      continue;
    }
    if (taken.has(key)) {
      problems.push(`${JSON.stringify(key)} is set per request (CUSTOMLABELS_AUTO)`);
      continue;
    }
    if (!Object.prototype.hasOwnProperty.call(fixed, key)) {
      if (count === room) {
        problems.push(`${JSON.stringify(key)} is one label too many (a set holds ${LIMITS.maxLabels}, ${taken.size} of them per request)`);
        continue;
      }
      count++;
    }
    Object.defineProperty(fixed, key, { value, writable: true, enumerable: true, configurable: true });
  }
  if (problems.length > 0) {
    warnOnce('CUSTOMLABELS_AUTO_LABELS',
      `CUSTOMLABELS_AUTO_LABELS=${raw}: ${problems.join('; ')}; customlabels/register labels every request with ` +
      `${count > 0 ? Object.keys(fixed).map((k) => `${k}=${fixed[k]}`).join(',') : 'no fixed label'}`);
  }
  return fixed;
}

// { method, route, trace: booleans, fixed: { key: value } }.  `envVar`
// reads a variable (undefined where a permission model hides it).
function parse(envVar) {
  const on = parseAuto(envVar('CUSTOMLABELS_AUTO'));
  return {
    method: on.has('method'), route: on.has('route'), trace: on.has('trace'),
    fixed: parseFixed(envVar('CUSTOMLABELS_AUTO_LABELS'), on),
  };
}

module.exports = { parse, NAMES };
