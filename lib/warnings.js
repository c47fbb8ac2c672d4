'use strict';
// Warnings given once per process: the one helper every warning of the
// package goes through (lib/advice.js holds their words).  The thread that
// warns marks the code in its worker environment data, which the workers it
// starts afterwards inherit (and pass on to theirs); workers started before
// that, by a thread that had not warned, may each warn once.  Where the
// addon can tell for the whole process (a word it keeps: src/status.c),
// `claim` asks it instead, and only its first caller warns, whichever
// threads load the package in whatever order.  Never throws: a warning
// that cannot be given (out of memory) is not worth a fault of its own.

const { getEnvironmentData, setEnvironmentData } = require('node:worker_threads');

// `about`: what the warning is about where one code is said of several
// things (a file): once per process for each.  `claim`: the addon's
// "am I the first in the process?".
function warnOnce(code, message, { about = '', claim } = {}) {
  try {
    if (claim !== undefined) {
      if (!claim()) return;
    } else {
      const key = `customlabels.warned:${code}${about === '' ? '' : `:${about}`}`;
      if (getEnvironmentData(key) === true) return;
      setEnvironmentData(key, true);
    }
    process.emitWarning(message, { code });
  } catch {
    // nothing more to do
  }
}

module.exports = { warnOnce };
