'use strict';
// Which copy of customlabels owns the labels of this JavaScript thread.
//
// npm installs a package twice when two dependencies want different
// versions of it.  Two copies that each kept their own current set, hooks
// and arena would fight over the one variable a profiler reads: a set made
// through one would not see the labels of the other, and each would put
// back what it alone last published.  So the first copy to load registers
// itself on globalThis (one per thread: each worker has its own), and every
// later copy hands out the first one's API instead of its own, provided the
// two agree on PROTOCOL.  A later copy that does not agree publishes
// nothing, and says so once in this thread, naming both copies.
//
// The native side is shared as well: src/peers.c explains how every copy's
// module binds to one custom_labels_current_set.

const path = require('node:path');

const KEY = Symbol.for('customlabels.owner');
// What copies must agree on to share: the Custom Label ABI v1 layout, the
// arena (lib/arena.js) and the label-set rules (lib/labelset.js).
// Raise it when any of them changes in a way an older copy would misread.
const PROTOCOL = 1;
const ROOT = path.resolve(__dirname, '..');
const { version } = require('../package.json');

const owner = globalThis[KEY];

// 'own': this copy runs everything; 'delegate': it hands out owner.exports;
// 'conflict': it may not publish (`conflict` says why).
let standing;
let conflict = null;
if (owner === undefined) {
  standing = 'own';
} else if (owner.protocol === PROTOCOL) {
  standing = 'delegate';
} else {
  standing = 'conflict';
  conflict = `customlabels ${version} at ${ROOT} cannot share this thread's labels with ` +
    `customlabels ${owner.version} at ${owner.root}, which loaded first and publishes them ` +
    `(protocol ${owner.protocol}; this copy speaks ${PROTOCOL}), so labels set through it are not published. ` +
    'Install a single version (npm ls customlabels shows who needs which).';
  process.emitWarning(conflict, { code: 'CUSTOMLABELS_INCOMPATIBLE_COPY' });
}

// Makes this copy the owner for this thread.
function register(exports) {
  Object.defineProperty(globalThis, KEY, {
    value: Object.freeze({ protocol: PROTOCOL, root: ROOT, version, exports }),
    enumerable: false,
    writable: false,
    configurable: false,
  });
}

module.exports = { standing, owner, conflict, register, PROTOCOL, KEY };
