'use strict';
// Builds the prebuilt addons and readers that `npm pack` ships (this is the
// package's prepack script): for linux-x64 and linux-arm64,
//   prebuilds/linux-<arch>/customlabels.node   (Node-API 8: Node 20 to 26)
//   prebuilds/linux-<arch>/customlabels-dump
//   prebuilds/linux-<arch>/v8/customlabels-v8.abi<N>.node  (frame mode's companion,
//                                             src/frame/, one per Node major; in a
//                                             folder of its own, which node-gyp-build
//                                             does not look into for the main addon)
// with prebuildify, in a scratch copy of the sources so that the checkout's
// own build/ is left alone.  The other architecture is cross-compiled
// (x86-64 hosts: gcc-aarch64-linux-gnu; aarch64 hosts: gcc-x86-64-linux-gnu).
// Without its cross compiler it is left out, with one line that says so and
// what would build it, so that `npm pack` and installs from git work on any
// machine that builds the addon.  It is an error instead where every
// architecture must ship: `npm publish`, CI (CUSTOMLABELS_TEST_STRICT=1,
// which .ci/run sets), and an architecture named with --arch.
//
//   node scripts/prebuild.js [--arch x64|arm64 ...]

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const prebuildify = require('prebuildify');

const ROOT = path.join(__dirname, '..');
const TRIPLES = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };
const SOURCES = ['binding.gyp', 'src', 'dump', 'package.json'];
// The Node majors frame mode's companion is prebuilt for.  It uses V8's C++
// API, so each major needs its own build, against that major's headers:
// the node-linux-<arch> package of that major on the npm registry ships
// them in include/node, cached under .cache/node-headers.
const COMPANION_MAJORS = [22, 24, 26];
const NPM_ARCH = { x64: 'x64', arm64: 'arm64' };

function fail(message) {
  process.stderr.write(`prebuild: ${message}\n`);
  process.exit(1);
}

// A cross compiler is there when it preprocesses a libc header (its
// libc6-dev-*-cross package is only recommended).
function canCompile(command) {
  return spawnSync(command, ['-E', '-x', 'c', '-o', '/dev/null', '-'],
    { input: '#include <stdlib.h>\n', stdio: ['pipe', 'ignore', 'ignore'] }).status === 0;
}

// Headers of the Node that runs this script, so that node-gyp downloads
// nothing; a Node-API build against any of them loads on Node 20 to 26.
function nodedir() {
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  return fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined;
}

// npm's own node-gyp: npm names it to the scripts it runs; else the one
// beside this Node's npm.
function nodeGyp() {
  const bundled = path.resolve(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm',
    'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  const found = [process.env.npm_config_node_gyp, bundled].find((f) => f && fs.existsSync(f));
  if (!found) fail('node-gyp not found: run this through npm (npm pack), or install node-gyp');
  return found;
}

// The tools that build for `arch`, or null (and `missing` says what would
// bring them) without its cross compiler.
function toolchain(arch) {
  if (arch === process.arch) return {};
  const t = TRIPLES[arch];
  if (!canCompile(`${t}-gcc`)) return null;
  return { CC: `${t}-gcc`, CXX: `${t}-gcc`, LINK: `${t}-gcc`, AR: `${t}-ar`, STRIP: `${t}-strip` };
}

function missing(arch) {
  const t = TRIPLES[arch];
  const libc = { x64: 'amd64', arm64: 'arm64' }[arch];
  return `linux-${arch} (no ${t}-gcc; Debian: apt-get install gcc-${t.replace(/_/g, '-')} libc6-dev-${libc}-cross)`;
}

function build(arch, scratch, tools) {
  const dir = nodedir();
  // prebuildify hands node-gyp this process's environment.
  const saved = { ...process.env };
  for (const name of ['CC', 'CXX', 'LINK', 'AR']) if (tools[name]) process.env[name] = tools[name];
  if (dir) process.env.npm_config_nodedir = dir;
  // The companion is built per major below, not by node-gyp here.
  process.env.npm_config_customlabels_v8 = '0';
  const restore = () => {
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  };
  return new Promise((resolve, reject) => {
    prebuildify({
      cwd: scratch,
      out: ROOT,
      arch,
      platform: 'linux',
      napi: true,
      targets: dir ? [process.versions.node] : [],
      strip: true,
      stripBin: tools.STRIP || 'strip',
      nodeGyp: nodeGyp(),
      quiet: !process.env.PREBUILD_VERBOSE,
    }, (err) => {
      restore();
      if (err) return reject(err);
      // The reader is the other product of the same build.
      const dump = path.join(scratch, 'build', 'Release', 'customlabels-dump');
      const dest = path.join(ROOT, 'prebuilds', `linux-${arch}`, 'customlabels-dump');
      fs.copyFileSync(dump, dest);
      fs.chmodSync(dest, 0o755);
      const s = spawnSync(tools.STRIP || 'strip', [dest]);
      if (s.status !== 0) return reject(new Error(`strip ${dest} failed`));
      resolve(dest);
    });
  });
}

// include/node of the newest node-linux-<arch>@<major>, fetched once with
// `npm pack` (no install: the package is another architecture's) and
// cached.
function nodeHeaders(major, arch) {
  const dir = path.join(ROOT, '.cache', 'node-headers', `${arch}-${major}`);
  const include = path.join(dir, 'package', 'include', 'node');
  if (fs.existsSync(path.join(include, 'v8-internal.h'))) return include;
  fs.mkdirSync(dir, { recursive: true });
  const npmCli = process.env.npm_execpath && fs.existsSync(process.env.npm_execpath) ? process.env.npm_execpath
    : path.resolve(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
  const packed = spawnSync(process.execPath, [npmCli, 'pack', '--silent', `node-linux-${NPM_ARCH[arch]}@${major}`,
    '--pack-destination', dir], { encoding: 'utf8' });
  if (packed.status !== 0) fail(`npm pack node-linux-${arch}@${major} failed: ${packed.stderr.trim()}`);
  const tarball = path.join(dir, packed.stdout.trim().split('\n').pop());
  const x = spawnSync('tar', ['-xzf', tarball, '-C', dir, 'package/include/node']);
  fs.rmSync(tarball, { force: true });
  if (x.status !== 0) fail(`could not extract include/node from ${tarball}`);
  return include;
}

// The companion's sources: every .cc file in src/frame (binding.gyp lists
// them too; test/companion.test.js checks that it lists them all).
function companionSources() {
  const dir = path.join(ROOT, 'src', 'frame');
  return fs.readdirSync(dir).filter((f) => f.endsWith('.cc')).sort().map((f) => path.join(dir, f));
}

// The companion for `major` on `arch`: src/frame/ against that major's
// headers, the same flags binding.gyp gives it, stripped.
function buildCompanion(major, arch) {
  const include = nodeHeaders(major, arch);
  const version = fs.readFileSync(path.join(include, 'node_version.h'), 'utf8');
  const abi = /#define NODE_MODULE_VERSION (\d+)/.exec(version)[1];
  const cxx = arch === process.arch ? (process.env.CXX || 'g++') : `${TRIPLES[arch]}-g++`;
  const strip = arch === process.arch ? 'strip' : `${TRIPLES[arch]}-strip`;
  const out = path.join(ROOT, 'prebuilds', `linux-${arch}`, 'v8', `customlabels-v8.abi${abi}.node`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const c = spawnSync(cxx, ['-std=c++20', '-O2', '-fPIC', '-shared', '-fvisibility=hidden',
    '-Wall', '-Wextra', '-Wno-unused-parameter', '-Wno-unused-variable', '-Wno-cast-function-type',
    '-DNODE_GYP_MODULE_NAME=customlabels_v8', '-DBUILDING_NODE_EXTENSION', '-D_GLIBCXX_USE_CXX11_ABI=1',
    `-I${include}`, '-o', out, ...companionSources(),
    '-Wl,--push-state,--no-as-needed', '-l:libdl.so.2', '-Wl,--pop-state'], { encoding: 'utf8' });
  if (c.status !== 0) fail(`${cxx} for Node ${major} (${arch}) failed:\n${c.stderr}`);
  if (spawnSync(strip, [out]).status !== 0) fail(`${strip} ${out} failed`);
  return path.basename(out);
}

async function main() {
  const args = process.argv.slice(2);
  const archs = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--arch' && TRIPLES[args[i + 1]]) archs.push(args[++i]);
    else fail(`usage: node scripts/prebuild.js [--arch x64|arm64 ...]`);
  }
  // Where every architecture must ship, and why.
  const all = archs.length > 0 ? '--arch' : process.env.npm_command === 'publish' ? 'npm publish'
    : process.env.CUSTOMLABELS_TEST_STRICT === '1' ? 'CUSTOMLABELS_TEST_STRICT=1' : null;
  if (archs.length === 0) archs.push('x64', 'arm64');
  if (process.platform !== 'linux') fail('prebuilt addons are made on Linux');
  const tools = new Map(archs.map((arch) => [arch, toolchain(arch)]));
  const left = archs.filter((arch) => tools.get(arch) === null);
  if (left.length > 0 && all) fail(`cannot build ${left.map(missing).join(', ')}, which ${all} requires`);
  for (const arch of archs) {
    // Nothing from an earlier build ships for an architecture left out.
    fs.rmSync(path.join(ROOT, 'prebuilds', `linux-${arch}`), { recursive: true, force: true });
    if (left.includes(arch)) continue;
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `customlabels-prebuild-${arch}-`));
    try {
      for (const s of SOURCES) fs.cpSync(path.join(ROOT, s), path.join(scratch, s), { recursive: true });
      await build(arch, scratch, tools.get(arch));
      // The companion is C++: the other architecture needs its g++ too.
      const cxx = arch === process.arch ? (process.env.CXX || 'g++') : `${TRIPLES[arch]}-g++`;
      if (spawnSync(cxx, ['--version'], { stdio: 'ignore' }).status === 0) {
        for (const major of COMPANION_MAJORS) buildCompanion(major, arch);
      } else if (all) {
        fail(`cannot build frame mode's companion for linux-${arch}: no ${cxx} (Debian: apt-get install g++-${TRIPLES[arch].replace(/_/g, '-')}), which ${all} requires`);
      } else {
        process.stderr.write(`prebuild: left out frame mode's companion for linux-${arch} (no ${cxx}; Debian: apt-get install g++-${TRIPLES[arch].replace(/_/g, '-')})\n`);
      }
      process.stdout.write(`prebuild: prebuilds/linux-${arch}: ${fs.readdirSync(path.join(ROOT, 'prebuilds', `linux-${arch}`)).join(', ')}\n`);
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
  if (left.length > 0) process.stderr.write(`prebuild: left out ${left.map(missing).join(', ')}\n`);
}

main().catch((err) => fail(err.message));
