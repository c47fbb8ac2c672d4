'use strict';
// The WebAssembly set writer (src/setwriter.wat, built into
// lib/hooks/setwriter.wasm).  With the JS String Builtins (V8 12 and later:
// Node 22 and later), WebAssembly reads a JavaScript string's characters
// itself, so a new set's bytes are written with no call into the addon.
// It measured under 15 % cheaper per new set than the JavaScript writer of
// lib/setbytes.js on every Node (docs/design.md, Writers), so it writes the
// sets only where CUSTOMLABELS_WRITER=wasm asks for it.  The module's
// memory is then the thread's arena: it is made when the arena is first
// needed (lib/hooks/arena.js), and the addon adopts it (src/addon.c
// adoptArena), holding it until the thread's environment is torn down.
// Elsewhere the addon maps the arena.

// The module repeats the arena's layout and the label limits as constants
// (src/setwriter.wat); they are checked against the addon's layout and
// lib/checks.js when the instance is made, and a module that disagrees is
// not used.
//
// CUSTOMLABELS_WRITER, read once at load, chooses a writer for comparing
// them (tests, bench/writers.js): `wasm` this one wherever V8 has the
// builtins, `addon` the addon's, `js` (the default) lib/setbytes.js's
// (lib/hooks/encode.js).

const fs = require('node:fs');
const path = require('node:path');
const { binding } = require('../addon');
const { LIMITS, quote } = require('../checks');

// The compiled module, or null with the reason this thread does without it.
function compile() {
  if (binding === null) return { compiled: null, reason: 'there is no addon' };
  const chosen = process.env.CUSTOMLABELS_WRITER;
  if (chosen !== undefined && chosen !== 'addon' && chosen !== 'wasm' && chosen !== 'js') {
    process.emitWarning(`CUSTOMLABELS_WRITER=${quote(chosen)} is neither "addon", "wasm" nor "js"; ignored`,
      { code: 'CUSTOMLABELS_WRITER' });
  }
  if (chosen !== 'wasm') {
    return { compiled: null, reason: 'the JavaScript writer writes the sets (CUSTOMLABELS_WRITER=wasm chooses this one)' };
  }
  if (typeof WebAssembly !== 'object') return { compiled: null, reason: 'this Node.js runs without WebAssembly' };
  let compiled;
  try {
    compiled = new WebAssembly.Module(fs.readFileSync(path.join(__dirname, 'setwriter.wasm')), { builtins: ['js-string'] });
  } catch (err) {
    return { compiled: null, reason: `lib/setwriter.wasm did not compile: ${err.message}` };
  }
  // A V8 without the builtins ignores the option: the module then still
  // imports wasm:js-string, which only the builtins provide.
  if (WebAssembly.Module.imports(compiled).length !== 0) {
    return { compiled: null, reason: 'this V8 has no JS String Builtins' };
  }
  return { compiled, reason: null };
}

const { compiled, reason } = compile();

const writer = {
  // Whether the arena will be this module's memory and the sets its work.
  available: compiled !== null,
  // Why not, where it is not.
  reason,
  // The instance's write(offset, end, n, place0, value0, ...), once the
  // arena is made; src/setwriter.wat says what it takes.
  write: null,
};

// What disagrees between the instance's constants and what the addon and
// lib/ use, or null.
function constantsMismatch(exports) {
  const layout = binding.layout;
  const expected = {
    keyArea: layout.keyArea, arenaBytes: layout.arenaBytes, maxLabels: LIMITS.maxLabels,
    maxKeyBytes: LIMITS.maxKeyBytes, maxValueBytes: LIMITS.maxValueBytes,
  };
  for (const [name, value] of Object.entries(expected)) {
    const got = exports[name] instanceof WebAssembly.Global ? exports[name].value : undefined;
    if (got !== value) return `${name} is ${got}, not ${value}`;
  }
  if (exports.memory.buffer.byteLength !== layout.arenaBytes) {
    return `its memory is ${exports.memory.buffer.byteLength} bytes, not ${layout.arenaBytes}`;
  }
  return null;
}

// Makes the module's instance and gives its memory to the addon as this
// thread's arena: [ArrayBuffer, its address].  If V8 cannot make the
// memory (it reserves address space beyond it, up to 8 GiB, and less where
// that is refused), or the module's constants disagree with the layout,
// returns null, and the thread does without this writer.
writer.instantiate = function instantiate() {
  let exports;
  try {
    ({ exports } = new WebAssembly.Instance(compiled, {}));
  } catch (err) {
    writer.available = false;
    writer.reason = `the set writer's memory could not be made: ${err.message}`;
    return null;
  }
  const mismatch = constantsMismatch(exports);
  if (mismatch !== null) {
    writer.available = false;
    writer.reason = `lib/setwriter.wasm disagrees with the addon's layout: ${mismatch}`;
    return null;
  }
  const buffer = exports.memory.buffer;
  const [low, high] = binding.adoptArena(buffer);
  const base = (BigInt(high) << 32n) | BigInt(low);
  exports.setBase(base);
  writer.write = exports.write;
  return [buffer, base];
};

module.exports = writer;
