'use strict';
// The other objects loaded beside customlabels.node: the ones a reader
// could take for it, or that hold a variable it publishes through, looked
// at when it loads and after every later load in the thread (a patched
// process.dlopen, which calls what it replaced).  lib/addon.js starts it.

const { warnOnce } = require('./warnings');

// Other loaded objects beside this addon that a reader could take for it,
// or that hold a variable it publishes through (src/peers.c), each said
// once per process per file (lib/warnings.js).
//   - a copy of this package with a variable of its own (an older release
//     loaded without RTLD_GLOBAL, or one that speaks another binding):
//     CUSTOMLABELS_TWO_VARIABLES, and one copy is the fix;
//   - another writer of the Custom Label ABI (another package's
//     customlabels.node): both keep their own variables, and a reader that
//     takes one such file per process sees the labels of one of them;
//   - another library whose variable this addon's references are bound to
//     (loaded with RTLD_GLOBAL before it): this addon's labels would go
//     into that library's variable.
// An older release of this package loaded with RTLD_GLOBAL shares its
// variable on purpose and is not named.
function warnPeer(other, message, code) {
  warnOnce(code, message, { about: other });
}

function checkPeers(binding, file) {
  for (const { file: other, abi, copy, shared } of binding.peers()) {
    if (copy && shared) continue;
    if (copy) {
      warnPeer(other,
        `${other} defines its own custom_labels_current_set, apart from ${file}: ` +
        'labels set through one copy of customlabels are invisible to a profiler that reads the other. ' +
        'Install a single copy (npm ls customlabels shows who needs which; npm dedupe), ' +
        'or make every copy a release that shares the variable.',
        'CUSTOMLABELS_TWO_VARIABLES');
    } else if (shared) {
      warnPeer(other,
        `${file} publishes into thread-locals of ${other}, which another library loaded with RTLD_GLOBAL before customlabels: ` +
        `customlabels overwrites what that library publishes, and profilers read customlabels' labels from either file. ` +
        'Require customlabels before that library, or load the library without RTLD_GLOBAL.',
        'CUSTOMLABELS_OTHER_WRITER');
    } else if (abi) {
      warnPeer(other,
        `${other} is another writer of the Custom Label ABI (not customlabels), with its own custom_labels_current_set ` +
        `apart from ${file}: both publish, but a profiler that reads one such file per process (Parca Agent; ` +
        'customlabels-dump reads the first in /proc/PID/maps) sees the labels of only one of the two, ' +
        `and none of the other's. Use one library to label this process.`,
        'CUSTOMLABELS_OTHER_WRITER');
    }
  }
}

// Addons loaded after this one are looked at as they load: a later writer
// of the ABI is said as soon as there is one.  process.dlopen is what
// require() of a .node file calls; this thread's own loads go through it too.
// afterLoad(fn): fn() after each later load in this thread (fn must not
// throw; lib/othercontext.js, once the thread context is on).
const afterLoads = [];
function afterLoad(fn) {
  if (!afterLoads.includes(fn)) afterLoads.push(fn);
}

function watchLoads(binding, file) {
  const original = process.dlopen;
  process.dlopen = function dlopen(...args) {
    const result = Reflect.apply(original, this, args);
    try {
      checkPeers(binding, file);
      for (const fn of afterLoads) fn();
    } catch {
      // out of memory while looking: the load itself succeeded
    }
    return result;
  };
}

// Looks at what is loaded now, then after every later load in this thread.
function watchPeers(binding, file) {
  checkPeers(binding, file);
  watchLoads(binding, file);
}

module.exports = { watchPeers, afterLoad };
