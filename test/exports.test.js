'use strict';
// The package's entry points as an application reaches them: "exports"
// for require() and import of `customlabels` and `customlabels/otel`, the
// TypeScript declarations (checked with tsc), @opentelemetry/api as an
// optional peer (the main entry never loads it; customlabels/otel says what
// to install), and the packed tarball.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const { pack, npm } = require('./helpers/pack');
const needs = require('./helpers/needs');

const ROOT = path.join(__dirname, '..');
const CONSUMER = path.join(__dirname, 'fixtures', 'consumer');
const TLS_HELPER = path.join(__dirname, 'helpers', 'tls.js');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

// An application directory: the consumer fixtures, with node_modules/
// linking `customlabels` to `pkg` and, unless told otherwise, the
// OpenTelemetry packages of this repository.
function makeApp(tmp, name, { pkg = ROOT, otel = true } = {}) {
  const app = path.join(tmp, name);
  fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true });
  for (const f of fs.readdirSync(CONSUMER)) fs.copyFileSync(path.join(CONSUMER, f), path.join(app, f));
  fs.symlinkSync(pkg, path.join(app, 'node_modules', 'customlabels'), 'dir');
  if (otel) fs.symlinkSync(path.join(ROOT, 'node_modules', '@opentelemetry'), path.join(app, 'node_modules', '@opentelemetry'), 'dir');
  return app;
}

function run(args, cwd, env = {}) {
  const r = spawnSync(process.execPath, args, { cwd, encoding: 'utf8', timeout: 120000, env: { ...process.env, TLS_HELPER, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, signal: r.signal };
}

function lastJson(stdout) {
  return JSON.parse(stdout.trim().split('\n').pop());
}

describe('entry points: require, import, TypeScript', function () {
  this.timeout(180000);
  let tmp;

  before(function () {
    needs.platform(this);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-exports-'));
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('an ES module imports both entries, named and default, and shares one instance with require()', () => {
    const app = makeApp(tmp, 'esm');
    const r = run(['esm.mjs'], app);
    assert.equal(r.status, 0, r.stderr);
    const out = lastJson(r.stdout);
    assert.equal(out.sameMain, true, 'import and require give the same API');
    assert.equal(out.sameOtel, true);
    assert.ok(out.otelNames.includes('spanLabels') && out.otelNames.includes('default'), out.otelNames.join());
    assert.deepEqual(out.inside.published, { route: '/esm', ...out.inside.ids }, 'published through the imported entries');
    assert.equal(out.after, null);
    assert.equal(out.packageName, 'customlabels', 'package.json stays reachable');
    assert.equal(out.deepImport, 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'lib/ is private');
  });

  it('TypeScript: the declarations type-check an application (node10, nodenext CommonJS and ESM)', () => {
    const app = makeApp(tmp, 'ts');
    for (const config of ['tsconfig.node10.json', 'tsconfig.nodenext.json']) {
      const r = run([TSC, '-p', config], app);
      assert.equal(r.status, 0, `${config}:\n${r.stdout}${r.stderr}`);
    }
  });

  it('TypeScript: wrong arguments to spanLabels are type errors', () => {
    const app = makeApp(tmp, 'ts-bad');
    const r = run([TSC, '-p', 'tsconfig.bad.json'], app);
    assert.notEqual(r.status, 0);
    const errors = r.stdout.split('\n').filter((l) => /error TS\d+/.test(l));
    assert.deepEqual(errors.map((l) => /^bad\.ts\((\d+),/.exec(l)?.[1]), ['8', '9', '10', '11'], r.stdout);
    assert.match(errors[0], /not assignable to type 'string \| boolean \| undefined'/);
    assert.match(errors[1], /'traceID' does not exist in type 'SpanLabelsOptions'/);
  });

  it('require("customlabels") loads no @opentelemetry module', () => {
    const r = run(['-e', `
      const { withLabels } = require('customlabels');
      withLabels({ a: '1' }, () => {});
      console.log(JSON.stringify(Object.keys(require.cache).filter((f) => f.includes('@opentelemetry'))));
    `], ROOT);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(lastJson(r.stdout), []);
  });

  it('customlabels/otel of a copy loaded second labels through the copy that owns the thread', () => {
    // Another copy of the package (npm installs two when two dependencies
    // want different versions), loaded first: it owns the thread's labels.
    const first = path.join(tmp, 'first-copy');
    fs.mkdirSync(first);
    fs.cpSync(path.join(ROOT, 'lib'), path.join(first, 'lib'), { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(first, 'package.json'));
    fs.symlinkSync(path.join(ROOT, 'build'), path.join(first, 'build'), 'dir');
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(first, 'node_modules'), 'dir');
    const r = run(['-e', `
      const owner = require(${JSON.stringify(first)});
      const tls = require(process.env.TLS_HELPER);
      const { context, trace, ROOT_CONTEXT, TraceFlags } = require('@opentelemetry/api');
      const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
      const { spanLabels } = require(${JSON.stringify(path.join(ROOT, 'lib', 'otel.js'))});
      const m = spanLabels(new AsyncLocalStorageContextManager());
      const sc = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED };
      const out = owner.withLabels({ route: '/r' }, () => m.with(trace.setSpanContext(ROOT_CONTEXT, sc), () => ({ js: owner.getLabels(), published: tls.published() })));
      console.log(JSON.stringify({ delegates: require(${JSON.stringify(path.join(ROOT, 'lib', 'index.js'))}) === owner, ...out }));
    `], ROOT);
    assert.equal(r.status, 0, r.stderr);
    const out = lastJson(r.stdout);
    const want = { route: '/r', trace_id: '0af7651916cd43dd8448eb211c80319c', span_id: 'b7ad6b7169203331' };
    assert.equal(out.delegates, true, 'this repository\'s copy hands out the first copy\'s API');
    assert.deepEqual(out.js, want, 'the span labels merge with the first copy\'s labels');
    assert.deepEqual(out.published, want);
  });

  it('without @opentelemetry/api: the main entry works and publishes; customlabels/otel says what to install', () => {
    // A copy of the package where @opentelemetry/api cannot be found.
    const pkg = path.join(tmp, 'no-otel-pkg');
    fs.mkdirSync(path.join(pkg, 'node_modules'), { recursive: true });
    fs.cpSync(path.join(ROOT, 'lib'), path.join(pkg, 'lib'), { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(pkg, 'package.json'));
    fs.symlinkSync(path.join(ROOT, 'build'), path.join(pkg, 'build'), 'dir');
    fs.symlinkSync(path.join(ROOT, 'node_modules', 'node-gyp-build'), path.join(pkg, 'node_modules', 'node-gyp-build'), 'dir');
    const app = makeApp(tmp, 'no-otel', { pkg, otel: false });
    const script = `
      const tls = require(process.env.TLS_HELPER);
      const { withLabels, supported } = require('customlabels');
      const inside = withLabels({ route: '/no-otel' }, () => tls.published());
      let resolved = null;
      try { resolved = require.resolve('@opentelemetry/api', { paths: [require.resolve('customlabels')] }); } catch {}
      const failure = (err) => ({ code: err.code, message: err.message });
      let required = null;
      try { require('customlabels/otel'); } catch (err) { required = failure(err); }
      import('customlabels/otel').then(() => null, failure).then((imported) => {
        console.log(JSON.stringify({ supported, inside, resolved, required, imported }));
      });
    `;
    const r = run(['-e', script], app);
    assert.equal(r.status, 0, r.stderr);
    const out = lastJson(r.stdout);
    assert.equal(out.resolved, null, '@opentelemetry/api must not be reachable from the copy');
    assert.equal(out.supported, true);
    assert.deepEqual(out.inside, { route: '/no-otel' });
    for (const failure of [out.required, out.imported]) {
      assert.equal(failure.code, 'MODULE_NOT_FOUND');
      assert.match(failure.message, /customlabels\/otel needs the @opentelemetry\/api package.*npm install @opentelemetry\/api/);
    }
  });
});

describe('the packed tarball: customlabels/otel', function () {
  this.timeout(600000);
  let tmp;
  let tarball;

  before(function () {
    needs.platform(this);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-otel-pack-'));
    tarball = pack();
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('ships the otel entry, ES module entries and declarations; installs without the optional peer; works once it is installed', () => {
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n');
    for (const f of ['index.mjs', 'index.d.mts', 'otel.js', 'otel.d.ts', 'otel.d.mts']) {
      assert.ok(files.includes(`package/lib/${f}`), `lib/${f} in the tarball`);
    }
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
    assert.deepEqual(manifest.peerDependenciesMeta, { '@opentelemetry/api': { optional: true } });
    assert.ok(manifest.peerDependencies['@opentelemetry/api']);

    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{"private": true}\n');
    npm(['install', tarball], { cwd: app });
    assert.equal(fs.existsSync(path.join(app, 'node_modules', '@opentelemetry')), false, 'an optional peer is not installed');
    // Read through the installed copy's own addon (the prebuilt one).
    const reader = `
      const native = require(require.resolve('customlabels').replace(/index\\.js$/, 'internals.js')).addon;
      const tls = require(${JSON.stringify(path.join(__dirname, 'helpers', 'tls'))}).reader(native.file);
    `;
    const probe = `${reader}
      const out = { file: native.file, main: require('customlabels').withLabels({ r: '1' }, () => tls.published()) };
      try { require('customlabels/otel'); out.otel = 'loaded'; } catch (err) { out.otel = err.message; }
      console.log(JSON.stringify(out));
    `;
    let r = run(['-e', probe], app);
    assert.equal(r.status, 0, r.stderr);
    let out = lastJson(r.stdout);
    assert.equal(out.file, path.join(fs.realpathSync(app), 'node_modules', 'customlabels', 'prebuilds', `linux-${process.arch}`, 'customlabels.node'));
    assert.deepEqual(out.main, { r: '1' });
    assert.match(out.otel, /needs the @opentelemetry\/api package/);

    // The peer installed next to it (from this repository's copy).
    npm(['install', '--no-save', path.join(ROOT, 'node_modules', '@opentelemetry', 'api')], { cwd: app });
    const traced = `${reader}
      const { context, trace, ROOT_CONTEXT, TraceFlags } = require('@opentelemetry/api');
      const { spanLabels } = require('customlabels/otel');
      const m = spanLabels({ active: () => ROOT_CONTEXT, with: (c, fn, t, ...a) => fn.apply(t, a), bind: (c, t) => t, enable() { return this; }, disable() { return this; } });
      const sc = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED };
      console.log(JSON.stringify(m.with(trace.setSpanContext(ROOT_CONTEXT, sc), () => tls.published())));
    `;
    r = run(['-e', traced], app);
    assert.equal(r.status, 0, r.stderr);
    out = lastJson(r.stdout);
    assert.deepEqual(out, { trace_id: '0af7651916cd43dd8448eb211c80319c', span_id: 'b7ad6b7169203331' });
  });
});
