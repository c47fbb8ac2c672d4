'use strict';
// Which copy of customlabels owns the labels of this JavaScript thread, and
// in which realm it runs.
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
// The same holds for realms.  A thread runs code in more than one realm
// where a `vm` context is made, and test runners make one per test file
// (Jest; Vitest with --pool=vmThreads): each has a globalThis of its own
// and loads the package anew, while the thread still has one variable.
// Were each realm's copy the owner, every file would add a set of hooks
// that is never removed (each async hop would run all of them) and an arena
// that lives as long as the thread.  So the owner is always a copy loaded
// in the thread's principal realm, the one the thread started with, and is
// registered on that realm's globalThis:
// - node:vm's runInThisContext() runs its code in the principal realm's
//   context whichever realm calls it (nodejs/node src/node_contextify.cc at
//   5d805a1d, ContextifyScript::RunInContext: given no contextified object,
//   as runInThisContext gives it, it runs in env->context()), so every
//   realm finds the owner there.  Test runners hand their realms Node's own
//   node:vm: they substitute node:module (and Jest node:process), not the
//   other core modules (jest-runtime 30's CoreModuleProvider; Vitest 4's
//   CommonjsExecutor.requireCoreModule).
// - A copy first loaded in another realm loads itself in the principal
//   realm, through that realm's own require (process.getBuiltinModule,
//   Node.js 20.16 and later), and hands out that copy's API.
// So the hooks, the arena and every set ever published belong to a realm
// that lasts as long as the thread: a realm that is thrown away (Jest
// discards each test file's) takes nothing published with it, and the
// owner's code never runs on the globals of a realm that is gone.  Where
// the principal realm cannot load the package (an older Node.js 20, a
// bundle), the copy owns its own realm as it would a thread.
//
// What another realm gets: the owner's functions, except that getLabels
// answers with an object of the caller's realm, so that it is an
// `instanceof Object` there.  Errors thrown by the API are the principal
// realm's TypeError and RangeError (tell them by `name`).
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

// The global object of the thread's principal realm: this realm's own
// where there is no other (or no node:vm to reach it).
function principalGlobal() {
  try {
    return require('node:vm').runInThisContext('globalThis');
  } catch {
    return globalThis;
  }
}

const principal = principalGlobal();
const inPrincipal = principal === globalThis;

// The owner of this thread: one registered in this realm (the principal
// realm's, or a release before realms were shared that registered in its
// own realm), else the principal realm's, loaded there first if need be.
function findOwner() {
  const here = globalThis[KEY];
  if (here !== undefined || inPrincipal) return here;
  if (principal[KEY] === undefined) loadInPrincipal();
  return principal[KEY];
}

// Loads this copy in the principal realm, where it registers itself (it is
// the principal realm's first).  Where that realm cannot (no
// getBuiltinModule before Node.js 20.16; a bundle, whose lib/index.js is
// elsewhere), this realm goes on alone.
function loadInPrincipal() {
  const getBuiltinModule = principal.process?.getBuiltinModule;
  if (typeof getBuiltinModule !== 'function' || path.basename(__filename) !== 'copies.js') return;
  try {
    getBuiltinModule('node:module').createRequire(__filename)(path.join(__dirname, 'index.js'));
  } catch {
    // Nothing registered: this copy owns its realm.
  }
}

const owner = findOwner();

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

// Makes this copy the owner for this realm: for the thread, in the
// principal realm.
function register(exports) {
  Object.defineProperty(globalThis, KEY, {
    value: Object.freeze({ protocol: PROTOCOL, root: ROOT, version, exports }),
    enumerable: false,
    writable: false,
    configurable: false,
  });
}

// The API a delegate hands out: the owner's own where the owner runs in
// this realm; in another realm, a copy of it whose getLabels makes this
// realm's objects.  Made once per realm, when the package is loaded there.
function ownerApi() {
  const api = owner.exports;
  if (owner === globalThis[KEY]) return api;
  const local = {};
  for (const key of Reflect.ownKeys(api)) Object.defineProperty(local, key, Reflect.getOwnPropertyDescriptor(api, key));
  const ownerGetLabels = api.getLabels;
  // Object.fromEntries defines each label as an own property, a key named
  // __proto__ too, as the owner's getLabels does.
  local.getLabels = function getLabels() {
    return Object.fromEntries(Object.entries(ownerGetLabels()));
  };
  return local;
}

module.exports = { standing, owner, conflict, register, ownerApi };
