'use strict';
const assert = require('node:assert/strict');
const { withLabels, enterLabels, getLabels, limits } = require('..');
const tls = require('./helpers/tls');

// Runs `attempt` inside a labeled context and checks that it throws `type`
// with a message matching `message`, that fn never ran, and that the
// published set and the JavaScript labels are exactly as before.
function rejects(attempt, type, message) {
  withLabels({ outer: 'kept' }, () => {
    const address = tls.address();
    let ran = false;
    assert.throws(() => attempt(() => { ran = true; }), (err) => {
      assert.ok(err instanceof type, `expected ${type.name}, got ${err && err.name}: ${err && err.message}`);
      assert.match(err.message, message);
      return true;
    });
    assert.equal(ran, false, 'fn must not run');
    assert.equal(tls.address(), address, 'the published set is untouched');
    assert.deepEqual(getLabels(), { outer: 'kept' });
  });
  assert.equal(tls.published(), null);
}

class Labels { constructor() { this.a = 'b'; } }

describe('bad input', () => {
  for (const [name, labels] of [
    ['undefined', undefined], ['null', null], ['a number', 42], ['a string', 'route=/a'],
    ['an array', [['a', 'b']]], ['a Map', new Map([['a', 'b']])], ['a class instance', new Labels()],
    ['an object with a prototype', Object.create({ a: 'b' })], ['a function', () => {}],
  ]) {
    it(`withLabels rejects ${name} as labels with a TypeError naming labels`, () => {
      rejects((fn) => withLabels(labels, fn), TypeError, /withLabels: labels must be a plain object/);
    });
  }

  for (const [name, fn] of [['undefined', undefined], ['null', null], ['an object', {}], ['a string', 'f']]) {
    it(`withLabels rejects ${name} as fn with a TypeError naming fn`, () => {
      rejects(() => withLabels({ a: 'b' }, fn), TypeError, /withLabels: fn must be a function/);
    });
  }

  for (const [name, value] of [
    ['an object', {}], ['an array', ['x']], ['a function', () => 'x'], ['a symbol', Symbol('x')], ['a Date', new Date(0)],
  ]) {
    it(`rejects ${name} as a value with a TypeError naming the key`, () => {
      rejects((fn) => withLabels({ good: 'ok', bad: value }, fn), TypeError, /labels\["bad"\] must be a string, number, boolean, bigint, null or undefined/);
    });
  }

  it('says what a value may be, and calls a plain object an object, from this realm or another', () => {
    const vm = require('node:vm');
    const may = 'must be a string, number, boolean, bigint, null or undefined, got';
    for (const [value, what] of [
      [{}, 'an object'], [vm.runInNewContext('({})'), 'an object'], [Object.create(null), 'an object'],
      [[], 'an array'], [new Map(), 'an instance of Map'], [Symbol('s'), 'type symbol'], [() => {}, 'type function'],
    ]) {
      assert.throws(() => withLabels({ a: value }, () => {}), (err) => {
        assert.ok(err instanceof TypeError);
        assert.equal(err.message, `withLabels: labels["a"] ${may} ${what}`);
        return true;
      });
    }
  });

  it('describes a value in the same words at every entry point', () => {
    const { enableThreadContext } = require('..');
    const { spanLabels } = require('../lib/otel');
    const manager = { active() {}, with() {}, bind() {}, enable() {}, disable() {} };
    for (const [value, what] of [[new Date(0), 'an instance of Date'], ['x'.repeat(100), /the string "x{60}"… \(100 characters\)/], [[], 'an array']]) {
      const messages = [];
      for (const attempt of [
        () => withLabels(value, () => {}),
        () => enterLabels(value),
        () => withLabels({ a: 'b' }, value),
        () => enableThreadContext(value),
        () => enableThreadContext({ resource: value }),
        () => spanLabels(manager, value),
      ]) {
        assert.throws(attempt, (err) => {
          assert.ok(err instanceof TypeError, err.message);
          messages.push(err.message);
          return true;
        });
      }
      for (const message of messages) {
        if (typeof what === 'string') assert.ok(message.endsWith(`got ${what}`), message);
        else assert.match(message, what);
      }
    }
  });

  it('quotes at most 60 characters of a string the caller passed, at every entry point, and says how long it was', () => {
    const { enableThreadContext } = require('..');
    const { spanLabels } = require('../lib/otel');
    const manager = { active() {}, with() {}, bind() {}, enable() {}, disable() {} };
    const long = 'k'.repeat(100000);
    const cut = `"${'k'.repeat(60)}"… (100000 characters)`;
    for (const [attempt, type] of [
      [() => withLabels({ [long]: 'v' }, () => {}), RangeError],
      [() => withLabels({ [long]: {} }, () => {}), TypeError],
      [() => enterLabels({ [long]: 'v' }), RangeError],
      [() => withLabels(long, () => {}), TypeError],
      [() => enableThreadContext({ [long]: 'x' }), TypeError],
      [() => enableThreadContext({ resource: { [long]: 'x' } }), RangeError],
      [() => spanLabels(manager, { [long]: true }), TypeError],
      [() => spanLabels(manager, { spanName: long }), RangeError],
    ]) {
      assert.throws(attempt, (err) => {
        assert.ok(err instanceof type, `${err.name}: ${err.message.slice(0, 200)}`);
        assert.ok(err.message.includes(cut), err.message.slice(0, 200));
        assert.ok(err.message.length < 250, `${err.message.length} characters: ${err.message.slice(0, 200)}`);
        return true;
      });
    }
    // A cut never splits a character in two.
    assert.throws(() => withLabels({ [`a${'\u{1f600}'.repeat(1000)}`]: 'v' }, () => {}), (err) => {
      assert.ok(err.message.isWellFormed(), 'no lone surrogate in the message');
      assert.match(err.message, /"a(\u{1f600}){29}"… \(2001 characters\) is 4001 bytes in UTF-8/u);
      return true;
    });
  });

  it('accepts a plain object made in another realm, and names what it refuses without contradiction', () => {
    const vm = require('node:vm');
    withLabels(vm.runInNewContext('({ route: "/vm" })'), () => assert.deepEqual(tls.published(), { route: '/vm' }));
    withLabels(vm.runInNewContext('Object.create(null)'), () => assert.equal(tls.published(), null));
    // Inherits from an object whose constructor is Object: not a plain object,
    // and the message must not call it "an instance of Object".
    rejects((fn) => withLabels(Object.create(Object.create(Object.prototype)), fn), TypeError,
      /labels must be a plain object, got an object that inherits from another object/);
    // A forged prototype that claims to be Object.prototype.
    const forged = Object.create(null);
    forged.constructor = function Object() {};
    forged.constructor.prototype = forged;
    rejects((fn) => withLabels(Object.create(forged), fn), TypeError, /labels must be a plain object/);
  });

  it('ignores symbol keys, as Object.entries and JSON.stringify do', () => {
    withLabels({ a: 'b', [Symbol('k')]: 'v' }, () => assert.deepEqual(tls.published(), { a: 'b' }));
  });

  it('rejects a key with a lone surrogate', () => {
    rejects((fn) => withLabels({ 'k\udc00': 'v' }, fn), TypeError, /not well-formed/);
  });

  it(`rejects more than ${limits.maxLabels} labels with a RangeError`, () => {
    const labels = {};
    for (let i = 0; i <= limits.maxLabels; i++) labels[`k${i}`] = 'v';
    rejects((fn) => withLabels(labels, fn), RangeError, /at most 10 labels; this one would hold 12/);
  });

  it('counts inherited labels against the limit', () => {
    const labels = {};
    for (let i = 0; i < limits.maxLabels - 1; i++) labels[`k${i}`] = 'v';
    withLabels(labels, () => {
      assert.throws(() => withLabels({ one: '1', two: '2' }, () => {}), RangeError);
      // Removing one makes room.
      withLabels({ k0: null, one: '1', two: '2' }, () => assert.equal(Object.keys(tls.published()).length, 10));
    });
  });

  it(`rejects keys over ${limits.maxKeyBytes} bytes, counted in UTF-8`, () => {
    rejects((fn) => withLabels({ ['k'.repeat(limits.maxKeyBytes + 1)]: 'v' }, fn), RangeError, /keys must be 1 to 25 bytes/);
    rejects((fn) => withLabels({ ['é'.repeat(13)]: 'v' }, fn), RangeError, /is 26 bytes/);
  });

  it('rejects an empty key', () => {
    rejects((fn) => withLabels({ '': 'v' }, fn), RangeError, /keys must be 1 to 25 bytes/);
  });

  it(`rejects values over ${limits.maxValueBytes} bytes, counted in UTF-8`, () => {
    rejects((fn) => withLabels({ k: 'v'.repeat(limits.maxValueBytes + 1) }, fn), RangeError, /value of label "k" .* the limit is 53/);
    rejects((fn) => withLabels({ k: '€'.repeat(18) }, fn), RangeError, /is 54 bytes/);
    rejects((fn) => withLabels({ k: 'x'.repeat(1e6) }, fn), RangeError, /more than 53 bytes/);
  });

  it('propagates an exception from a getter without changing anything', () => {
    const labels = { a: 'b' };
    Object.defineProperty(labels, 'boom', { enumerable: true, get() { throw new Error('getter failed'); } });
    rejects((fn) => withLabels(labels, fn), Error, /getter failed/);
  });

  it('reads a labels object whose getter labels other work while it is read', () => {
    // The getter's withLabels reads its own object in the middle of the
    // outer read; neither may see the other's keys.
    const inner = [];
    const labels = {
      a: '1',
      get b() {
        return withLabels({ x: '9', y: '8', z: '7', w: '6' }, () => {
          inner.push(tls.published());
          return '2';
        });
      },
      c: '3',
    };
    for (let round = 0; round < 3; round++) {
      withLabels(labels, () => {
        assert.deepEqual(tls.published(), { a: '1', b: '2', c: '3' });
        assert.deepEqual(getLabels(), { a: '1', b: '2', c: '3' });
      });
    }
    assert.deepEqual(inner, Array(3).fill({ x: '9', y: '8', z: '7', w: '6' }));
    assert.equal(tls.published(), null);
  });

  it('enterLabels validates the same way and changes nothing on error', () => {
    rejects(() => enterLabels(null), TypeError, /enterLabels: labels must be a plain object/);
    rejects(() => enterLabels({ k: {} }), TypeError, /enterLabels: labels\["k"\]/);
    rejects(() => enterLabels({ k: 'v'.repeat(54) }), RangeError, /enterLabels: /);
  });
});
