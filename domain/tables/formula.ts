/**
 * Formula columns: an expression over the row's other cells, parsed by mathjs and evaluated by
 * closures compiled from its tree ("The row evaluator" below; decision 058), never by `eval`. A
 * person writes column references as `{Column name}` (`\}` and `\\` escape a brace or backslash
 * inside); they are stored by column id (`{<uuid>}`), so renaming a column
 * never rewrites a formula. Only a whitelist of node types and functions is accepted: mathjs can
 * also build matrices and ranges (`1:1e9` would exhaust memory) and define functions, so a
 * formula that uses anything else is refused before it is compiled. Nothing here throws at a
 * caller: a formula that cannot be used, or a row it fails on, is a cell error.
 */
import { createRequire } from 'node:module';
import type { EvalFunction, MathJsInstance, MathNode } from 'mathjs';
import { cellTextMax, displayValue, type CellValue } from './tables.js';

type Builtin = Pick<MathJsInstance, 'equal' | 'larger' | 'smaller' | 'largerEq' | 'smallerEq'>;
type AnyFunction = (...args: unknown[]) => unknown;
interface Language {
  math: MathJsInstance;
  builtin: Builtin;
  /** The namespace mathjs's compiled expressions call (its `min`, `max`, `and`, `or` are transforms). */
  evaluated: Record<string, unknown>;
  relTol: number;
  absTol: number;
}
let language: Language | null = null;

/**
 * The formula language, built on first use: loading mathjs and creating its instance takes 1.5 to
 * 4 s, which every process importing the tables' store (the API, the worker, the operator command
 * line) would otherwise pay at start, whether or not a formula is ever computed.
 */
function formulaLanguage(): Language {
  if (language) return language;
  const { all, create } = createRequire(import.meta.url)('mathjs') as typeof import('mathjs');
  const math = create(all!, { number: 'number' });
  const { relTol, absTol } = (math.config as unknown as () => { relTol: number; absTol: number })();
  // Kept before the spreadsheet's overrides replace them.
  language = {
    math,
    builtin: {
      equal: math.equal.bind(math),
      larger: math.larger.bind(math),
      smaller: math.smaller.bind(math),
      largerEq: math.largerEq.bind(math),
      smallerEq: math.smallerEq.bind(math),
    },
    evaluated: (math as unknown as { expression: { mathWithTransform: Record<string, unknown> } }).expression
      .mathWithTransform,
    relTol,
    absTol,
  };
  math.import(spreadsheetFunctions, { override: true });
  return language;
}
const builtin = () => formulaLanguage().builtin;

const text = (v: unknown) => displayValue(v as CellValue);
const isNullish = (v: unknown) => v === null || v === undefined;
/** Ordering: two texts compare as text; an empty side is never larger or smaller. */
const ordering =
  (name: 'larger' | 'smaller' | 'largerEq' | 'smallerEq', holds: (order: number) => boolean) =>
  (a: unknown, b: unknown) => {
    if (isNullish(a) || isNullish(b)) return false;
    if (typeof a === 'string' && typeof b === 'string') return holds(a < b ? -1 : a > b ? 1 : 0);
    return builtin()[name](a as never, b as never);
  };

/** Empty equals only empty; next to text, a value compares by the text a person sees. */
function equalCells(a: unknown, b: unknown): boolean {
  if (isNullish(a) || isNullish(b)) return isNullish(a) && isNullish(b);
  if (typeof a === 'string' || typeof b === 'string') return text(a) === text(b);
  return Boolean(builtin().equal(a as never, b as never));
}

// Text is compared as text (mathjs would read "Ada" == "Ada" as numbers and fail), and a
// spreadsheet's text helpers are added under their usual names.
const spreadsheetFunctions = {
  equal: (a: unknown, b: unknown) => equalCells(a, b),
  unequal: (a: unknown, b: unknown) => !equalCells(a, b),
  larger: ordering('larger', (o) => o > 0),
  smaller: ordering('smaller', (o) => o < 0),
  largerEq: ordering('largerEq', (o) => o >= 0),
  smallerEq: ordering('smallerEq', (o) => o <= 0),
  concat: (...parts: unknown[]) => parts.map(text).join(''),
  text,
  lower: (v: unknown) => text(v).toLowerCase(),
  upper: (v: unknown) => text(v).toUpperCase(),
  trim: (v: unknown) => text(v).trim(),
  len: (v: unknown) => text(v).length,
  contains: (v: unknown, part: unknown) => text(v).toLowerCase().includes(text(part).toLowerCase()),
  startsWith: (v: unknown, part: unknown) => text(v).toLowerCase().startsWith(text(part).toLowerCase()),
  endsWith: (v: unknown, part: unknown) => text(v).toLowerCase().endsWith(text(part).toLowerCase()),
  left: (v: unknown, n: unknown) => text(v).slice(0, Math.max(0, Number(n))),
  right: (v: unknown, n: unknown) => (Number(n) > 0 ? text(v).slice(-Number(n)) : ''),
  replace: (v: unknown, find: unknown, by: unknown) =>
    text(find) === '' ? text(v) : text(v).split(text(find)).join(text(by)),
  isEmpty: (v: unknown) => isNullish(v) || v === '',
  coalesce: (...values: unknown[]) => values.find((v) => !isNullish(v) && v !== '') ?? null,
};

const allowedFunctions = new Set([
  'abs',
  'ceil',
  'floor',
  'round',
  'fix',
  'sqrt',
  'cbrt',
  'exp',
  'log',
  'log10',
  'log2',
  'pow',
  'mod',
  'sign',
  'min',
  'max',
  'number',
  'string',
  'text',
  'concat',
  'lower',
  'upper',
  'trim',
  'len',
  'contains',
  'startsWith',
  'endsWith',
  'left',
  'right',
  'replace',
  'isEmpty',
  'coalesce',
]);
const allowedOperators = new Set([
  'add',
  'subtract',
  'multiply',
  'divide',
  'unaryMinus',
  'unaryPlus',
  'pow',
  'mod',
  'equal',
  'unequal',
  'smaller',
  'larger',
  'smallerEq',
  'largerEq',
  'and',
  'or',
  'not',
  'xor',
]);
const allowedConstants = new Set(['pi', 'e']);

/** The functions a formula may call, for the column documentation. */
export const formulaFunctions = [...allowedFunctions].sort();

// ---------------------------------------------------------------------------------------------
// References

type Piece = { text: string } | { ref: string };

/** Splits a formula into expression text and `{...}` references, leaving string literals alone. */
function splitReferences(formula: string): Piece[] | { error: string } {
  const pieces: Piece[] = [];
  let textRun = '';
  for (let i = 0; i < formula.length; i += 1) {
    const c = formula[i]!;
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < formula.length && formula[j] !== c) j += formula[j] === '\\' ? 2 : 1;
      textRun += formula.slice(i, j + 1);
      i = j;
    } else if (c === '{') {
      let name = '';
      let j = i + 1;
      for (; j < formula.length && formula[j] !== '}'; j += 1) {
        if (formula[j] === '\\' && j + 1 < formula.length) j += 1;
        name += formula[j];
      }
      if (j >= formula.length)
        return { error: `A column reference opened at character ${i + 1} is never closed with "}".` };
      if (textRun) pieces.push({ text: textRun });
      textRun = '';
      pieces.push({ ref: name });
      i = j;
    } else {
      textRun += c;
    }
  }
  if (textRun) pieces.push({ text: textRun });
  return pieces;
}

const escapeName = (name: string) => name.replace(/[\\}]/g, (c) => `\\${c}`);
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The stored form of a formula a person wrote: each `{Name}` naming a column becomes `{<id>}`;
 * a name no column has is kept as written, and the column reports it.
 */
export function storeFormula(formula: string, idOfName: (name: string) => string | undefined): string {
  const pieces = splitReferences(formula);
  if ('error' in pieces) return formula;
  return pieces.map((p) => ('text' in p ? p.text : `{${idOfName(p.ref.trim()) ?? escapeName(p.ref)}}`)).join('');
}

/** The form a person reads: ids back to the columns' current names. */
export function displayFormula(stored: string, nameOfId: (id: string) => string | undefined): string {
  const pieces = splitReferences(stored);
  if ('error' in pieces) return stored;
  return pieces
    .map((p) =>
      'text' in p ? p.text : `{${escapeName((uuidPattern.test(p.ref) && nameOfId(p.ref.toLowerCase())) || p.ref)}}`,
    )
    .join('');
}

/** Column ids a stored formula refers to (names no column has are left out). */
export function formulaReferences(stored: string): string[] {
  const pieces = splitReferences(stored);
  if ('error' in pieces) return [];
  return [...new Set(pieces.flatMap((p) => ('ref' in p && uuidPattern.test(p.ref) ? [p.ref.toLowerCase()] : [])))];
}

// ---------------------------------------------------------------------------------------------
// Compiling and evaluating

export type FormulaOutcome = { state: 'done'; value: CellValue } | { state: 'error'; error: string };

export interface CompiledFormula {
  /** Column ids read, in the order `evaluate` takes their values. */
  refs: string[];
  /** Why no row can be computed (syntax, an unknown column, a refused function); else null. */
  error: string | null;
  evaluate: (values: CellValue[]) => FormulaOutcome;
}

function refusal(node: MathNode, symbols: Set<string>): string | null {
  switch (node.type) {
    case 'ConstantNode':
      return null;
    case 'SymbolNode': {
      const name = (node as MathNode & { name: string }).name;
      return symbols.has(name) || allowedConstants.has(name)
        ? null
        : `Unknown name "${name}": refer to a column as {Column name}.`;
    }
    case 'ParenthesisNode':
      return refusal((node as MathNode & { content: MathNode }).content, symbols);
    case 'ConditionalNode': {
      const n = node as MathNode & { condition: MathNode; trueExpr: MathNode; falseExpr: MathNode };
      return refusal(n.condition, symbols) ?? refusal(n.trueExpr, symbols) ?? refusal(n.falseExpr, symbols);
    }
    case 'OperatorNode': {
      const n = node as MathNode & { fn: string; op: string; args: MathNode[] };
      if (!allowedOperators.has(n.fn)) return `The operator "${n.op}" is not available in formulas.`;
      return n.args.map((a) => refusal(a, symbols)).find((r) => r !== null) ?? null;
    }
    case 'FunctionNode': {
      const n = node as MathNode & { fn: MathNode & { name?: string }; args: MathNode[] };
      if (n.fn.type !== 'SymbolNode' || !allowedFunctions.has(n.fn.name!)) {
        return `The function "${n.fn.name ?? n.fn.toString()}" is not available in formulas; use one of ${formulaFunctions.join(', ')}.`;
      }
      return n.args.map((a) => refusal(a, symbols)).find((r) => r !== null) ?? null;
    }
    default:
      return `Formulas cannot use ${node.type.replace(/Node$/, '').toLowerCase()} expressions.`;
  }
}

/** A cell value the grid can hold: a finite number, text up to the cell limit, true/false or empty. */
function asCellValue(result: unknown): FormulaOutcome {
  if (result === null || result === undefined) return { state: 'done', value: null };
  if (typeof result === 'boolean') return { state: 'done', value: result };
  if (typeof result === 'number') {
    return Number.isFinite(result)
      ? { state: 'done', value: result }
      : { state: 'error', error: 'The result is not a finite number.' };
  }
  if (typeof result === 'string') {
    return result.length <= cellTextMax
      ? { state: 'done', value: result }
      : { state: 'error', error: `The result is longer than ${cellTextMax} characters.` };
  }
  return { state: 'error', error: 'The result is not a number, text or true/false.' };
}

const brief = (message: string) => (message.length > 500 ? `${message.slice(0, 497)}...` : message);

// ---------------------------------------------------------------------------------------------
// The row evaluator: each whitelisted node compiled once into a closure over the row's values.
// mathjs's own evaluation pays, on every row, a scope map and a typed-function dispatch per
// operator (with a string-to-number conversion for imported text), and recompiles the operands of
// `and`/`or`. The closures take the common operands (numbers, true/false, numeric text) straight
// to the arithmetic mathjs applies to them; any other operand goes to the very function mathjs
// would call, so results and error messages stay mathjs's (test/unit/formula-functions.test.ts
// compares both evaluations).

type Evaluator = (values: readonly unknown[]) => unknown;

/** An operand as mathjs converts it to a number (core/function/typed.js); undefined: leave it to mathjs. */
function numeric(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return +v;
  if (typeof v === 'string') {
    const n = Number(v);
    return Number.isNaN(n) ? undefined : n;
  }
  return undefined;
}

/** mathjs's `nearlyEqual` (utils/number.js) with the instance's tolerances: how it compares numbers. */
function nearlyEqual(a: number, b: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return false;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return a === b;
  if (a === b) return true;
  const { relTol, absTol } = formulaLanguage();
  return Math.abs(a - b) <= Math.max(relTol * Math.max(Math.abs(a), Math.abs(b)), absTol);
}

const arithmetic: Record<string, (x: number, y: number) => number> = {
  add: (x, y) => x + y,
  subtract: (x, y) => x - y,
  multiply: (x, y) => x * y,
  divide: (x, y) => x / y,
};
/** Two numbers compared as mathjs's relational functions compare them. */
const numberComparison: Record<string, (x: number, y: number) => boolean> = {
  equal: (x, y) => nearlyEqual(x, y),
  unequal: (x, y) => !nearlyEqual(x, y),
  larger: (x, y) => x > y && !nearlyEqual(x, y),
  smaller: (x, y) => x < y && !nearlyEqual(x, y),
  largerEq: (x, y) => x >= y || nearlyEqual(x, y),
  smallerEq: (x, y) => x <= y || nearlyEqual(x, y),
};
const isLogical = (v: unknown): v is number | boolean => typeof v === 'number' || typeof v === 'boolean';

/** The condition test of mathjs's ConditionalNode (expression/node/ConditionalNode.js). */
function testCondition(condition: unknown): boolean {
  if (typeof condition === 'number' || typeof condition === 'boolean' || typeof condition === 'string') {
    return Boolean(condition);
  }
  const { math } = formulaLanguage();
  if (condition) {
    if (math.isBigNumber(condition)) return !condition.isZero();
    if (math.isComplex(condition)) return Boolean(condition.re || condition.im);
    if (math.isUnit(condition)) return Boolean((condition as unknown as { value: unknown }).value);
  }
  if (condition === null || condition === undefined) return false;
  throw new TypeError(`Unsupported type of condition "${math.typeOf(condition)}"`);
}

/** Compiles a node `refusal` accepted; `ref_<i>` reads the row's i-th value. */
function compileNode(node: MathNode): Evaluator {
  const { evaluated } = formulaLanguage();
  const call = (name: string) => evaluated[name] as AnyFunction;
  switch (node.type) {
    case 'ConstantNode': {
      const value = (node as MathNode & { value: unknown }).value;
      return () => value;
    }
    case 'SymbolNode': {
      const name = (node as MathNode & { name: string }).name;
      if (name.startsWith('ref_')) {
        const index = Number(name.slice(4));
        return (values) => values[index];
      }
      const value = evaluated[name];
      return () => value;
    }
    case 'ParenthesisNode':
      return compileNode((node as MathNode & { content: MathNode }).content);
    case 'ConditionalNode': {
      const n = node as MathNode & { condition: MathNode; trueExpr: MathNode; falseExpr: MathNode };
      const [condition, whenTrue, whenFalse] = [
        compileNode(n.condition),
        compileNode(n.trueExpr),
        compileNode(n.falseExpr),
      ];
      return (values) => (testCondition(condition(values)) ? whenTrue(values) : whenFalse(values));
    }
    case 'OperatorNode':
      return compileOperator(node as MathNode & { fn: string; args: MathNode[] });
    case 'FunctionNode': {
      const n = node as MathNode & { fn: MathNode & { name: string }; args: MathNode[] };
      return compileCall(call(n.fn.name), n.args.map(compileNode));
    }
    default:
      throw new Error(`Formulas cannot use ${node.type.replace(/Node$/, '').toLowerCase()} expressions.`);
  }
}

/** A call with the arguments evaluated left to right, as mathjs's FunctionNode and OperatorNode make it. */
function compileCall(fn: AnyFunction, args: Evaluator[]): Evaluator {
  const [a, b] = args;
  switch (args.length) {
    case 0:
      return () => fn();
    case 1:
      return (values) => fn(a!(values));
    case 2:
      return (values) => fn(a!(values), b!(values));
    default:
      return (values) => fn(...args.map((arg) => arg(values)));
  }
}

function compileOperator(node: MathNode & { fn: string; args: MathNode[] }): Evaluator {
  const { evaluated, math } = formulaLanguage();
  const name = node.fn;
  const fn = evaluated[name] as AnyFunction;
  const args = node.args.map(compileNode);
  const [a, b] = args as [Evaluator, Evaluator];
  if (args.length === 2 && arithmetic[name]) {
    const op = arithmetic[name];
    return (values) => {
      const x = a(values);
      const y = b(values);
      const nx = numeric(x);
      const ny = numeric(y);
      return nx !== undefined && ny !== undefined ? op(nx, ny) : fn(x, y);
    };
  }
  if (args.length === 2 && numberComparison[name]) {
    const compare = numberComparison[name];
    return (values) => {
      const x = a(values);
      const y = b(values);
      return typeof x === 'number' && typeof y === 'number' ? compare(x, y) : fn(x, y);
    };
  }
  if (args.length === 1 && (name === 'unaryMinus' || name === 'unaryPlus' || name === 'not')) {
    const op = name === 'unaryMinus' ? (x: number) => -x : name === 'unaryPlus' ? (x: number) => x : (x: number) => !x;
    return (values) => {
      const x = a(values);
      return typeof x === 'number' ? op(x) : fn(x);
    };
  }
  if (args.length === 2 && name === 'xor') {
    return (values) => {
      const x = a(values);
      const y = b(values);
      return isLogical(x) && isLogical(y) ? !x !== !y : fn(x, y);
    };
  }
  if (args.length === 2 && (name === 'and' || name === 'or')) {
    // mathjs's and/or transforms (expression/transform/and.transform.js, or.transform.js): the
    // right side is evaluated only when the left does not decide.
    const plain = (math as unknown as Record<string, AnyFunction>)[name]!;
    const decided = name === 'or';
    return (values) => {
      const x = a(values);
      if (isLogical(x)) {
        if (Boolean(x) === decided) return decided;
      } else if (!math.isCollection(x) && Boolean(plain(x, !decided)) === decided) {
        return decided;
      }
      const y = b(values);
      return isLogical(x) && isLogical(y) ? Boolean(y) : plain(x, y);
    };
  }
  return compileCall(fn, args);
}

/**
 * Compiles a stored formula; `columnExists` says which referenced ids are columns of the table.
 * `engine`: 'mathjs' evaluates with mathjs's compiled expression instead, for tests only.
 */
export function compileFormula(
  stored: string,
  columnExists: (id: string) => boolean,
  engine: 'closures' | 'mathjs' = 'closures',
): CompiledFormula {
  const failed = (error: string): CompiledFormula => ({ refs: [], error, evaluate: () => ({ state: 'error', error }) });
  const pieces = splitReferences(stored);
  if ('error' in pieces) return failed(pieces.error);
  const refs: string[] = [];
  let expression = '';
  for (const piece of pieces) {
    if ('text' in piece) {
      expression += piece.text;
      continue;
    }
    const id = piece.ref.toLowerCase();
    if (!uuidPattern.test(id) || !columnExists(id)) return failed(`No column named "${piece.ref}".`);
    if (!refs.includes(id)) refs.push(id);
    expression += ` ref_${refs.indexOf(id)} `;
  }
  if (expression.trim() === '') return failed('The formula is empty.');
  let node: MathNode;
  try {
    node = formulaLanguage().math.parse(expression);
  } catch (error) {
    return failed(brief(`The formula cannot be read: ${(error as Error).message}`));
  }
  const symbols = new Set(refs.map((_, i) => `ref_${i}`));
  const refused = refusal(node, symbols);
  if (refused) return failed(refused);
  let code: Evaluator;
  try {
    code = engine === 'mathjs' ? mathjsEvaluator(node, refs.length) : compileNode(node);
  } catch (error) {
    return failed(brief(`The formula cannot be read: ${(error as Error).message}`));
  }
  return {
    refs,
    error: null,
    evaluate(values) {
      try {
        return asCellValue(code(values));
      } catch (error) {
        return { state: 'error', error: brief((error as Error).message) };
      }
    },
  };
}

/** mathjs's own compiled evaluation, which the closures replaced: kept as the reference the tests compare with. */
function mathjsEvaluator(node: MathNode, refCount: number): Evaluator {
  const code: EvalFunction = node.compile();
  const names = Array.from({ length: refCount }, (_, i) => `ref_${i}`);
  return (values) => {
    const scope: Record<string, unknown> = {};
    for (let i = 0; i < values.length; i += 1) scope[names[i]!] = values[i];
    return code.evaluate(scope) as unknown;
  };
}

// ---------------------------------------------------------------------------------------------
// A table's formulas together: the order to compute them in, and what each row gets

export interface PlannedColumn {
  id: string;
  name: string;
  /** Computed kinds other than formula are read from their stored cells. */
  kind: string;
  /** The stored formula of a formula column; null otherwise. */
  formula: string | null;
}

export interface FormulaPlan {
  /** Formula columns in an order where each comes after every formula it reads. */
  order: { id: string; compiled: CompiledFormula }[];
  /** Why a formula column cannot be computed for any row (its compile error, or a loop). */
  errors: Map<string, string>;
  names: Map<string, string>;
}

export function planFormulas(columns: PlannedColumn[]): FormulaPlan {
  const ids = new Set(columns.map((c) => c.id));
  const names = new Map(columns.map((c) => [c.id, c.name]));
  const compiled = new Map(
    columns
      .filter((c) => c.kind === 'formula')
      .map((c) => [c.id, compileFormula(c.formula ?? '', (id) => ids.has(id))]),
  );
  const errors = new Map<string, string>();
  for (const [id, c] of compiled) if (c.error) errors.set(id, c.error);

  // Depth-first: a formula reached again while its own references are being followed is a loop.
  const order: FormulaPlan['order'] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (id: string, trail: string[]) => {
    if (state.get(id) === 'done') return;
    if (state.get(id) === 'visiting') {
      const loop = trail.slice(trail.indexOf(id)).concat(id);
      const message = `Circular reference: ${loop.map((c) => `{${names.get(c)}}`).join(' → ')}.`;
      for (const member of loop) if (!errors.has(member)) errors.set(member, message);
      return;
    }
    state.set(id, 'visiting');
    for (const ref of compiled.get(id)!.refs) if (compiled.has(ref)) visit(ref, [...trail, id]);
    state.set(id, 'done');
    order.push({ id, compiled: compiled.get(id)! });
  };
  for (const id of compiled.keys()) visit(id, []);
  return { order, errors, names };
}

/**
 * Every formula cell of one row. `read` gives the value of an input or other computed column
 * (null when empty or not done). A formula reading a formula cell in error is in error too.
 */
export function evaluateRow(plan: FormulaPlan, read: (columnId: string) => CellValue): Map<string, FormulaOutcome> {
  const outcomes = new Map<string, FormulaOutcome>();
  for (const { id, compiled } of plan.order) {
    const planned = plan.errors.get(id);
    if (planned) {
      outcomes.set(id, { state: 'error', error: planned });
      continue;
    }
    let failed: string | undefined;
    const values = compiled.refs.map((ref) => {
      const outcome = outcomes.get(ref);
      if (!outcome) return read(ref);
      if (outcome.state === 'error') failed ??= ref;
      return outcome.state === 'done' ? outcome.value : null;
    });
    outcomes.set(
      id,
      failed ? { state: 'error', error: `{${plan.names.get(failed)}} has an error.` } : compiled.evaluate(values),
    );
  }
  return outcomes;
}

/**
 * The part of a plan that computes these formula columns: them and the formulas they read, in
 * the same order. A pass over one column then evaluates no unrelated formula.
 */
export function planFor(plan: FormulaPlan, wanted: Iterable<string>): FormulaPlan {
  const refs = new Map(plan.order.map((f) => [f.id, f.compiled.refs]));
  const needed = new Set<string>();
  const visit = (id: string) => {
    if (needed.has(id)) return;
    needed.add(id);
    for (const ref of refs.get(id) ?? []) visit(ref);
  };
  for (const id of wanted) visit(id);
  return { ...plan, order: plan.order.filter((f) => needed.has(f.id)) };
}

/** The formula columns that must be computed again when these columns change (themselves included). */
export function dependentsOf(plan: FormulaPlan, changed: Iterable<string>): Set<string> {
  const affected = new Set(changed);
  for (const { id, compiled } of plan.order) {
    if (compiled.refs.some((ref) => affected.has(ref))) affected.add(id);
  }
  return affected;
}
