'use strict';
// Following the context with async hooks: which label set is current, and
// keeping this thread's custom_labels_current_set equal to it whenever
// JavaScript runs.  One mechanism of following the context; lib/index.js
// chooses it, and every mechanism offers the same run, enter, entered,
// current and state.
//
// The current set is the store of a private AsyncLocalStorage.  `installed`
// mirrors what the thread's slot holds.  Hooks at every async boundary
// compare the two by identity and write the slot only when they differ, so
// an async hop whose set did not change costs a comparison and no native
// call; one whose set changed costs one 8-byte store (one more on aarch64,
// for Parca Agent, and one more once the OpenTelemetry thread context is
// on: the set's record goes to otel_thread_ctx_v1), and, if the set's chunk
// of the arena was reused since it was written (lib/hooks/arena.js), writing the
// set again first.

const { AsyncLocalStorage, createHook } = require('node:async_hooks');
const v8 = require('node:v8');
const { usesAsyncContextFrame, canSkipPromises, contextFrameClass } = require('../platform');
const { slot, parcaSlot, otelSlot } = require('../addon');
const { EMPTY, encode, recordsOn } = require('./encode');
const { fault, refuse, onFault, hasFailed } = require('../fault');
const { warnOnce } = require('../warnings');

const storage = new AsyncLocalStorage();

// The LabelSet whose address is in the slot; undefined while it holds NULL
// because no set was ever installed.
let installed;

// What `before` replaced, so that `after` can put it back.  Callbacks nest
// strictly, so a stack is enough.
const saved = [];
let depth = 0;

// Publishing an address: one aligned 8-byte store into the slot, chosen
// once.  On aarch64, where Parca Agent reads its own place beside the slot
// (lib/addon.js), that place is written first: a reader that interrupts the
// hop finds the new address there whenever it finds it in the slot.
const publish = parcaSlot === null
  ? (word) => { slot[0] = word; }
  : (word) => { parcaSlot[0] = word; slot[0] = word; };

function install(set) {
  if (failed) return;
  try {
    write(set);
  } catch (err) {
    fault('publishing a label set', err);
  }
}

function write(set) {
  // Once any thread enabled the thread context, this one publishes records
  // too (recordsOn() turns them on here the first time it sees that: every
  // set is written again, record and all).
  const records = recordsOn();
  if (set === undefined) {
    installed = undefined;
    publish(0n);
    if (records) otelSlot[0] = 0n;
    return;
  }
  // A stale set is written again before it is published: never a pointer
  // into a chunk that was reused.
  if (!set.generation.live) encode(set);
  installed = set;
  // The address was made when the set was written, so a hop allocates
  // nothing and does no arithmetic, in every tier of V8.  The two stores
  // need no order between them: each pointer is read on its own, and both
  // point at bytes that were written before either store.
  publish(set.setAddress);
  if (records) otelSlot[0] = set.recordAddress;
}

// The hooks and the frame follower run inside Node's hook machinery and
// its timer and tick loops, where an exception would end the process: each
// catches what it throws and fails closed (lib/fault.js): some 15
// instructions a hop (bench/README.md, the guards against e51e2f4).
function before() {
  try {
    const set = frameNow === null ? storage.getStore() : setOf(frameNow());
    saved[depth++] = installed;
    if (set !== installed) install(set);
  } catch (err) {
    fault('publishing the set of a callback', err);
  }
}

function after() {
  try {
    // A hook enabled inside a callback sees that callback's `after` only
    // (and those of the callbacks it ran in): the hooks are enabled by the
    // first run or enter, which may come inside a callback.  Nothing was
    // published before they were, so that is what such a callback returns
    // to: without this, a set entered there (enterLabels in a request
    // handler) would stay published while the thread waits.  (Inside a
    // callback that such a callback runs in, the set of that one is
    // published again at its next hop.)
    if (depth === 0) {
      if (installed !== undefined) install(undefined);
      return;
    }
    const previous = saved[--depth];
    saved[depth] = undefined; // do not keep the set alive
    if (previous !== installed) install(previous);
  } catch (err) {
    fault('publishing the set after a callback', err);
  }
}

// run and enter publish the set they enter themselves (on every Node):
// while they call enterWith, following leaves it to them.  True for good
// once the thread failed.
let paused = false;

// Once this thread failed (lib/fault.js): NULL in every word it publishes
// through, the hooks disabled, and the frame follower paused for good.
let failed = false;
let hook = null;
let stopPromiseHooks = null;

onFault(() => {
  failed = true;
  paused = true;
  installed = undefined;
  publish(0n);
  otelSlot[0] = 0n;
  if (hook !== null) hook.disable();
  if (stopPromiseHooks !== null) stopPromiseHooks();
});

// Following AsyncContextFrame's own exchanges.  With AsyncContextFrame, the
// current set is the store of the frame V8 holds (its continuation-preserved
// embedder data), and three kinds of code change that frame:
// - V8, around a promise reaction: v8.promiseHooks (or async_hooks' promise
//   hooks on Node 22) run once it has;
// - Node's C++, around a callback from native code (I/O, message ports,
//   HTTP parsers; InternalCallbackScope): async_hooks' before runs once it
//   has, and after before it changes back;
// - Node's JavaScript, through the statics `set` and `exchange` of its
//   AsyncContextFrame class: AsyncLocalStorage's enterWith and run, and
//   AsyncResource's runInAsyncScope (so AsyncResource.bind,
//   EventEmitterAsyncResource, AsyncLocalStorage.bind and snapshot, and
//   every library resource such as undici's request handlers or a
//   connection pool's), and the loops of timers, immediates, ticks and
//   unhandled rejections.  Some emit before first and exchange the frame
//   after it (runInAsyncScope does, on Node 22 to 26; and some exchange
//   with no hook at all), so a hook cannot see the frame they run.
// So each of those two statics is wrapped, once per thread: after the
// frame changes, the set of the new frame is published if it is not the
// published one.  Node's JavaScript looks them up on the class at each
// call (none keeps its own reference), so every JavaScript exchange is
// seen.  A frame never changes its store for our AsyncLocalStorage (a frame
// is copied to change a store; only disable() deletes from one, and ours is
// never disabled), so the sets of the last two frames seen are kept with
// them: a callback's frame and the one it returns to, so that a hop that
// goes there and back costs comparisons and no lookup.
let frame0 = null;
let set0;
let frame1 = null;
let set1;

function setOf(frame) {
  if (frame === frame0) return set0;
  if (frame === frame1) return set1;
  const set = frame === undefined ? undefined : frame.get(storage);
  frame1 = frame0;
  set1 = set0;
  frame0 = frame;
  set0 = set;
  return set;
}


// The frame class's own `current` (no `this` needed), once frames are
// followed: `before` then asks the frame cache rather than the Map.
let frameNow = null;

function follow(frame) {
  if (paused) return;
  try {
    const set = setOf(frame);
    if (set !== installed) install(set);
  } catch (err) {
    fault('publishing the set of a new async context frame', err);
  }
}

// Every thread has its own Node environment and its own frame class, so
// wrapping it follows this thread.  A second realm of this thread that
// loads the package (a vm context with a module registry of its own) finds
// the wrappers there, under a key of the isolate's symbol registry, and
// adds its follower to them rather than wrapping them again.
const FOLLOWERS = Symbol.for('customlabels.frameFollowers');

function followFrames(cls) {
  if (Object.hasOwn(cls, FOLLOWERS)) {
    cls[FOLLOWERS].push(follow);
    return;
  }
  // This realm's follower is called directly (so that V8 can inline it),
  // any other realm's from the list.
  const more = [];
  const current = cls.current;
  const followAll = (frame) => {
    follow(frame);
    if (more.length !== 0) for (let i = 0; i < more.length; i++) more[i](frame);
  };
  wrapStatic(cls, 'set', current, followAll);
  wrapStatic(cls, 'exchange', current, followAll);
  Object.defineProperty(cls, FOLLOWERS, { value: more });
  frameNow = current;
}

// Wraps the static `name` of the frame class so that the frame it makes
// current is followed once it is.  The wrapper calls the function it found
// there (Node's own, or the wrapper of a library that came before) and
// never stands in for it, so that whatever that function does still runs:
// Node 22 and 24's exchange calls this.set, whose wrapper follows the frame
// too (a comparison more).  The static becomes an accessor, so that a
// library that assigns a wrapper of its own later is what Node calls, and
// the frame is still followed after it: through this wrapper when it calls
// the function it replaced, and directly, with one warning, when it does
// not (it then skips Node's own static and every wrapper before it).  A
// library that redefines the property (Object.defineProperty) rather than
// assigning it is followed only through the function it replaced.
function wrapStatic(cls, name, current, followAll) {
  const found = cls[name];
  let reached = false;
  const wrapper = {
    [name](frame) {
      reached = true;
      const result = found.call(this, frame);
      followAll(frame);
      return result;
    },
  }[name];
  let visible = wrapper;
  Object.defineProperty(cls, name, {
    configurable: true,
    enumerable: false,
    get() {
      return visible;
    },
    set(fn) {
      if (typeof fn !== 'function' || fn === wrapper) {
        visible = fn;
        return;
      }
      visible = {
        [name](...args) {
          reached = false;
          const result = Reflect.apply(fn, this, args);
          if (!reached) {
            notChained(name);
            followAll(current());
          }
          return result;
        },
      }[name];
    },
  });
}

function notChained(name) {
  warnOnce('CUSTOMLABELS_FRAME_WRAPPER',
    `A library replaced Node.js's AsyncContextFrame.${name} with a function that does not call the one it replaced ` +
    `(customlabels' wrapper, which calls Node.js's own ${name}). customlabels still publishes the set of the frame ` +
    'that is current after each call, so profilers read what getLabels() says; what that function skipped does not run.');
}

// How the hooks are attached depends on the Node version, chosen once:
// - With AsyncContextFrame (default from Node 24, opt-in on 22), V8 keeps the
//   context of promise reactions itself and v8.promiseHooks see it, so
//   promises go through v8.promiseHooks, and async_hooks, told not to track
//   promises where it can be, covers callbacks (timers, I/O, nextTick...),
//   and the frame class's statics (above) cover the exchanges of Node's
//   JavaScript.  Without the frame class, hooks alone would publish the
//   caller's set inside the callbacks those statics run: the thread then
//   publishes nothing, and says so.
// - Otherwise AsyncLocalStorage itself runs on async_hooks, and one
//   createHook covers promises and callbacks alike.
// The frame class is wrapped first, so that a failure there leaves no hook.
// No Node.js released to date (22, 24, 26) tells of a change of frame
// otherwise: a diagnostics channel 'async_context_frame.set' is proposed
// (nodejs/node pull request 58229), and none of those lines publishes on it.
let mechanism = null;

function enable() {
  mechanism = 'nothing';
  if (hasFailed()) return;
  try {
    const frames = usesAsyncContextFrame();
    const found = frames ? contextFrameClass() : null;
    // Deno's AsyncLocalStorage is its own, with no such class, and its hooks
    // see every change of context (test/runtimes.test.js reads it through
    // awaits and timers).
    if (frames && found === null && process.versions.deno === undefined) {
      refuse(`Node.js ${process.versions.node} runs AsyncLocalStorage on AsyncContextFrame, and its frame class, ` +
        'whose statics set and exchange change the context in timers, immediates, ticks and AsyncResource callbacks, ' +
        'was not found; without it profilers would read the caller\'s labels inside those callbacks ' +
        '(CUSTOMLABELS_PUBLISH=frame publishes without it)');
      return;
    }
    let attached = 'async_hooks';
    if (found !== null) followFrames(found);
    if (frames && canSkipPromises()) {
      hook = createHook({ before, after, trackPromises: false }).enable();
      const stopBefore = v8.promiseHooks.onBefore(before);
      const stopAfter = v8.promiseHooks.onAfter(after);
      stopPromiseHooks = () => { stopBefore(); stopAfter(); };
      attached = 'async_hooks (callbacks) + v8.promiseHooks (promises)';
    } else {
      hook = createHook({ before, after }).enable();
    }
    if (found !== null) attached += ' + AsyncContextFrame.set/exchange';
    if (!failed) mechanism = attached;
  } catch (err) {
    fault('attaching the hooks that follow the async context', err);
  }
}

// Runs fn with `set` current, synchronously and in the async work it
// starts.  This is AsyncLocalStorage.run (the same enterWith and restore on
// every Node version), with the slot switched inside it.  `prior` is what
// entered() gives now: the caller has read it to derive `set`, and reading it
// again would cost another lookup in the context frame on Node 24.
function run(set, fn, prior) {
  if (mechanism === null) enable();
  const entered = set !== prior; // AsyncLocalStorage.run skips an unchanged store too
  const previous = installed;
  try {
    if (entered) enterWith(set);
    if (set !== previous) install(set);
    return fn();
  } finally {
    // An enterWith above that threw (on a stack at its limit) left
    // following paused: this one resumes it.
    if (entered) enterWith(prior);
    if (installed !== previous) install(previous);
  }
}

// No try/finally here: in this small function, called twice by every run,
// it cost more than the rest of following does, and moved where samples
// of a set that changes every microsecond land (test/dump-churn.test.js).
// run() resumes following in its finally, enter() in its catch.
function enterWith(set) {
  paused = true;
  storage.enterWith(set);
  paused = failed;
}

// Makes `set` current for the rest of this synchronous execution and the
// async work it starts.
function enter(set) {
  if (mechanism === null) enable();
  try {
    enterWith(set);
  } catch (err) {
    paused = failed;
    throw err;
  }
  if (set !== installed) install(set);
}

// The current set, or undefined where no set was ever made current.
function entered() {
  return storage.getStore();
}

function current() {
  const set = storage.getStore();
  return set === undefined ? EMPTY : set;
}

function state() {
  return { mechanism, installed, depth };
}

module.exports = { EMPTY, run, enter, entered, current, state, recordsOn };
