'use strict';
// The stress test's sampler: customlabels-dump --json --sample HZ on the
// server, chunk after chunk, every line it prints handed to the checker
// (test/stress/check.js).

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { checkLine } = require('./check');
const { sleep } = require('./sets');

const DUMP = path.join(__dirname, '..', '..', 'build', 'Release', 'customlabels-dump');

// One customlabels-dump run; resolves with its exit status and output.
function runDump(pid, hz, seconds) {
  return new Promise((resolve) => {
    const child = spawn(DUMP, ['--json', '--sample', String(hz), '--duration', seconds.toFixed(3), String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    let err = '';
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', (e) => resolve({ code: null, signal: null, stdout: '', stderr: String(e) }));
    child.on('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: err }));
  });
}

// Samples until remaining() (seconds) is under 0.2: each chunk the server()
// of the moment (a restarted one after a crash), for `chunk` seconds or
// what remains.  elapsed() dates the failures.
async function sample({ server, remaining, elapsed, hz, chunk, tally, tids }) {
  while (remaining() > 0.2) {
    const s = server();
    if (!s || s.exited) { await sleep(200); continue; }
    const seconds = Math.min(chunk, remaining());
    const r = await runDump(s.pid, hz, seconds);
    tally.chunks++;
    if (/ticks were skipped because the machine was busy/.test(r.stderr)) tally.busyNotes++;
    const cap = /(\d+) samples fell in label sets beyond the table's cap/.exec(r.stderr);
    if (cap) tally.capOverflow += Number(cap[1]);
    const gone = s.exited || r.code === 3 || /exited after/.test(r.stderr);
    if (r.code !== 0 && !(gone && (r.code === 3 || r.code === 0))) {
      tally.chunkFailures.push({ at: elapsed(), code: r.code, signal: r.signal, stderr: r.stderr.slice(-1000) });
    }
    const alive = (tid) => fs.existsSync(`/proc/${s.pid}/task/${tid}`);
    const ctx = { pid: s.pid, tids, alive };
    for (const text of r.stdout.split('\n')) {
      if (text.trim() === '') continue;
      let line;
      try { line = JSON.parse(text); } catch {
        tally.chunkFailures.push({ at: elapsed(), code: r.code, stderr: `unparsable line: ${text.slice(0, 200)}` });
        continue;
      }
      checkLine(tally, line, ctx);
    }
  }
}

module.exports = { DUMP, sample };
