'use strict';
// Every file in bench/, run as `node bench/<file> --help`, prints its usage
// (the comment block at its top, as written) and exits 0 without measuring
// anything: nothing else on stdout or stderr, no child left running, and it
// ends within the time Node takes to start, far from any measurement's.
// The benchmarks themselves are not run here.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const BENCH = path.resolve(__dirname, '..', 'bench');
const FILES = fs.readdirSync(BENCH).filter((f) => f.endsWith('.js')).sort();

// The comment block after 'use strict', with each line's `// ` taken off.
function usageOf(file) {
  const lines = fs.readFileSync(path.join(BENCH, file), 'utf8').split('\n').slice(1);
  const end = lines.findIndex((l) => !l.startsWith('//'));
  return `${lines.slice(0, end).map((l) => l.replace(/^\/\/ ?/, '')).join('\n')}\n`;
}

describe('bench/ scripts: --help prints the usage and runs nothing', function () {
  this.timeout(60000);

  it('finds the scripts', () => {
    assert.ok(FILES.includes('cost.js') && FILES.includes('instructions.js'), `bench/ holds ${FILES.join(', ')}`);
  });

  for (const file of FILES) {
    it(`node bench/${file} --help`, () => {
      // Run from an empty environment for the package: a script that went on
      // to measure would find no package at CUSTOMLABELS_ROOT and fail, or
      // print more than its usage.
      const r = spawnSync(process.execPath, [path.join(BENCH, file), '--help'], {
        cwd: BENCH,
        encoding: 'utf8',
        timeout: 20000,
        env: { ...process.env, CUSTOMLABELS_ROOT: path.join(BENCH, 'no-such-package'), BENCH_NODE: '' },
      });
      assert.equal(r.signal, null, `bench/${file} --help did not end within 20 s (it measures something)`);
      assert.equal(r.status, 0, `bench/${file} --help exited ${r.status}: ${r.stderr}`);
      assert.equal(r.stderr, '');
      const usage = usageOf(file);
      assert.ok(usage.split('\n').length > 2, `bench/${file} has no usage comment at its top`);
      assert.equal(r.stdout, usage);
    });
  }
});
