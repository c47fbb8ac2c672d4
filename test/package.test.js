'use strict';
// The packed tarball as users install it: prebuilt addons and readers for
// linux-x64 and linux-arm64 (the other architecture than the packing
// machine's where it has the cross compiler), installed where there is no
// compiler, and an install that never fails where the ABI is not supported.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawn, spawnSync } = require('node:child_process');
const { pack, npm, ROOT } = require('./helpers/pack');
const { start } = require('./helpers/registry');
const { supported, unsupportedReason } = require('..');
const { emulated, why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');
const { OLDEST, compareVersions, newestGlibc } = require('./helpers/glibc');
// What a profiler reads, through the installed copy's own addon.  Required
// here so that its test addon is built with this PATH, before children
// that run on a PATH with no compiler use it.
const TLS = path.join(__dirname, 'helpers', 'tls.js');
require(TLS);

const FAKE = path.join(__dirname, 'helpers/fake-platform.js');

function lines(stdout) {
  return stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

function listTarball(tarball) {
  return execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
}

// A PATH with node, npm, npx and sh only: no compiler, make or Python.
function bareBin(dir) {
  const bin = path.join(dir, 'bare-bin');
  fs.mkdirSync(bin);
  const which = (name) => fs.realpathSync(execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim());
  for (const [name, target] of [['node', process.execPath], ['npm', which('npm')], ['npx', which('npx')], ['sh', '/bin/sh']]) {
    fs.symlinkSync(target, path.join(bin, name));
  }
  for (const tool of ['gcc', 'cc', 'make', 'python3', 'g++']) {
    assert.notEqual(spawnSync('sh', ['-c', `command -v ${tool}`], { env: { PATH: bin } }).status, 0, `${tool} is on the bare PATH`);
  }
  return bin;
}

describe('the packed tarball', function () {
  this.timeout(300000);
  let tmp;
  let tarball;
  let installed;
  let bare;

  before(function () {
    if (!supported) needs.feature(this, 'addon', `the addon is not supported here: ${unsupportedReason}`);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-package-'));
    tarball = pack();
    bare = bareBin(tmp);
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{"private": true}\n');
    // npm itself runs on the bare PATH: the install script finds no compiler.
    npm(['install', tarball], { cwd: app, env: { ...process.env, PATH: bare } });
    installed = path.join(app, 'node_modules', 'customlabels');
  });

  after(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const machine = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' };
  const cross = { x64: 'x86_64-linux-gnu-gcc', arm64: 'aarch64-linux-gnu-gcc' };
  for (const arch of ['x64', 'arm64']) {
    it(`ships a prebuilt addon and reader for linux-${arch}, named so readers find them`, function () {
      const files = listTarball(tarball);
      // npm pack (scripts/prebuild.js) builds the packing machine's own
      // architecture, and the other one where its cross compiler is
      // installed.
      if (!files.includes(`package/prebuilds/linux-${arch}/customlabels.node`)) needs.tool(this, cross[arch]);
      needs.tool(this, 'readelf');
      assert.ok(files.includes(`package/prebuilds/linux-${arch}/customlabels.node`), `linux-${arch} addon in ${files.join(' ')}`);
      assert.ok(files.includes(`package/prebuilds/linux-${arch}/customlabels-dump`), `linux-${arch} reader`);
      // Every .node file is the addon readers claim, or frame mode's
      // companion for one Node major, whose name must not end in
      // customlabels.node (readers would claim it too).
      const companions = files.filter((name) => name.startsWith(`package/prebuilds/linux-${arch}/v8/`));
      if (companions.length === 0 && arch !== process.arch) needs.tool(this, cross[arch].replace(/gcc$/, 'g++'));
      for (const f of files.filter((name) => name.endsWith('.node') && !/\/v8\/customlabels-v8\.abi\d+\.node$/.test(name))) {
        assert.match(f, /customlabels\.node$/);
      }
      assert.deepEqual(companions.sort(), [127, 137, 147].map((abi) => `package/prebuilds/linux-${arch}/v8/customlabels-v8.abi${abi}.node`),
        'the companion for Node 22, 24 and 26');
      for (const f of companions) {
        const header = execFileSync('readelf', ['-h', path.join(installed, f.replace(/^package\//, ''))], { encoding: 'utf8' });
        assert.match(header, new RegExp(`Machine:\\s+${machine[arch]}`), f);
      }
      for (const file of ['customlabels.node', 'customlabels-dump']) {
        const header = execFileSync('readelf', ['-h', path.join(installed, 'prebuilds', `linux-${arch}`, file)], { encoding: 'utf8' });
        assert.match(header, new RegExp(`Machine:\\s+${machine[arch]}`), `${arch}/${file}`);
      }
      // The ABI: both symbols exported, the variable reached through TLSDESC.
      const addon = path.join(installed, 'prebuilds', `linux-${arch}`, 'customlabels.node');
      const syms = execFileSync('readelf', ['-W', '--dyn-syms', addon], { encoding: 'utf8' });
      assert.match(syms, /\bTLS\s+GLOBAL\s+DEFAULT\s+\d+\s+custom_labels_current_set\b/);
      assert.match(syms, /\bTLS\s+GLOBAL\s+DEFAULT\s+\d+\s+otel_thread_ctx_v1\b/);
      assert.match(syms, /\b4\s+OBJECT\s+GLOBAL\s+DEFAULT\s+\d+\s+custom_labels_abi_version\b/);
      const relocs = execFileSync('readelf', ['-W', '-r', addon], { encoding: 'utf8' });
      for (const symbol of ['custom_labels_current_set', 'otel_thread_ctx_v1']) {
        assert.match(relocs, new RegExp(`${arch === 'x64' ? 'R_X86_64_TLSDESC' : 'R_AARCH64_TLSDESC'}\\s+[0-9a-f]+\\s+${symbol}\\b`));
      }
      // Both load on glibc 2.28 (test/glibc.test.js).
      for (const file of ['customlabels.node', 'customlabels-dump']) {
        const newest = newestGlibc(path.join(installed, 'prebuilds', `linux-${arch}`, file));
        assert.ok(newest === null || compareVersions(newest, OLDEST) <= 0, `${arch}/${file} needs GLIBC_${newest}`);
      }
    });
  }

  it('installs with no compiler on PATH, builds nothing, and publishes labels read back natively', () => {
    assert.equal(fs.existsSync(path.join(installed, 'build')), false, 'the install built from source');
    const script = `
      const { withLabels, supported } = require(${JSON.stringify(installed)});
      const native = require(${JSON.stringify(path.join(installed, 'lib', 'internals'))}).addon;
      const tls = require(${JSON.stringify(TLS)}).reader(native.file);
      const read = () => { const p = tls.published(); return p && Object.entries(p); };
      const inside = withLabels({ route: '/checkout', user: '42' }, read);
      console.log(JSON.stringify({ supported, file: native.file, inside, after: read() }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, PATH: bare } }));
    assert.equal(out.supported, true);
    assert.equal(out.file, path.join(installed, 'prebuilds', `linux-${process.arch}`, 'customlabels.node'));
    assert.deepEqual(out.inside, [['route', '/checkout'], ['user', '42']]);
    assert.equal(out.after, null);
  });

  it('builds from source at install when no prebuilt addon fits', function () {
    skipUnderEmulation(this, why.npm);
    // This platform's prebuilt files taken away: node-gyp-build finds
    // nothing that loads, so the install script builds (with the compiler
    // this machine has), and the package loads what it built.
    // Beside the installed copy, so that it finds the same dependencies; run
    // as npm runs install scripts.
    const copy = path.join(path.dirname(installed), 'customlabels-no-prebuild');
    fs.cpSync(installed, copy, { recursive: true });
    fs.rmSync(path.join(copy, 'prebuilds', `linux-${process.arch}`), { recursive: true });
    const r = spawnSync('npm', ['run', 'install', '--loglevel=error'], { cwd: copy, encoding: 'utf8', timeout: 240000 });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(fs.existsSync(path.join(copy, 'build', 'Release', 'customlabels.node')), 'nothing was built');
    const script = `
      const { withLabels } = require(${JSON.stringify(copy)});
      const native = require(${JSON.stringify(path.join(copy, 'lib', 'internals'))}).addon;
      const tls = require(${JSON.stringify(TLS)}).reader(native.file);
      console.log(JSON.stringify({ file: native.file, seen: withLabels({ built: 'here' }, () => Object.keys(tls.published()).length) }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
    assert.equal(out.file, path.join(copy, 'build', 'Release', 'customlabels.node'));
    assert.equal(out.seen, 1);
  });

  it('npx customlabels-dump runs the prebuilt reader', async function () {
    skipUnderEmulation(this, why.dump);
    const child = spawn(process.execPath, ['-e', `
      const { withLabels } = require(${JSON.stringify(installed)});
      withLabels({ route: '/prebuilt' }, () => {
        console.log('ready');
        require('node:fs').readSync(0, Buffer.alloc(8));
      });
    `], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await new Promise((resolve, reject) => {
        child.stdout.once('data', resolve);
        child.once('exit', (code) => reject(new Error(`child exited (${code})`)));
      });
      const r = spawnSync('npx', ['--no-install', 'customlabels-dump', '--json', String(child.pid)],
        { cwd: path.dirname(path.dirname(installed)), encoding: 'utf8', timeout: 60000, env: { ...process.env, PATH: bare } });
      assert.equal(r.status, 0, r.stderr);
      const main = lines(r.stdout).find((t) => t.tid === child.pid);
      assert.deepEqual(main.labels, { route: '/prebuilt' });
    } finally {
      child.stdin.end('go\n');
    }
  });

  describe('bundled with esbuild', () => {
    // An application bundled the way its bundler does by default: the
    // package's JavaScript inlined into the bundle, away from the addon.
    // Marked external, the bundle requires it from node_modules instead.
    let app;

    function bundle(name, options) {
      // Under qemu-user, esbuild's JavaScript finds only the host's binary
      // (npm installed for the host): pointed at it, the host's kernel runs
      // it natively, and the bundle, which is JavaScript, is the same.
      if (emulated && process.env.ESBUILD_BINARY_PATH === undefined) {
        process.env.ESBUILD_BINARY_PATH = path.join(ROOT, 'node_modules', '@esbuild', 'linux-x64', 'bin', 'esbuild');
      }
      require('esbuild').buildSync({
        entryPoints: [path.join(app, 'entry.js')], bundle: true, platform: 'node',
        outfile: path.join(app, 'dist', name), logLevel: 'error', ...options,
      });
      const r = spawnSync(process.execPath, [path.join(app, 'dist', name)], { cwd: app, encoding: 'utf8', timeout: 60000 });
      assert.equal(r.status, 0, r.stderr);
      return { ...JSON.parse(r.stdout), warnings: r.stderr.split('\n').filter((l) => /\[CUSTOMLABELS_NO_ADDON\]/.test(l)) };
    }

    before(() => {
      app = path.dirname(path.dirname(installed));
      fs.writeFileSync(path.join(app, 'entry.js'), `
        const { withLabels, supported, unsupportedReason } = require('customlabels');
        console.log(JSON.stringify({ supported, unsupportedReason, labels: withLabels({ route: '/b' }, () => require('customlabels').getLabels()) }));
      `);
    });

    it('inlined, it says that it was bundled and to mark it external, not to approve and rebuild', () => {
      const out = bundle('inlined.js', {});
      const file = path.join(app, 'dist', 'inlined.js');
      assert.equal(out.supported, false);
      assert.equal(out.unsupportedReason, `it was bundled into ${file}, and a bundle cannot carry its native addon`);
      assert.deepEqual(out.labels, { route: '/b' });
      assert.equal(out.warnings.length, 1, out.warnings.join('\n'));
      assert.ok(out.warnings[0].includes(`customlabels publishes no labels: it was bundled into ${file}`), out.warnings[0]);
      assert.match(out.warnings[0], /Mark customlabels as external in the bundler \(esbuild: --external:customlabels; webpack: externals/);
      assert.doesNotMatch(out.warnings[0], /install-scripts|rebuild/);
    });

    it('marked external, it loads its addon from node_modules and publishes, with no warning', () => {
      const out = bundle('external.js', { external: ['customlabels'] });
      assert.deepEqual(out, { supported: true, unsupportedReason: null, labels: { route: '/b' }, warnings: [] });
    });
  });

  describe('where npm did not run the install script and no prebuilt addon fits', () => {
    // npm 11 lists the install scripts of dependencies that the project's
    // package.json (allowScripts) does not approve, skips those it denies,
    // refuses them with --strict-allow-scripts, and its docs announce that
    // it will skip them by default.  Installed here with --ignore-scripts:
    // a package whose script did not run.  With this platform's prebuilt
    // files taken out of the tarball (as where none fits), nothing is built.
    let app;
    let copy;

    // Loads the package in the main thread and in two workers and prints
    // what each thread got.
    const PROBE = `
      const path = require('node:path');
      const { Worker, isMainThread, parentPort } = require('node:worker_threads');
      function load() {
        const { withLabels, getLabels, supported } = require('customlabels');
        const native = require(path.join(path.dirname(require.resolve('customlabels')), 'internals.js')).addon;
        const tls = native.binding ? require(${JSON.stringify(TLS)}).reader(native.file) : null;
        const read = () => { const p = tls?.published(); return p ? Object.entries(p) : null; };
        return withLabels({ route: '/r' }, () => ({ supported, labels: getLabels(), published: read(), file: native.file }));
      }
      if (isMainThread) {
        const main = load();
        const workers = [];
        for (let i = 0; i < 2; i++) {
          new Worker(__filename).on('message', (m) => {
            workers.push(m);
            if (workers.length === 2) console.log(JSON.stringify({ main, workers }));
          });
        }
      } else {
        parentPort.postMessage(load());
      }
    `;

    function run() {
      const r = spawnSync(process.execPath, [path.join(app, 'probe.js')], { cwd: app, encoding: 'utf8', timeout: 60000 });
      assert.equal(r.status, 0, r.stderr);
      return { ...JSON.parse(r.stdout), warnings: r.stderr.split('\n').filter((l) => /\[CUSTOMLABELS_NO_ADDON\]/.test(l)) };
    }

    before(function () {
      skipUnderEmulation(this, why.npm);
      const unpacked = path.join(tmp, 'no-prebuild');
      fs.mkdirSync(unpacked);
      execFileSync('tar', ['-xzf', tarball, '-C', unpacked]);
      fs.rmSync(path.join(unpacked, 'package', 'prebuilds', `linux-${process.arch}`), { recursive: true });
      copy = path.join(tmp, 'customlabels-no-prebuild.tgz');
      execFileSync('tar', ['-czf', copy, '-C', unpacked, 'package']);
      app = path.join(tmp, 'app-unapproved');
      fs.mkdirSync(app);
      fs.writeFileSync(path.join(app, 'package.json'), '{"private": true}\n');
      fs.writeFileSync(path.join(app, 'probe.js'), PROBE);
      npm(['install', '--ignore-scripts', copy], { cwd: app });
    });

    it('says so once per process, with code CUSTOMLABELS_NO_ADDON, naming the fix; the API keeps working', () => {
      const installed2 = path.join(app, 'node_modules', 'customlabels');
      assert.equal(fs.existsSync(path.join(installed2, 'build')), false, 'something was built');
      // npm itself lists the script as not yet approved.
      assert.match(npm(['install-scripts', 'ls'], { cwd: app }), /customlabels@0\.1\.0 \(install: /);
      const out = run();
      assert.equal(out.warnings.length, 1, `warnings: ${out.warnings.join('\n')}`);
      assert.match(out.warnings[0], /customlabels publishes no labels: the native addon did not load: No native build was found/);
      assert.match(out.warnings[0], /Approve it with `npm install-scripts approve customlabels`, then run it with `npm rebuild customlabels`/);
      assert.match(out.warnings[0], new RegExp(`cd ${installed2.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} && npx node-gyp rebuild`));
      for (const seen of [out.main, ...out.workers]) {
        assert.deepEqual(seen, { supported: false, labels: { route: '/r' }, published: null, file: null });
      }
    });

    it('once approved (npm install-scripts approve), npm rebuild builds it from source, and it publishes', () => {
      // Before the approval, npm's strict mode refuses the script.
      const refused = spawnSync('npm', ['rebuild', 'customlabels', '--strict-allow-scripts', '--loglevel=error'],
        { cwd: app, encoding: 'utf8', timeout: 60000 });
      assert.notEqual(refused.status, 0, 'npm ran the unapproved script');
      assert.match(refused.stderr, /ESTRICTALLOWSCRIPTS/);
      npm(['install-scripts', 'approve', 'customlabels'], { cwd: app });
      const policy = JSON.parse(fs.readFileSync(path.join(app, 'package.json'), 'utf8')).allowScripts;
      assert.deepEqual(Object.values(policy), [true], JSON.stringify(policy));
      npm(['rebuild', 'customlabels', '--strict-allow-scripts'], { cwd: app, timeout: 240000 });
      const built = path.join(app, 'node_modules', 'customlabels', 'build', 'Release', 'customlabels.node');
      assert.ok(fs.existsSync(built), 'nothing was built');
      const out = run();
      assert.deepEqual(out.warnings, []);
      for (const seen of [out.main, ...out.workers]) {
        assert.deepEqual(seen, { supported: true, labels: { route: '/r' }, published: [['route', '/r']], file: built });
      }
    });
  });

  describe('npm 11 allowScripts, installing from a registry', () => {
    // npm matches a name in allowScripts ("customlabels": true) only against
    // a registry dependency, so these install from a registry on 127.0.0.1
    // (test/helpers/registry.js) that serves the tarball, without this
    // platform's prebuilt files so that the script's work shows (it
    // builds), and node-gyp-build, packed from this checkout's node_modules.
    let registry;
    let env;

    function project(name) {
      const dir = path.join(tmp, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'package.json'), '{"private": true}\n');
      return dir;
    }

    function run(args, cwd) {
      return spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'],
        { cwd, env, encoding: 'utf8', timeout: 240000 });
    }

    // What the installed package publishes, and from which file.
    function publishes(cwd) {
      const script = `
        const { withLabels } = require('customlabels');
        const native = require(require.resolve('customlabels').replace(/index\\.js$/, 'internals.js')).addon;
        const tls = native.binding ? require(${JSON.stringify(TLS)}).reader(native.file) : null;
        console.log(JSON.stringify({ file: native.file, seen: withLabels({ r: '1' }, () => (tls ? Object.keys(tls.published() ?? {}).length : null)) }));
      `;
      return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd, encoding: 'utf8' }));
    }

    before(async function () {
      skipUnderEmulation(this, why.npm);
      const unpacked = path.join(tmp, 'registry-no-prebuild');
      fs.mkdirSync(unpacked);
      execFileSync('tar', ['-xzf', tarball, '-C', unpacked]);
      fs.rmSync(path.join(unpacked, 'package', 'prebuilds', `linux-${process.arch}`), { recursive: true });
      const served = path.join(tmp, 'registry-customlabels.tgz');
      execFileSync('tar', ['-czf', served, '-C', unpacked, 'package']);
      const dependency = path.join(tmp, 'registry-deps');
      fs.mkdirSync(dependency);
      npm(['pack', path.join(ROOT, 'node_modules', 'node-gyp-build'), '--ignore-scripts', '--pack-destination', dependency, '--silent'], { cwd: dependency });
      const deps = fs.readdirSync(dependency).map((f) => path.join(dependency, f));
      registry = await start([served, ...deps]);
      env = { ...process.env, npm_config_registry: registry.url, npm_config_cache: path.join(tmp, 'registry-cache') };
    });

    after(() => registry?.close());

    it('--strict-allow-scripts refuses an unapproved install before installing, and approving before installing matches nothing', () => {
      const app = project('app-strict-first');
      const refused = run(['install', '--strict-allow-scripts', 'customlabels'], app);
      assert.notEqual(refused.status, 0, 'the strict install went through');
      assert.match(refused.stderr, /ESTRICTALLOWSCRIPTS/);
      assert.match(refused.stderr, /customlabels@0\.1\.0 \(install: node scripts\/install\.js\)/);
      assert.equal(fs.existsSync(path.join(app, 'node_modules', 'customlabels')), false, 'installed anyway');
      const approve = run(['install-scripts', 'approve', 'customlabels'], app);
      assert.notEqual(approve.status, 0);
      assert.match(approve.stderr, /No installed packages match: customlabels/);
    });

    it('approved in package.json first (npm pkg set), a strict install runs the script', () => {
      const app = project('app-approve-first');
      const set = run(['pkg', 'set', 'allowScripts.customlabels=true', '--json'], app);
      assert.equal(set.status, 0, set.stderr);
      const installed2 = run(['install', '--strict-allow-scripts', 'customlabels'], app);
      assert.equal(installed2.status, 0, installed2.stderr);
      const built = path.join(app, 'node_modules', 'customlabels', 'build', 'Release', 'customlabels.node');
      assert.ok(fs.existsSync(built), 'the install script did not run');
      assert.deepEqual(publishes(app), { file: built, seen: 1 });
      // From then on, a strict install of the project passes too.
      const again = run(['install', '--strict-allow-scripts'], app);
      assert.equal(again.status, 0, again.stderr);
    });

    it('installed with --ignore-scripts, then approved, npm rebuild runs the script', () => {
      const app = project('app-install-first');
      const first = run(['install', '--ignore-scripts', 'customlabels'], app);
      assert.equal(first.status, 0, first.stderr);
      const approve = run(['install-scripts', 'approve', 'customlabels'], app);
      assert.equal(approve.status, 0, approve.stderr);
      const policy = JSON.parse(fs.readFileSync(path.join(app, 'package.json'), 'utf8')).allowScripts;
      assert.deepEqual(Object.entries(policy).filter(([, v]) => v === true).map(([k]) => k.split('@')[0]), ['customlabels']);
      const rebuilt = run(['rebuild', 'customlabels', '--strict-allow-scripts'], app);
      assert.equal(rebuilt.status, 0, rebuilt.stderr);
      const built = path.join(app, 'node_modules', 'customlabels', 'build', 'Release', 'customlabels.node');
      assert.deepEqual(publishes(app), { file: built, seen: 1 });
    });
  });

  it('on a Node.js with no prebuilt companion for frame mode, the install script tries a build from source and, with no compiler, installs the prebuilt addon', function () {
    if (Number(process.versions.node.split('.')[0]) < 22) {
      needs.feature(this, 'Node 22+', 'frame mode\'s companion is built for Node.js 22 and later only');
    }
    skipUnderEmulation(this, why.npm);
    const app = path.join(tmp, 'app-no-companion');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{"private": true}\n');
    const env = { ...process.env, PATH: bare };
    delete env.npm_config_build_from_source;
    npm(['install', '--ignore-scripts', tarball], { cwd: app, env });
    const pkg = path.join(app, 'node_modules', 'customlabels');
    fs.rmSync(path.join(pkg, 'prebuilds', `linux-${process.arch}`, 'v8', `customlabels-v8.abi${process.versions.modules}.node`));
    // npm runs the install script as it would at install, with its output.
    const out = npm(['rebuild', 'customlabels', '--foreground-scripts'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    assert.match(out, /no prebuilt companion for frame mode on Node\.js .*; building from source/);
    assert.match(out, /building from source failed \(above\); installing the prebuilt addon/);
    assert.equal(fs.existsSync(path.join(pkg, 'build', 'Release', 'customlabels.node')), false, 'nothing was built');
    const script = `const cl = require(${JSON.stringify(pkg)}); console.log(JSON.stringify({ supported: cl.supported, mode: cl.publishMode }));`;
    const ran = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...env, CUSTOMLABELS_PUBLISH: 'frame' } });
    assert.equal(ran.status, 0, ran.stderr);
    assert.deepEqual(JSON.parse(ran.stdout), { supported: true, mode: 'hooks' });
    assert.match(ran.stderr, /CUSTOMLABELS_PUBLISH=frame: frame mode cannot run: no companion .*npm rebuild customlabels --build-from-source/);
  });

  describe('where the ABI is not supported', () => {
    const cases = [
      { name: 'macOS', env: { CUSTOMLABELS_FAKE_PLATFORM: 'darwin' }, reason: /Linux on x86-64 or aarch64, not darwin\/x64|not darwin\/arm64/ },
      { name: 'Windows', env: { CUSTOMLABELS_FAKE_PLATFORM: 'win32' }, reason: /not win32\// },
      { name: 'another CPU', env: { CUSTOMLABELS_FAKE_ARCH: 'riscv64' }, reason: /not linux\/riscv64/ },
      { name: 'musl', env: { CUSTOMLABELS_FAKE_LIBC: 'musl' }, reason: /runs on musl/ },
    ];
    for (const c of cases) {
      it(`${c.name}: the install script succeeds at once with no compiler; the API keeps its meaning, unsupported`, () => {
        const copy = path.join(tmp, `unsupported-${c.name.replace(/\W/g, '')}`);
        fs.cpSync(installed, copy, { recursive: true });
        fs.rmSync(path.join(copy, 'prebuilds'), { recursive: true });
        const env = { ...process.env, ...c.env, PATH: bare, NODE_OPTIONS: `--require ${FAKE}` };
        const r = spawnSync(process.execPath, [path.join(copy, 'scripts', 'install.js')], { cwd: copy, encoding: 'utf8', env });
        assert.equal(r.status, 0, r.stderr);
        assert.match(r.stdout, /nothing to build/);
        assert.equal(fs.existsSync(path.join(copy, 'build')), false);
        const script = `
          const { withLabels, getLabels, supported, unsupportedReason } = require(${JSON.stringify(copy)});
          const inner = withLabels({ route: '/x' }, () => withLabels({ user: 7 }, getLabels));
          let error = null;
          try { withLabels('nope', () => {}); } catch (e) { error = e.constructor.name + ': ' + e.message; }
          console.log(JSON.stringify({ supported, unsupportedReason, inner, error }));
        `;
        const ran = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env });
        assert.equal(ran.status, 0, ran.stderr);
        // Nothing to build here, so nothing to warn about.
        assert.doesNotMatch(ran.stderr, /CUSTOMLABELS_NO_ADDON/);
        const out = JSON.parse(ran.stdout);
        assert.equal(out.supported, false);
        assert.match(out.unsupportedReason, c.reason);
        assert.deepEqual(out.inner, { route: '/x', user: '7' });
        assert.match(out.error, /^TypeError: withLabels: labels must be a plain object/);
      });
    }
  });
});
