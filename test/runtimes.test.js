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
//   labels of the flow, with --allow-all and with only read access to the
//   package and --allow-ffi (no --allow-env).  Without --allow-ffi it
//   cannot load the addon: one warning names the flag.  Frame mode, which
//   needs V8's C++ API, says that it needs Node.js.
// - Node.js's permission model (--permission; --experimental-permission on
//   Node.js 20) with --allow-addons and read access to the package only:
//   /proc/self/maps cannot be read, and the package tells the C library
//   from Node.js's diagnostic report and publishes.  Where that cannot be
//   had either, one warning names --allow-fs-read=/proc/self/maps.

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
async function runChild(bin, args, env = {}) {
  const child = spawn(bin, [...args, CHILD], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
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

// The package's warnings in a child's stderr: [code, message].
function warnings(stderr) {
  return [...stderr.matchAll(/\[(CUSTOMLABELS_[A-Z_]+)\] Warning: (.*)/g)].map((m) => [m[1], m[2]]);
}

// That the reader reads the flow's labels from the child's main thread.
function readsFlow(ctx, r) {
  if (r.dump.status === 4) needs.feature(ctx, 'ptrace', `customlabels-dump may not read process ${r.pid}: ${r.dump.stderr.trim()}`);
  assert.equal(r.dump.status, 0, r.dump.stderr);
  const main = r.dump.threads.find((t) => t.tid === r.pid);
  assert.ok(main, JSON.stringify(r.dump.threads));
  assert.deepEqual(main.labels, { route: '/runtime' });
}

// What a run under a permission model may read: the package (the fixture
// is in it) and, where node_modules is a link out of it (a worktree), its
// target.
function readable() {
  const modules = fs.realpathSync(path.join(ROOT, 'node_modules'));
  return modules.startsWith(ROOT + path.sep) ? [ROOT] : [ROOT, modules];
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

  it('Deno with read access to the package and --allow-ffi only (no --allow-env, no /proc/self/maps): require does not throw, and it publishes', async function () {
    const bin = runtime(this, 'deno');
    const r = await runChild(bin, ['run', `--allow-read=${readable().join(',')}`, '--allow-ffi'], { CUSTOMLABELS_PUBLISH: 'hooks' });
    assert.equal(r.report.threw, null);
    assert.deepEqual(r.report.seen, FOLLOWED);
    assert.equal(r.report.supported, true, r.report.reason);
    assert.equal(r.report.publishMode, 'hooks');
    assert.deepEqual(warnings(r.stderr()), [], r.stderr());
    readsFlow(this, r);
  });

  it('Deno without --allow-ffi: require does not throw; supported is false, and the reason and one warning name --allow-ffi', async function () {
    const bin = runtime(this, 'deno');
    const r = await runChild(bin, ['run', `--allow-read=${readable().join(',')}`]);
    assert.equal(r.report.threw, null);
    assert.deepEqual(r.report.seen, FOLLOWED);
    assert.equal(r.report.supported, false);
    assert.match(r.report.reason, /^the permission model refused loading the native addon: .*--allow-ffi/);
    const w = warnings(r.stderr());
    assert.equal(w.length, 1, r.stderr());
    assert.equal(w[0][0], 'CUSTOMLABELS_NO_ADDON');
    assert.match(w[0][1], /Run Deno with --allow-ffi \(Deno loads Node-API addons only with it\), or --allow-all\.$/);
    assert.doesNotMatch(w[0][1], /rebuild|install|C library/, 'building cannot help');
  });

  it('Deno with CUSTOMLABELS_PUBLISH=frame: one warning says that frame mode needs Node.js, not to rebuild; hooks mode publishes', async function () {
    const bin = runtime(this, 'deno');
    const r = await runChild(bin, RUNTIMES.deno.args, { CUSTOMLABELS_PUBLISH: 'frame' });
    assert.equal(r.report.supported, true, r.report.reason);
    assert.equal(r.report.publishMode, 'hooks');
    const w = warnings(r.stderr());
    assert.equal(w.length, 1, r.stderr());
    assert.equal(w[0][0], 'CUSTOMLABELS_PUBLISH');
    assert.match(w[0][1], /^CUSTOMLABELS_PUBLISH=frame: frame mode cannot run: Deno \d+\.\d+\.\d+ loads only Node-API addons, not the companion customlabels-v8, which uses V8's C\+\+ API: frame mode needs Node\.js; customlabels publishes with hooks$/);
    assert.doesNotMatch(w[0][1], /rebuild/);
  });
});

describe("Node.js's permission model", function () {
  this.timeout(60000);
  // The flag this Node.js has: --permission from 22.13, before that only
  // --experimental-permission (Node.js 20).
  const FLAG = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
  const NO_REPORT = path.join(__dirname, 'fixtures', 'no-report.cjs');

  before(function () {
    needs.platform(this);
    skipUnderEmulation(this, why.dump);
    if (!require('..').supported) needs.feature(this, 'addon', `the addon did not load: ${require('..').unsupportedReason}`);
    if (!fs.existsSync(DUMP)) needs.feature(this, 'customlabels-dump', `${DUMP} is not built (npx node-gyp rebuild)`);
  });

  function granted(extra = []) {
    return [FLAG, '--allow-addons', ...readable().map((dir) => `--allow-fs-read=${dir}`), ...extra];
  }

  for (const [what, extra] of [
    ['without read access to /proc/self/maps', []],
    ['with --allow-fs-read=/proc/self/maps', ['--allow-fs-read=/proc/self/maps']],
  ]) {
    it(`${FLAG} --allow-addons, read access to the package, ${what}: publishes, with no warning`, async function () {
      const r = await runChild(process.execPath, granted(extra));
      assert.equal(r.report.threw, null);
      assert.equal(r.report.supported, true, r.report.reason);
      assert.equal(r.report.reason, null);
      assert.equal(r.report.publishMode, 'hooks');
      assert.deepEqual(r.report.seen, FOLLOWED);
      assert.deepEqual(warnings(r.stderr()), [], r.stderr());
      readsFlow(this, r);
    });
  }

  it(`where neither /proc/self/maps nor the diagnostic report can say which C library: supported is false, and the reason and one warning name --allow-fs-read=/proc/self/maps beside ${FLAG}`, async function () {
    const r = await runChild(process.execPath, granted(['--require', NO_REPORT]));
    assert.equal(r.report.threw, null);
    assert.deepEqual(r.report.seen, FOLLOWED);
    assert.equal(r.report.supported, false);
    assert.match(r.report.reason, /^the permission model refused reading \/proc\/self\/maps \(.*\), so customlabels cannot tell whether this process runs on glibc, which the Custom Label ABI needs$/);
    assert.doesNotMatch(r.report.reason, /other than glibc/);
    const w = warnings(r.stderr());
    assert.equal(w.length, 1, r.stderr());
    assert.equal(w[0][0], 'CUSTOMLABELS_NO_ADDON');
    assert.ok(w[0][1].endsWith(`To publish, start Node.js with --allow-fs-read=/proc/self/maps beside ${FLAG}.`), w[0][1]);
    // And the fix it names works.
    const fixed = await runChild(process.execPath, granted(['--require', NO_REPORT, '--allow-fs-read=/proc/self/maps']));
    assert.equal(fixed.report.supported, true, fixed.report.reason);
    assert.deepEqual(warnings(fixed.stderr()), [], fixed.stderr());
  });
});
