'use strict';
// Warnings given once per process.  The thread that warns marks the code in
// its worker environment data, which the workers it starts afterwards
// inherit (and pass on to theirs); workers started before that, by a thread
// that had not warned, may each warn once.  Never throws: a warning that
// cannot be given (out of memory) is not worth a fault of its own.

const { getEnvironmentData, setEnvironmentData } = require('node:worker_threads');

function warnOnce(code, message) {
  try {
    const key = `customlabels.warned:${code}`;
    if (getEnvironmentData(key) === true) return;
    setEnvironmentData(key, true);
    process.emitWarning(message, { code });
  } catch {
    // nothing more to do
  }
}

module.exports = { warnOnce };
