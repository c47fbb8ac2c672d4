'use strict';
// The stress test's checker: what a sample of customlabels-dump --json
// --sample says about the server's sets, and which results fail the run.
//
// What the reader reports and how it is counted (see dump/sample_read.c and dump/tally.c):
//   - a set read consistently (two reads agree, pointer unchanged): checked
//     against test/stress/sets.js: key shape, checksums, and the thread it
//     was on (HTTP sets only on the main thread, a worker's sets only on
//     that worker's thread).
//   - `error: the set changed while it was read, 8 times in a row`: the
//     reader gave up re-reading a set that kept changing under it.  Not a
//     torn set (nothing inconsistent was returned); counted as "unstable".
//   - `error: cannot stop the thread ...` / `cannot read the thread pointer`:
//     the reader could not stop a thread for its first sample (a busy machine
//     or a thread that was exiting).  Reader-side; counted, not a failure.
//   - `error: cannot read custom_labels_current_set ...` on a thread that is
//     gone by the end of the chunk: the thread exited while being read (its
//     TLS went with it).  Counted, not a failure; on a live thread it is.
//   - `error: the label set at X is unreadable`, or warnings (unreadable
//     storage, keys, values): the published pointer led to memory that was
//     not there, twice in a row, with the pointer unchanged.  A published set
//     is never freed (the pointer is cleared before an arena is unmapped),
//     so this is a bug.
//   - a customlabels-dump run that exits non-zero (other than the server
//     being gone) is a reader failure, and a failure.

const { ROUTES, USERS, HTTP_STEPS, WORKER_STEPS, httpSum, workerSum, stepSum } = require('./sets');

// The checker's tallies.
function newTally() {
  return {
    chunks: 0, chunkFailures: [], busyNotes: 0, capOverflow: 0,
    samples: 0, labelled: 0, distinct: 0, nulls: 0,
    http: 0, httpNested: 0, worker: 0, workerNested: 0, other: 0,
    torn: 0, tornExamples: [],
    malformed: 0, malformedExamples: [],
    wrongThread: 0, wrongThreadExamples: [],
    unstable: 0, stopErrors: 0, exitRaces: 0,
    bugErrors: 0, bugErrorExamples: [],
    warnings: 0, warningExamples: [],
    threads: new Set(), labelledThreads: new Set(), workerThreads: new Set(),
    pendingTid: [], // worker sets whose thread was not yet known
  };
}

function note(list, item) { if (list.length < 10) list.push(item); }

// Checks one JSON line of `customlabels-dump --json --sample`.
function checkLine(t, line, ctx) {
  const samples = line.samples;
  t.samples += samples;
  t.threads.add(`${ctx.pid}/${line.tid}`);
  if (line.error) {
    if (/changed while it was read/.test(line.error)) t.unstable += samples;
    else if (/^cannot stop the thread|^cannot read the thread pointer/.test(line.error)) t.stopErrors += samples;
    else if (/^cannot read custom_labels_current_set/.test(line.error) && !ctx.alive(line.tid)) t.exitRaces += samples;
    else { t.bugErrors += samples; note(t.bugErrorExamples, line); }
    return;
  }
  if (line.warnings) { t.warnings += samples; note(t.warningExamples, line); }
  if (line.labels === null) { t.nulls += samples; return; }
  t.labelled += samples;
  t.distinct++;
  t.labelledThreads.add(`${ctx.pid}/${line.tid}`);
  const l = line.labels;
  const keys = Object.keys(l).sort().join(',');
  const bad = (why) => { t.malformed += samples; note(t.malformedExamples, { why, line }); };
  const torn = (why) => { t.torn += samples; note(t.tornExamples, { why, line }); };
  const nested = 'step' in l;
  if (nested && l.ssum !== stepSum(l.trace, l.step)) torn('ssum does not match trace|step');
  if (keys === 'route,sum,trace,user' || keys === 'route,ssum,step,sum,trace,user') {
    if (nested) t.httpNested += samples;
    t.http += samples;
    if (l.sum !== httpSum(l.route, l.user, l.trace)) return torn('sum does not match route|user|trace');
    if (!ROUTES.includes(l.route) || !/^user-\d+$/.test(l.user) || Number(l.user.slice(5)) >= USERS) return bad('route or user not one the loader sends');
    if (nested && !HTTP_STEPS.includes(l.step)) return bad(`step ${l.step} in an HTTP set`);
    if (line.tid !== ctx.pid) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: 'an HTTP set on a thread other than the main one', line }); }
  } else if (keys === 'job,sum,trace,worker' || keys === 'job,ssum,step,sum,trace,worker') {
    if (nested) t.workerNested += samples;
    t.worker += samples;
    if (l.sum !== workerSum(l.worker, l.job, l.trace)) return torn('sum does not match worker|job|trace');
    if (nested && !WORKER_STEPS.includes(l.step)) return bad(`step ${l.step} in a worker set`);
    t.workerThreads.add(`${ctx.pid}/${line.tid}`);
    if (line.tid === ctx.pid) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: 'a worker set on the main thread', line }); return; }
    const wid = ctx.tids.get(`${ctx.pid}/${line.tid}`);
    if (wid === undefined) t.pendingTid.push({ key: `${ctx.pid}/${line.tid}`, line });
    else if (wid !== l.worker) { t.wrongThread += samples; note(t.wrongThreadExamples, { why: `worker ${l.worker}'s set on worker ${wid}'s thread`, line }); }
  } else if (keys === 'phase' && l.phase === 'startup') {
    t.other += samples;
  } else {
    bad(`unexpected keys ${keys}`);
  }
}

// Worker sets whose thread was reported only after their chunk ended:
// checked once every worker has reported its thread.
function checkPending(t, tids) {
  for (const { key, line } of t.pendingTid) {
    const wid = tids.get(key);
    if (wid === undefined) {
      t.wrongThread += line.samples;
      note(t.wrongThreadExamples, { why: 'a worker set on a thread that no worker reported', line });
    } else if (wid !== line.labels.worker) {
      t.wrongThread += line.samples;
      note(t.wrongThreadExamples, { why: `worker ${line.labels.worker}'s set on worker ${wid}'s thread`, line });
    }
  }
  t.pendingTid = [];
}

// What fails a run, from its results (soak.js): one line each.
function failuresOf(r) {
  const s = r.sampler;
  const w = r.workers || {};
  const q = r.requests;
  const failures = [];
  if (s.torn > 0) failures.push(`${s.torn} torn or mixed sets`);
  if (s.malformed > 0) failures.push(`${s.malformed} malformed sets`);
  if (s.wrongThread > 0) failures.push(`${s.wrongThread} sets on the wrong thread`);
  if (s.bugErrors > 0) failures.push(`${s.bugErrors} reader errors that only a bug explains`);
  if (s.warnings > 0) failures.push(`${s.warnings} sets read with warnings`);
  if (s.failures.length > 0) failures.push(`${s.failures.length} customlabels-dump runs failed`);
  if (r.crashes.length > 0) failures.push(`${r.crashes.length} server crashes`);
  if (!r.workers) failures.push('no final statistics from the server');
  if (w.errors > 0 || w.badExits > 0) failures.push(`${w.errors} worker errors, ${w.badExits} workers exited badly`);
  if (q.non2xx > 0 || q.failedInHandler > 0) failures.push(`${q.non2xx} non-2xx responses, ${q.failedInHandler} handler failures`);
  if (r.arenasAfterWorkers !== null && r.arenasAfterWorkers > 1) failures.push(`${r.arenasAfterWorkers} arena mappings left after every worker ended (1 expected)`);
  if (s.labelled === 0) failures.push('no labelled set was sampled at all');
  return failures;
}

module.exports = { newTally, checkLine, checkPending, failuresOf };
