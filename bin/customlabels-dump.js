#!/usr/bin/env node
'use strict';
// Launcher for the native customlabels-dump program.  npm links package bins
// before install scripts run, so the bin entry cannot be the ELF file that
// node-gyp builds later; this script runs it with the same arguments, shares
// stdio, forwards the signals a terminal or supervisor sends, and exits the
// way the program did (same code, or same signal).

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { unsupportedReason } = require('../lib/platform');

const root = path.join(__dirname, '..');
// Built from source (a git checkout), else the prebuilt program the npm
// package ships for this architecture.
const candidates = [
  path.join(root, 'build', 'Release', 'customlabels-dump'),
  path.join(root, 'prebuilds', `linux-${process.arch}`, 'customlabels-dump'),
];

const reason = unsupportedReason();
if (reason !== null) {
  process.stderr.write(`customlabels-dump: ${reason}\n`);
  process.exit(1);
}
const program = candidates.find((file) => fs.existsSync(file));
if (program === undefined) {
  process.stderr.write(`customlabels-dump: neither ${candidates.join(' nor ')} exists; run \`npm install\` (or \`npx node-gyp rebuild\`) in ${root}\n`);
  process.exit(1);
}

const child = spawn(program, process.argv.slice(2), {
  stdio: 'inherit',
  argv0: 'customlabels-dump',
  // The program stops (resuming any thread it holds) if this launcher dies.
  env: { ...process.env, CUSTOMLABELS_DUMP_LAUNCHER_PID: String(process.pid) },
});

const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
};
for (const signal of forwarded) process.on(signal, forward);

child.on('error', (err) => {
  process.stderr.write(`customlabels-dump: cannot run ${program}: ${err.message}\n`);
  process.exit(1);
});

child.on('exit', (code, signal) => {
  if (signal !== null) {
    // Die by the same signal, so that the caller sees what it would have
    // seen running the program directly.
    for (const s of forwarded) process.removeListener(s, forward);
    process.kill(process.pid, signal);
    // Signals whose default action does not end a process (none expected).
    setTimeout(() => process.exit(128 + (require('node:os').constants.signals[signal] || 0)), 100);
    return;
  }
  process.exit(code);
});
