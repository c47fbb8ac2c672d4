'use strict';
// The stress test (test/stress/soak.js) for a fixed, small amount of work:
// HTTP requests with nested label sets and worker threads that come and go,
// sampled from outside by customlabels-dump, every set read checked.  `npm
// run soak` runs the same for 5 minutes.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { why, skipUnderEmulation } = require('./helpers/emulation');
const needs = require('./helpers/needs');

const SOAK = path.join(__dirname, 'stress', 'soak.js');

describe('stress: load, worker churn and outside sampling together', () => {
  it('reads no torn, mixed, malformed or misplaced set in 2000 requests and 2 workers', function () {
    this.timeout(120000);
    skipUnderEmulation(this, why.dump);
    // customlabels-dump is the server's sibling, not its parent: Yama's
    // ptrace_scope 1 lets only root (or CAP_SYS_PTRACE) read it.
    const scopeFile = '/proc/sys/kernel/yama/ptrace_scope';
    const scope = fs.existsSync(scopeFile) ? Number(fs.readFileSync(scopeFile, 'utf8')) : 0;
    if (scope > 0 && process.getuid() !== 0) {
      needs.feature(this, 'ptrace', `customlabels-dump cannot read a process it did not start: kernel.yama.ptrace_scope is ${scope} and this is uid ${process.getuid()}`);
    }
    const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'customlabels-stress-')), 'results.json');
    try {
      const r = spawnSync(process.execPath, [SOAK, '--requests', '2000', '--workers', '2', '--chunk', '1', '--connections', '10', '--json', json],
        { encoding: 'utf8', timeout: 110000, killSignal: 'SIGKILL' });
      assert.equal(r.signal, null, `the stress test was ended by ${r.signal}\n${r.stdout}\n${r.stderr}`);
      assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
      const results = JSON.parse(fs.readFileSync(json, 'utf8'));
      assert.deepEqual(results.failures, []);
      assert.equal(results.requests.responses, 2000);
      assert.equal(results.workers.started, 2);
      assert.equal(results.sampler.torn, 0);
      assert.ok(results.sampler.http > 0, `no HTTP set was sampled (${JSON.stringify(results.sampler)})`);
    } finally {
      fs.rmSync(path.dirname(json), { recursive: true, force: true });
    }
  });
});
