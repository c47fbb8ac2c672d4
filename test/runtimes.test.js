'use strict';
// The package under other JavaScript runtimes that load Node-API addons,
// from the npm registry into git-ignored caches (as .ci/run installs Node.js
// versions): Bun (@oven/bun-linux-<arch>, in .cache/bun) and Deno (deno, in
// .cache/deno).  Each runs test/fixtures/runtime-child.cjs, which reports
// what the package says and what getLabels() gives across an await, a
// timer and a nested withLabels, then stays inside its labelled flow while
// customlabels-dump reads the process from outside.
// - Bun lacks the hooks publishing follows the context with (its
//   async_hooks.createHook calls no hook, v8.promiseHooks throws): the API
//   keeps its meaning and never throws, `supported` is false and
//   `unsupportedReason` and one warning say why, and a reader finds nothing
//   to read (the addon is not loaded).
// - Deno has them: it publishes as Node.js does, and the reader reads the
//   labels of the flow.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const needs = require('./helpers/needs');
const { why, skipUnderEmulation } = require('./helpers/emulation');

const ROOT = path.join(__dirname, '..');
const CHILD = path.join(__dirname, 'fixtures', 'runtime-child.cjs');
const DUMP = path.join(ROOT, 'build', 'Release', 'customlabels-dump');

// Where each runtime is, and how .ci/run installs it.
const RUNTIMES = {
  bun: {
    package: `@oven/bun-linux-${process.arch === 'arm64' ? 'aarch64' : 'x64'}`,
    version: '1.4.5',
    bin: (dir) => path.join(dir, 'node_modules', `@oven/bun-linux-${process.arch === 'arm64' ? 'aarch64' : 'x64'}`, 'bin', 'bun'),
    args: [],
  },
  deno: {
    package: 'deno',
    version: '2.9.6',
    // The platform package's binary itself (the deno package's own bin is
    // a launcher, or a link made by its install script).
    bin: (dir) => path.join(dir, 'node_modules', '@deno', `linux-${process.arch}-glibc`, 'deno'),
    args: ['run', '--allow-all'],
  },
};

// The runtime's executable, or a skip that names the command that installs
// it (a failure under CUSTOMLABELS_TEST_STRICT=1: CI installs it).  The
// cache is the checkout's .cache/, or CUSTOMLABELS_TEST_CACHE where the
// suite runs from a copy without it (.ci/sanitize, .ci/arm64).
const CACHE = process.env.CUSTOMLABELS_TEST_CACHE || path.join(ROOT, '.cache');

function runtime(ctx, name) {
  const r = RUNTIMES[name];
  const dir = path.join(CACHE, name);
  const bin = r.bin(dir);
  if (fs.existsSync(bin)) return bin;
  const install = `mkdir -p .cache/${name} && cd .cache/${name} && echo '{"private":true}' > package.json && npm install ${r.package}@${r.version}`;
  const what = `${name} is not installed in ${dir} (from the npm registry: ${install})`;
  if (needs.STRICT) throw new Error(`${what}; CUSTOMLABELS_TEST_STRICT=1 makes it a failure`);
  needs.feature(ctx, name, what);
  return null;
}

// Runs the fixture under `bin`; once it is parked inside its flow, reads it
// with customlabels-dump.  { report, dump: { status, threads }, stderr }.
async function runChild(bin, args) {
  const child = spawn(bin, [...args, CHILD], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const line = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no report in 30 s\nstdout: ${stdout}\nstderr: ${stderr}`)), 30000);
      child.stdout.on('data', (d) => {
        stdout += d;
        const m = /^ready (.*)$/m.exec(stdout);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the child ended (${code ?? signal}) before reporting\nstdout: ${stdout}\nstderr: ${stderr}`));
      });
    });
    const d = spawnSync(DUMP, ['--json', String(child.pid)], { encoding: 'utf8', timeout: 20000 });
    const threads = d.status === 0 ? d.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)) : null;
    return { report: JSON.parse(line), dump: { status: d.status, threads, stderr: d.stderr }, pid: child.pid, stderr: () => stderr };
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

const FOLLOWED = {
  afterAwait: { route: '/runtime' },
  afterTimer: { route: '/runtime' },
  nested: { route: '/runtime', user: '7' },
  afterNested: { route: '/runtime' },
};

describe('other runtimes: Bun and Deno from the npm registry', function () {
  this.timeout(60000);

  before(function () {
    needs.platform(this);
    skipUnderEmulation(this, why.dump);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
    if (!fs.existsSync(DUMP)) needs.feature(this, 'customlabels-dump', `${DUMP} is not built (npx node-gyp rebuild)`);
  });

  it('Bun, which lacks the hooks: the API keeps its meaning and never throws; supported is false, unsupportedReason and one warning say why; nothing is published', async function () {
    const bin = runtime(this, 'bun');
    const r = await runChild(bin, RUNTIMES.bun.args);
    assert.equal(r.report.threw, null, 'withLabels threw');
    assert.deepEqual(r.report.seen, FOLLOWED, 'labels follow the work');
    assert.equal(r.report.supported, false);
    assert.equal(r.report.publishMode, null);
    assert.match(r.report.reason, /^Bun \d+\.\d+\.\d+ lacks the hooks that follow the async context: async_hooks\.createHook does not call its before and after hooks/);
    const warnings = r.stderr().match(/\[CUSTOMLABELS_[A-Z_]+\]/g) ?? [];
    assert.deepEqual(warnings, ['[CUSTOMLABELS_NO_HOOKS]'], r.stderr());
    assert.match(r.stderr(), /customlabels publishes no labels: Bun .* lacks the hooks .* profilers see none/);
    // A reader finds no Custom Label ABI in the process: exit code 5.
    assert.equal(r.dump.status, 5, r.dump.stderr);
  });

  it('Deno, which has them: publishes as on Node.js; a reader reads the flow\'s labels after an await and a timer', async function () {
    const bin = runtime(this, 'deno');
    const r = await runChild(bin, RUNTIMES.deno.args);
    assert.equal(r.report.threw, null);
    assert.deepEqual(r.report.seen, FOLLOWED);
    assert.equal(r.report.supported, true, r.report.reason);
    assert.equal(r.report.publishMode, 'hooks');
    if (r.dump.status === 4) needs.feature(this, 'ptrace', `customlabels-dump may not read process ${r.pid}: ${r.dump.stderr.trim()}`);
    assert.equal(r.dump.status, 0, r.dump.stderr);
    const main = r.dump.threads.find((t) => t.tid === r.pid);
    assert.ok(main, JSON.stringify(r.dump.threads));
    assert.deepEqual(main.labels, { route: '/runtime' });
    assert.equal(r.stderr().match(/\[CUSTOMLABELS_[A-Z_]+\]/g), null, r.stderr());
  });
});
