'use strict';
// The processes the customlabels-dump tests start: every one is recorded
// so that an afterEach can kill it on every path, passed or failed.

const { spawn } = require('node:child_process');
const path = require('node:path');

const live = new Set();

function track(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

function killAll() {
  for (const child of live) {
    try { child.stdin?.end(); } catch { /* already closed */ }
    try { child.kill('SIGKILL'); } catch { /* already gone */ }
  }
  live.clear();
}

// Starts a fixture and waits for its "ready" line.  C fixtures print
// "thread ROLE TID" lines first, returned as roles; Node fixtures print
// "ready PID", and the live target (test/fixtures/target.js) a JSON line
// {"ready":true, ...} once it has the step that `input` writes to it.
// `out` is everything the fixture printed up to then.
function startFixture(command, args, { timeout = 15000, uid, gid, cwd, input, env } = {}) {
  return new Promise((resolve, reject) => {
    const child = track(spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], uid, gid, cwd, env: env && { ...process.env, ...env } }));
    if (input !== undefined) child.stdin.write(input);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${path.basename(command)} not ready after ${timeout} ms: ${out}${err}`)), timeout);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      if (!/^(ready|\{"ready":true)/m.test(out)) return;
      clearTimeout(timer);
      const roles = {};
      for (const m of out.matchAll(/^thread (\S+) (\d+)$/gm)) roles[m[1]] = Number(m[2]);
      resolve({ child, pid: child.pid, roles, out });
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${path.basename(command)} exited (${code ?? signal}) before it was ready: ${out}${err}`));
    });
  });
}

// The first line a started process writes to its stdout (without the
// newline); rejects if it exits first.
function firstLine(child) {
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve(buf.slice(0, nl));
    });
    child.once('exit', (code, signal) => reject(new Error(`the process exited (${code ?? signal}) before it wrote a line`)));
  });
}

module.exports = { track, killAll, startFixture, firstLine };
