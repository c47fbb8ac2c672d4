'use strict';
// bench/rounds.js, a module of the benchmarks (not a script).  Rounds of
// alternating measurements, and what they give when paired: the
// harness every benchmark here that compares variants runs on.
//
// The machine is shared, so a figure taken at one time says little about
// one taken a minute later.  A round measures every variant once, back to
// back, in an order that changes from round to round (so no variant always
// runs first, or right after the same neighbour); the results of one round
// were taken under the same conditions, so they pair.  A report gives each
// variant's median over the rounds, and for a comparison the median of the
// differences within rounds, with a sign test that says whether it can be
// told from zero.
if (require.main === module) require('./cli').printUsage(__filename);

// The order of `variants` in round `round`: reversed every other round
// ('flip'), or rotated by one more each round ('rotate', for more than two
// variants: each takes each place in turn).
function orderOf(variants, round, order = 'flip') {
  if (order === 'rotate') {
    const k = round % variants.length;
    return [...variants.slice(k), ...variants.slice(0, k)];
  }
  return round % 2 === 0 ? [...variants] : [...variants].reverse();
}

// Runs `rounds` rounds of await measure(variant, round) for every variant,
// in orderOf(variants, round, order), and returns { variant: [result of
// round 0, of round 1, ...] }: index r of every variant is from round r.
// `label` names the progress shown on a terminal; `afterRound(round, got)`
// runs after each round (to log it, or to save what was measured so far).
async function alternate(rounds, variants, measure, { order = 'flip', label = '', afterRound = null } = {}) {
  const got = Object.fromEntries(variants.map((v) => [v, []]));
  const tty = process.stderr.isTTY;
  for (let round = 0; round < rounds; round++) {
    for (const v of orderOf(variants, round, order)) {
      if (tty && label) process.stderr.write(`\r  ${label}: round ${round + 1}/${rounds} ${v}`.padEnd(70));
      got[v][round] = await measure(v, round);
    }
    if (afterRound) afterRound(round, got);
  }
  if (tty && label) process.stderr.write(`\r${' '.repeat(70)}\r`);
  return got;
}

// The median of the finite values, NaN if there are none.
function median(values) {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// Two-sided sign test: the chance of a split at least as uneven as `above`
// of `n` rounds if either variant were as likely to come out higher.
function signTest(above, n) {
  const k = Math.min(above, n - above);
  let p = 0;
  let c = 1; // n choose i
  for (let i = 0; i <= k; i++) {
    p += c;
    c = (c * (n - i)) / (i + 1);
  }
  return Math.min(1, (2 * p) / 2 ** n);
}

// a[r] - b[r] over the rounds where both are finite: the median difference,
// its quartiles and range, the median of (a - b) / b, how many rounds came
// out above 0, and `noise` when a sign test cannot tell the difference from
// zero (p > 0.05).
function paired(a, b) {
  const d = [];
  const f = [];
  for (let r = 0; r < Math.min(a.length, b.length); r++) {
    if (Number.isFinite(a[r]) && Number.isFinite(b[r])) {
      d.push(a[r] - b[r]);
      f.push((a[r] - b[r]) / b[r]);
    }
  }
  const above = d.filter((x) => x > 0).length;
  const sorted = [...d].sort((x, y) => x - y);
  const q = (k) => sorted[Math.round(k * (sorted.length - 1))];
  return {
    n: d.length, median: median(d), min: Math.min(...d), max: Math.max(...d), q1: q(0.25), q3: q(0.75),
    fraction: median(f), above, noise: signTest(above, d.length) > 0.05,
  };
}

module.exports = { orderOf, alternate, median, signTest, paired };
