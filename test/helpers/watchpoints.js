'use strict';
// Whether a hardware watchpoint fires on this machine: the torn-write tests
// (test/external.test.js) watch the label slot with one.  On some virtual
// machines gdb sets a hardware watchpoint without complaint, and then the
// watched stores run without a stop.  So before those tests, gdb runs
// test/fixtures/watch_probe.c with a watchpoint on a variable it stores
// to; the answer is kept for the rest of the run.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const needs = require('./needs');
const { FIXTURES } = require('./fixtures');
const { cc } = require('./emulation');

let answer = null;

// null if a hardware watchpoint fires, else why not.
function probe() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-watch-probe-'));
  try {
    const exe = path.join(dir, 'watch_probe');
    const built = spawnSync(cc, ['-g', '-O0', '-o', exe, path.join(FIXTURES, 'watch_probe.c')], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`${cc} could not build watch_probe.c: ${built.stderr}`);
    const r = spawnSync('gdb', ['-nx', '-batch', '-iex', 'set debuginfod enabled off', '-iex', 'set auto-load off',
      '-ex', 'break main', '-ex', 'run', '-ex', 'watch watched', '-ex', 'continue', exe],
    { cwd: dir, encoding: 'utf8', timeout: 60000, env: { ...process.env, DEBUGINFOD_URLS: '' } });
    const out = `${r.stdout}${r.stderr}`;
    if (/^Hardware watchpoint \d+: watched\s+Old value = 0\s+New value = 1$/m.test(out)) return null;
    if (/^Hardware watchpoint \d+: watched$/m.test(out) && /exited normally/.test(out)) {
      return 'gdb sets a hardware watchpoint on this machine but it never fires: a watched store ran without a stop ' +
        '(some virtual machines do not give their guests working debug registers)';
    }
    if (/^Watchpoint \d+: watched$/m.test(out)) return 'gdb has no hardware watchpoint on this machine, only a software one';
    throw new Error(`gdb could not probe a hardware watchpoint (exit ${r.status ?? r.signal}):\n${out}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Skips the test, or from a `before` its describe, unless gdb is there and
// its hardware watchpoints fire.
function requireHardwareWatchpoints(ctx) {
  needs.tool(ctx, 'gdb');
  if (answer === null) answer = { why: probe() };
  if (answer.why !== null) needs.feature(ctx, 'hardware watchpoints', answer.why);
}

module.exports = { requireHardwareWatchpoints };
