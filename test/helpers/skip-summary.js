'use strict';
// Mocha plugin (.mocharc.json "require"): after the run, and after the
// reporter's totals, one line with every group of tests skipped for a
// missing tool or machine feature and the apt-get line that brings the
// tools (test/helpers/needs.js records them).  Global teardown runs after
// the reporter has printed its summary, so this is the run's last line.
const { summary } = require('./needs');

exports.mochaGlobalTeardown = function () {
  const line = summary();
  if (line !== null) console.log(`\n  ${line}\n`);
};
