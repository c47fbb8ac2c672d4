'use strict';
// Builds the prebuilt addons and readers that `npm pack` ships (this is the
// package's prepack script): for linux-x64 and linux-arm64,
//   prebuilds/linux-<arch>/customlabels.node   (Node-API 8: Node 20 to 26)
//   prebuilds/linux-<arch>/customlabels-dump
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
      process.stdout.write(`prebuild: prebuilds/linux-${arch}: ${fs.readdirSync(path.join(ROOT, 'prebuilds', `linux-${arch}`)).join(', ')}\n`);
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }
  if (left.length > 0) process.stderr.write(`prebuild: left out ${left.map(missing).join(', ')}\n`);
}

main().catch((err) => fail(err.message));
