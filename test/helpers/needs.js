'use strict';
// What a test needs from the machine, asked in one place, so that a machine
// with only what `npm install` needs (Node, gcc, make, Python) runs the
// suite to a pass, and says what it left out:
//
//   needs.tool(this, 'gdb', ...)         a program that a Debian package brings
//   needs.feature(this, group, reason)  something no package brings (hardware
//                                        watchpoints, ptrace under emulation,
//                                        a Node.js version)
//   needs.platform(this, arches)         Linux on one of these architectures
//   needs.frameMode(this)                the package publishing in frame mode
//
// Called from an `it`, the test skips; from a `before`, its whole describe.
// The reason is printed at once, and test/helpers/skip-summary.js prints one
// line at the end with every group skipped and the apt-get line for the
// tools.  With CUSTOMLABELS_TEST_STRICT=1 (.ci/run sets it) a missing tool
// fails the test instead: CI must run everything a package can bring.  A
// missing machine feature skips either way.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const STRICT = process.env.CUSTOMLABELS_TEST_STRICT === '1';

// Each tool: the group it is reported under and the Debian packages that
// bring it.  A cross compiler also needs its libc headers, which
// gcc-<triple> only recommends.
const CROSS_PROBE = ['-E', '-x', 'c', '-o', '/dev/null', '-'];
const TOOLS = {
  gdb: { group: 'gdb', packages: ['gdb'] },
  readelf: { group: 'binutils', packages: ['binutils'] },
  gcc: { group: 'C compiler', packages: ['build-essential'] },
  'g++': { group: 'C++ compiler', packages: ['g++'] },
  setcap: { group: 'setcap', packages: ['libcap2-bin'] },
  getcap: { group: 'setcap', packages: ['libcap2-bin'] },
  'aarch64-linux-gnu-gcc': {
    group: 'cross compiler for arm64',
    packages: ['gcc-aarch64-linux-gnu', 'libc6-dev-arm64-cross'],
    probe: CROSS_PROBE,
  },
  'x86_64-linux-gnu-gcc': {
    group: 'cross compiler for x64',
    packages: ['gcc-x86-64-linux-gnu', 'libc6-dev-amd64-cross'],
    probe: CROSS_PROBE,
  },
  // C++ cross compilers: frame mode's companion (src/frame/).
  'aarch64-linux-gnu-g++': { group: 'C++ cross compiler for arm64', packages: ['g++-aarch64-linux-gnu'] },
  'x86_64-linux-gnu-g++': { group: 'C++ cross compiler for x64', packages: ['g++-x86-64-linux-gnu'] },
  'qemu-aarch64': { group: 'qemu-user', packages: ['qemu-user'] },
  'clang-14': { group: 'clang', packages: ['clang-14', 'libclang-rt-14-dev'] },
  perf: { group: 'perf', packages: ['linux-perf'] },
  bpftrace: { group: 'bpftrace', packages: ['bpftrace'] },
  mkfifo: { group: 'coreutils', packages: ['coreutils'] },
  script: { group: 'script', packages: ['bsdutils'] },
};

// group -> { packages, reason, tests }, in the order first met.
const skipped = new Map();
const found = new Map();

// Whether `name` is an executable file in a directory of PATH.  (Not
// `name --version`: some tools have no such option, and looking costs no
// process.)
function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return true;
    } catch {
      // not here
    }
  }
  return false;
}

function have(name) {
  if (!found.has(name)) {
    const probe = TOOLS[name]?.probe;
    // A cross compiler is there when it preprocesses a libc header.
    found.set(name, onPath(name) && (!probe ||
      spawnSync(name, probe, { input: '#include <stdlib.h>\n', stdio: ['pipe', 'ignore', 'ignore'], timeout: 30000 }).status === 0));
  }
  return found.get(name);
}

// The tests that a skip from `ctx` leaves out: one from an `it` or a
// beforeEach, every test below the suite from a `before`.
function testsOf(ctx) {
  const runnable = ctx.test;
  const title = runnable?.originalTitle ?? runnable?.title ?? '';
  if (runnable?.type === 'hook' && title.startsWith('"before all"')) return runnable.parent.total();
  return 1;
}

function record(ctx, group, what) {
  const entry = skipped.get(group) ?? { tests: 0, ...what };
  entry.tests += testsOf(ctx);
  skipped.set(group, entry);
}

function aptLine(packages) {
  return `apt-get install ${[...new Set(packages)].join(' ')}`;
}

// Skips (or, strict, fails) unless every tool is on PATH.
function tool(ctx, ...names) {
  const missing = names.filter((name) => !have(name));
  if (missing.length === 0) return;
  const known = missing.map((name) => TOOLS[name] ?? { group: name, packages: [name] });
  const packages = known.flatMap((t) => t.packages);
  const what = `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not installed (Debian: ${aptLine(packages)})`;
  if (STRICT) throw new Error(`${what}; CUSTOMLABELS_TEST_STRICT=1 makes a missing tool a failure`);
  // (setcap and getcap are one group: the test counts once.)
  for (const t of new Map(known.map((k) => [k.group, k])).values()) record(ctx, t.group, { packages: t.packages });
  console.log(`      (skipped: ${what})`);
  ctx.skip();
}

// Skips for something this machine cannot do, which no package brings.
function feature(ctx, group, reason) {
  record(ctx, group, { reason });
  console.log(`      (skipped: ${reason})`);
  ctx.skip();
}

const ARCH_NAMES = { x64: 'x86-64', arm64: 'aarch64' };

// Skips unless this is Linux on one of `arches` (by default the two the
// addon is built for): what the ABI's readers read.
function platform(ctx, arches = ['x64', 'arm64']) {
  if (process.platform === 'linux' && arches.includes(process.arch)) return;
  const names = arches.map((a) => ARCH_NAMES[a] ?? a).join(' and ');
  feature(ctx, 'platform', `runs on Linux ${names} only (this is ${process.platform} ${process.arch})`);
}

// Skips unless the package publishes in frame mode in a process that this
// Node.js starts with CUSTOMLABELS_PUBLISH=frame and this process's flags
// (so that Node 22 runs it where the suite runs with
// --experimental-async-context-frame): Linux x86-64 or aarch64, Node 22+,
// AsyncContextFrame on, and the companion built for this Node.js
// (test/fixtures/frame_mode.js says why not).
const FRAME_MODE = path.join(__dirname, '..', 'fixtures', 'frame_mode.js');
function frameMode(ctx) {
  platform(ctx);
  if (Number(process.versions.node.split('.')[0]) < 22) {
    feature(ctx, 'Node 22+', 'frame mode needs AsyncContextFrame (Node 22 with --experimental-async-context-frame, or 24+)');
  }
  const probe = spawnSync(process.execPath, [...process.execArgv, '-e',
    `process.stdout.write(JSON.stringify(require(${JSON.stringify(FRAME_MODE)}).frameMode().why))`],
  { encoding: 'utf8', env: { ...process.env, CUSTOMLABELS_PUBLISH: 'frame' }, timeout: 60000 });
  if (probe.status !== 0) throw new Error(`the frame-mode probe failed: ${probe.error ?? probe.stderr}`);
  const why = JSON.parse(probe.stdout);
  if (why) feature(ctx, why.feature, why.reason);
}

// The line test/helpers/skip-summary.js prints, or null if nothing was skipped.
function summary() {
  if (skipped.size === 0) return null;
  const groups = [...skipped].map(([group, s]) =>
    `${group} (${s.tests} test${s.tests === 1 ? '' : 's'}${s.reason ? `: ${s.reason}` : ''})`);
  const packages = [...skipped.values()].flatMap((s) => s.packages ?? []);
  const install = packages.length ? `; to run the tools' tests: ${aptLine(packages)}` : '';
  return `skipped: ${groups.join(', ')}${install}`;
}

module.exports = { STRICT, TOOLS, have, tool, feature, platform, frameMode, summary };
