'use strict';
// What both demos do around their own load: check that the reader can run
// here, start the service as a child process and learn its port, and sample
// it from outside with customlabels-dump as a profiler would.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { unsupportedReason } = require('../lib/platform');

const root = path.join(__dirname, '..');
// Built from source (a git checkout), else the prebuilt reader.
const READERS = [
  path.join(root, 'build', 'Release', 'customlabels-dump'),
  path.join(root, 'prebuilds', `linux-${process.arch}`, 'customlabels-dump'),
];

// The demo called `name`: exits with a message when the reader cannot run.
function setup(name) {
  const fail = (message) => {
    process.stderr.write(`${name}: ${message}\n`);
    process.exit(1);
  };
  const reason = unsupportedReason();
  if (reason !== null) fail(`customlabels-dump cannot run here: ${reason}`);
  const dump = READERS.find((file) => fs.existsSync(file));
  if (dump === undefined) fail(`customlabels-dump is not built (${READERS[0]}): run npm install first`);

  // Starts `node args...`; resolves to its port once its stdout matches
  // `listening` (first group: the port).  The child ends with this process.
  function start(args, options, listening) {
    // stdin is a pipe that closes when this process ends: a service may
    // watch it to end with the demo.
    const server = spawn(process.execPath, args, { ...options, stdio: ['pipe', 'pipe', 'inherit'] });
    const stop = () => { if (server.exitCode === null) server.kill('SIGTERM'); };
    process.on('exit', stop);
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => { stop(); process.exit(130); });
    const port = new Promise((resolve, reject) => {
      let out = '';
      server.stdout.on('data', (d) => {
        out += d;
        const m = listening.exec(out);
        if (m) resolve(Number(m[1]));
      });
      server.on('exit', (code) => reject(new Error(`the service exited (${code}) before it listened`)));
    });
    return { server, port, stop };
  }

  // customlabels-dump --json --sample hz --duration seconds pid: one object
  // per (thread, label set) sampled.
  function sample(pid, hz, seconds) {
    return new Promise((resolve, reject) => {
      const child = spawn(dump, ['--json', '--sample', String(hz), '--duration', String(seconds), String(pid)]);
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => { out += d; });
      child.stderr.on('data', (d) => { err += d; });
      child.on('exit', (code) => {
        if (code !== 0) reject(new Error(`customlabels-dump exited with ${code}: ${err.trim()}`));
        else resolve(out.split('\n').filter(Boolean).map((l) => JSON.parse(l)));
      });
    });
  }

  return { fail, start, sample };
}

const pct = (x) => `${(100 * x).toFixed(1)}%`;

module.exports = { setup, pct, root };
