'use strict';
// Failing closed.  The package runs inside Node's async hooks, its timer
// and tick loops and the caller's withLabels; an error of its own there
// (an arena that cannot be mapped, a chunk that cannot be had, a companion
// call that fails, a frame class it cannot wrap) must reach none of them.
// Whoever catches one calls fault(): from then on this thread publishes no
// set (each mode registered what stops it, with onFault), never a stale or
// a wrong one, the API keeps its JavaScript meaning (getLabels() still
// answers), and one warning per process names the cause.  There is no way
// back: a thread that failed once would fail again, and a reader is better
// served by no labels than by labels that come and go.

const { warnOnce } = require('./warnings');

const CODE = 'CUSTOMLABELS_FAULT';

let failed = false;
const stops = [];

// Registers `stop`, which makes this thread publish nothing: it runs once,
// at the first fault, and must not throw.
function onFault(stop) {
  if (failed) stop();
  else stops.push(stop);
}

// Records an internal fault: `what` failed (a phrase: "mapping the label
// arena"), with the error `err` (or a reason string).  Never throws.
function fault(what, err) {
  stop(`${what} failed (${causeOf(err)})`);
}

// The same for what is no error of the package's own but leaves it unable
// to keep the published set right (a class of Node's it cannot find or
// wrap): `reason` says what.  Never throws.
function refuse(reason) {
  stop(reason);
}

function stop(reason) {
  if (failed) return;
  failed = true;
  for (const s of stops) {
    try {
      s();
    } catch {
      // a stop clears words and disables hooks: nothing to do if it cannot
    }
  }
  stops.length = 0;
  warnOnce(CODE, `customlabels publishes no labels in this thread from now on: ${reason}. ` +
    'getLabels() and the rest of the API keep working; profilers read no label set from this thread.');
}

function hasFailed() {
  return failed;
}

function causeOf(err) {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}

module.exports = { fault, refuse, onFault, hasFailed, CODE };
