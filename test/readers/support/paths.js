'use strict';
// The two paths every reader's tests run on (support/harness.js), as mocha
// describes: `forEachPath(title, kind, body)` calls body(get) inside a
// describe per path, where get() is the harness run's steps as that path
// saw them ({ name, expect, ready, results, poll, others }).  A path that
// cannot run here skips with the reason.

const harness = require('./harness');
const needs = require('../../helpers/needs');

const PATHS = {
  outside: 'from outside the process (ptrace for the thread pointer, process_vm_readv)',
  inside: 'from inside the process (/proc/self/mem, thread pointer from the CPU; the path under qemu-user)',
};

// Why a path cannot run: a missing tool (which CUSTOMLABELS_TEST_STRICT=1
// turns into a failure), something the machine cannot do, or a platform
// the readers do not read.
function skip(ctx, why) {
  if (why.tool) needs.tool(ctx, why.tool);
  // (A tool on PATH that would not run skips as a feature of this machine.)
  needs.feature(ctx, why.feature ?? 'platform', why.reason ?? `${why.tool} is on PATH but does not run`);
}

function forEachPath(kind, body) {
  for (const [where, title] of Object.entries(PATHS)) {
    describe(title, function () {
      let steps = null;
      before(async function () {
        const run = await harness.run(kind);
        const why = run.skip ?? (where === 'outside' ? run.why.outside : null);
        if (why) skip(this, why);
        steps = run.steps.map((s) => ({ ...s, ...s[where], where }));
      });
      body(() => steps, where);
    });
  }
}

// The step named `name`.
const step = (steps, name) => steps.find((s) => s.name === name);

// A reading that keeps the first of duplicate keys, and one that keeps the
// last: they agree exactly when no key occurs twice.
const firstWins = (pairs) => {
  const out = {};
  for (const [k, v] of pairs) if (!(k in out)) out[k] = v;
  return out;
};
const lastWins = (pairs) => {
  const out = {};
  for (const [k, v] of pairs) out[k] = v;
  return out;
};

module.exports = { forEachPath, step, firstWins, lastWins, harness };
