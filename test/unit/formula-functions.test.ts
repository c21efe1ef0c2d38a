/**
 * The formula language on its own, with no database: every function and operator the whitelist
 * admits (domain/tables/formula.ts), with empty inputs, text against numbers and error cells; then
 * the closures that evaluate rows against mathjs's own compiled evaluation, which they replaced,
 * over a grid of formulas and values (the results and error messages must be the same).
 */
import { describe, expect, it } from 'vitest';
import { compileFormula, formulaFunctions, type FormulaOutcome } from '../../domain/tables/formula.js';
import { cellTextMax } from '../../domain/tables/tables.js';

const ids = {
  a: '00000000-0000-4000-8000-00000000000a',
  b: '00000000-0000-4000-8000-00000000000b',
  c: '00000000-0000-4000-8000-00000000000c',
};
/** A formula written with `{a}`, `{b}`, `{c}` in its stored form. */
const stored = (formula: string) => formula.replace(/\{([abc])\}/g, (_, name: 'a' | 'b' | 'c') => `{${ids[name]}}`);
const exists = () => true;

/** Both evaluations of one formula, compiled once, for rows whose values are given by name. */
function compiledBoth(formula: string) {
  const closures = compileFormula(stored(formula), exists);
  const mathjs = compileFormula(stored(formula), exists, 'mathjs');
  const names = Object.keys(ids) as ('a' | 'b' | 'c')[];
  const values = (refs: string[], row: Partial<Record<'a' | 'b' | 'c', unknown>>) =>
    refs.map((ref) => (row[names.find((k) => ids[k] === ref)!] ?? null) as never);
  return (row: Partial<Record<'a' | 'b' | 'c', unknown>>) => ({
    closures: closures.evaluate(values(closures.refs, row)),
    mathjs: mathjs.evaluate(values(mathjs.refs, row)),
  });
}
const both = (formula: string, row: Partial<Record<'a' | 'b' | 'c', unknown>> = {}) => compiledBoth(formula)(row);

/** The closures' outcome, checked against mathjs's. */
function run(formula: string, row: Partial<Record<'a' | 'b' | 'c', unknown>> = {}): FormulaOutcome {
  const { closures, mathjs } = both(formula, row);
  expect(closures, formula).toEqual(mathjs);
  return closures;
}
const value = (formula: string, row: Partial<Record<'a' | 'b' | 'c', unknown>> = {}) => {
  const outcome = run(formula, row);
  expect(outcome.state, `${formula}: ${JSON.stringify(outcome)}`).toBe('done');
  return outcome.state === 'done' ? outcome.value : undefined;
};
const error = (formula: string, row: Partial<Record<'a' | 'b' | 'c', unknown>> = {}) => {
  const outcome = run(formula, row);
  expect(outcome.state, `${formula}: ${JSON.stringify(outcome)}`).toBe('error');
  return outcome.state === 'error' ? outcome.error : undefined;
};

describe('formula functions', () => {
  it('lists the functions a formula may call', () => {
    expect(formulaFunctions).toEqual(
      [
        ...['abs', 'ceil', 'floor', 'round', 'fix', 'sqrt', 'cbrt', 'exp', 'log', 'log10', 'log2', 'pow', 'mod'],
        ...['sign', 'min', 'max', 'number', 'string', 'text', 'concat', 'lower', 'upper', 'trim', 'len'],
        ...['contains', 'startsWith', 'endsWith', 'left', 'right', 'replace', 'isEmpty', 'coalesce'],
      ].sort(),
    );
  });

  it('computes the numeric functions', () => {
    expect(value('abs(-3)')).toBe(3);
    expect(value('abs({a})', { a: '-2' })).toBe(2);
    expect(value('ceil(1.2)')).toBe(2);
    expect(value('floor(1.8)')).toBe(1);
    expect(value('round(2.5)')).toBe(3);
    expect(value('round(1.2345, 2)')).toBe(1.23);
    expect(value('fix(-1.7)')).toBe(-1);
    expect(value('sqrt(9)')).toBe(3);
    expect(value('cbrt(27)')).toBe(3);
    expect(value('exp(0)')).toBe(1);
    expect(value('log(e)')).toBe(1);
    expect(value('log(8, 2)')).toBe(3);
    expect(value('log10(1000)')).toBe(3);
    expect(value('log2(8)')).toBe(3);
    expect(value('pow(2, 10)')).toBe(1024);
    expect(value('mod(7, 3)')).toBe(1);
    expect(value('sign(-5)')).toBe(-1);
    expect(value('min(3, {a}, 2)', { a: 1 })).toBe(1);
    expect(value('max(3, {a}, 2)', { a: '4' })).toBe(4);
    expect(value('number({a})', { a: '12.5' })).toBe(12.5);
    expect(value('string(12)')).toBe('12');
    expect(value('pi')).toBe(Math.PI);
  });

  it('computes the text functions, reading a value as the text a person sees', () => {
    expect(value('text({a})', { a: true })).toBe('true');
    expect(value('text({a})')).toBe('');
    expect(value('concat("a", {a}, {b}, {c})', { a: 1, b: true })).toBe('a1true');
    expect(value('lower("ÀB")')).toBe('àb');
    expect(value('upper({a})', { a: 'ada' })).toBe('ADA');
    expect(value('trim("  x ")')).toBe('x');
    expect(value('len({a})', { a: 1234 })).toBe(4);
    expect(value('len({a})')).toBe(0);
    expect(value('contains("Ada Lovelace", "LOVE")')).toBe(true);
    expect(value('startsWith("Ada", "a")')).toBe(true);
    expect(value('endsWith("Ada", "x")')).toBe(false);
    expect(value('left("Ada", 2)')).toBe('Ad');
    expect(value('left("Ada", -1)')).toBe('');
    expect(value('right("Ada", 2)')).toBe('da');
    expect(value('right("Ada", 0)')).toBe('');
    expect(value('replace("a-b-c", "-", "+")')).toBe('a+b+c');
    expect(value('replace("abc", "", "+")')).toBe('abc');
    expect(value('isEmpty({a})')).toBe(true);
    expect(value('isEmpty({a})', { a: '' })).toBe(true);
    expect(value('isEmpty({a})', { a: 0 })).toBe(false);
    expect(value('coalesce({a}, {b}, "none")', { b: '' })).toBe('none');
    expect(value('coalesce({a}, {b})', { b: 0 })).toBe(0);
    expect(value('coalesce({a}, {b})')).toBe(null);
  });

  it('computes the operators, text read as a number where arithmetic needs one', () => {
    expect(value('{a} + {b}', { a: '2', b: 3 })).toBe(5);
    expect(value('{a} - 1', { a: true })).toBe(0);
    expect(value('{a} * 2', { a: ' 21 ' })).toBe(42);
    expect(value('{a} / 4', { a: 10 })).toBe(2.5);
    expect(value('-{a}', { a: 3 })).toBe(-3);
    expect(value('+{a}', { a: '3' })).toBe(3);
    expect(value('2 ^ 3')).toBe(8);
    expect(value('7 % 4')).toBe(3);
    expect(value('0.1 + 0.2')).toBe(0.30000000000000004);
    expect(value('{a} > 1 ? "big" : "small"', { a: 5 })).toBe('big');
    expect(value('{a} ? 1 : 2')).toBe(2);
    expect(value('{a} ? 1 : 2', { a: 'x' })).toBe(1);
  });

  it('compares text as text, numbers within mathjs tolerance, and empty only to empty', () => {
    expect(value('{a} == {b}', { a: 'Ada', b: 'Ada' })).toBe(true);
    expect(value('{a} == 1', { a: '1' })).toBe(true);
    expect(value('{a} == 1', { a: '1.0' })).toBe(false);
    expect(value('0.1 + 0.2 == 0.3')).toBe(true);
    expect(value('{a} == {b}')).toBe(true);
    expect(value('{a} == ""')).toBe(false);
    expect(value('{a} != 0')).toBe(true);
    expect(value('"b" > "a"')).toBe(true);
    expect(value('"B" < "a"')).toBe(true);
    expect(value('{a} >= "x"', { a: 'x' })).toBe(true);
    expect(value('{a} <= 1')).toBe(false);
    expect(value('{a} > 1')).toBe(false);
    expect(value('2 > 1')).toBe(true);
    expect(value('1 < 1 + 1e-14')).toBe(false);
  });

  it('computes the logical operators, the right side only when the left does not decide', () => {
    expect(value('1 and {a}', { a: true })).toBe(true);
    expect(value('0 and {a}', { a: 'not a number' })).toBe(false);
    expect(value('1 or {a}', { a: 'not a number' })).toBe(true);
    expect(value('false or {a}', { a: 2 })).toBe(true);
    expect(value('not {a}', { a: 0 })).toBe(true);
    expect(value('true xor {a}', { a: true })).toBe(false);
    expect(error('true and {a}', { a: 'not a number' })).toBe('Cannot convert "not a number" to a number');
  });

  it('gives an error cell for a result or an input it cannot use', () => {
    expect(error('1 / {a}', { a: 0 })).toBe('The result is not a finite number.');
    expect(error('{a} * 2', { a: 'abc' })).toBe('Cannot convert "abc" to a number');
    expect(error('sqrt(-1)')).toBe('The result is not a number, text or true/false.');
    expect(error('abs({a})')).toMatch(/Unexpected type of argument in function abs/);
    expect(error('left({a}, 20000)', { a: 'x'.repeat(cellTextMax + 1) })).toBe(
      `The result is longer than ${cellTextMax} characters.`,
    );
    expect(compileFormula('eval("1")', exists).error).toMatch(/The function "eval" is not available/);
    expect(compileFormula('[1, 2]', exists).error).toBe('Formulas cannot use array expressions.');
    expect(compileFormula('1:10', exists).error).toBe('Formulas cannot use range expressions.');
    expect(compileFormula('x + 1', exists).error).toBe('Unknown name "x": refer to a column as {Column name}.');
  });
});

describe('the closures against mathjs', () => {
  const values: unknown[] = [
    ...[null, '', 'abc', 'Ada', 'ada', '12', ' 7 ', '-3.5', '1e3', '0x1F', 'Infinity', '0.3', 'true'],
    ...[0, 1, -1, 2, -2.5, 0.1 + 0.2, 0.3, 1e21, 1e-7, 7, 1e308, true, false],
    ...[[1, 2], { x: 1 }],
  ];
  const unary = [
    ...['-{a}', '+{a}', 'not {a}', '{a}%', '({a})', '{a} ? "yes" : "no"', 'pi * {a}', 'e + {a}', '{a}'],
    ...formulaFunctions.map((f) => `${f}({a})`),
  ];
  const binary = [
    ...['+', '-', '*', '/', '^', '%', '==', '!=', '<', '>', '<=', '>=', 'and', 'or', 'xor'].map(
      (op) => `{a} ${op} {b}`,
    ),
    ...formulaFunctions.map((f) => `${f}({a}, {b})`),
    ...[
      '{a} ? {b} : {a}',
      '2 {a}',
      'concat({a}, " ", {b} * 2)',
      'not ({a} and {b})',
      'min({a}, {b}, 5)',
      'max(1, {a}, {b})',
    ],
    ...['replace({a}, {b}, "-")', 'coalesce({a}, {b}, 0)', '({a} or {b}) xor true', '-{a} < -{b}', '{a} == {b} + 0'],
  ];

  it('gives the same cell for every function and operator, over a grid of values', () => {
    let compared = 0;
    for (const formula of [...unary, ...binary]) {
      const evaluate = compiledBoth(formula);
      for (const a of values) {
        for (const b of binary.includes(formula) ? values : [null]) {
          const { closures, mathjs } = evaluate({ a, b });
          if (JSON.stringify(closures) !== JSON.stringify(mathjs)) {
            expect(closures, `${formula} with ${JSON.stringify([a, b])}`).toEqual(mathjs);
          }
          compared += 1;
        }
      }
    }
    expect(compared).toBeGreaterThan(40_000);
  });
});
