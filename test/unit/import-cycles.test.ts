/**
 * The shape of the import graph (docs/architecture.md, decision 031), read from the source text
 * alone: no folder-level import cycles (between the top-level folders, and between the area
 * folders `<layer>/<area>/` and the files at a layer's top), nothing outside api/ imports api/
 * except the bootstrap (worker/stack.ts imports api/app.ts), and no route holds SQL. The lint
 * enforces the per-folder rules file by file (test/integration/layers.test.ts); this sees the
 * whole graph.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');
const skipped = new Set(['node_modules', '.tools', '.data', '.git', 'temporal-docker', 'coverage']);

function sourceFiles(dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name.startsWith('.') || skipped.has(entry.name)) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')
      ? [relative(root, path).split(sep).join('/')]
      : [];
  });
}

interface Edge {
  from: string;
  to: string;
  /** `import type`, or every binding type-only: erased from the JavaScript, no load-time edge. */
  typeOnly: boolean;
}

/** Module specifiers of a file, each with whether the import is erased (types only). */
function specifiersOf(text: string): { spec: string; typeOnly: boolean }[] {
  const source = ts.createSourceFile('file.ts', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: { spec: string; typeOnly: boolean }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const allTypes =
        named !== undefined &&
        ts.isNamedImports(named) &&
        named.elements.length > 0 &&
        named.elements.every((e) => e.isTypeOnly);
      const typeOnly = clause !== undefined && (clause.isTypeOnly || (clause.name === undefined && allTypes));
      found.push({ spec: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.exportClause;
      const allTypes =
        clause !== undefined &&
        ts.isNamedExports(clause) &&
        clause.elements.length > 0 &&
        clause.elements.every((e) => e.isTypeOnly);
      found.push({ spec: node.moduleSpecifier.text, typeOnly: node.isTypeOnly || allTypes });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      found.push({ spec: node.arguments[0].text, typeOnly: false });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push({ spec: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every relative import, re-export and dynamic import of the tree, resolved to a project file. */
function importEdges(files: string[]): Edge[] {
  const known = new Set(files);
  return files.flatMap((from) =>
    specifiersOf(readFileSync(join(root, from), 'utf8'))
      .filter(({ spec }) => spec.startsWith('./') || spec.startsWith('../'))
      .map(({ spec, typeOnly }) => ({
        from,
        to: relative(root, resolve(root, dirname(from), spec))
          .split(sep)
          .join('/')
          .replace(/\.js$/, '.ts'),
        typeOnly,
      }))
      .filter((edge) => known.has(edge.to)),
  );
}

/** `api`, `worker`, ...; `.` for a file at the root (vitest.config.ts). */
const topFolder = (file: string) => (file.includes('/') ? file.split('/')[0]! : '.');

/** `store/pnet`, `api/routes/pnet`; a file at a layer's top is a unit of its own (`activities/index.ts`). */
function areaOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'api' && parts[1] === 'routes' && parts.length > 3) return parts.slice(0, 3).join('/');
  return parts.length > 2 ? parts.slice(0, 2).join('/') : file;
}

/** Strongly connected components of more than one node (Tarjan), each with the edges inside it. */
function cycles(edges: Edge[], unit: (file: string) => string): string[] {
  const graph = new Map<string, Map<string, Edge>>();
  for (const edge of edges) {
    const [a, b] = [unit(edge.from), unit(edge.to)];
    if (a === b) continue;
    if (!graph.has(a)) graph.set(a, new Map());
    if (!graph.has(b)) graph.set(b, new Map());
    if (!graph.get(a)!.has(b)) graph.get(a)!.set(b, edge);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!.keys()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) {
        const inside = new Set(component);
        const why = component.flatMap((a) =>
          [...graph.get(a)!].filter(([b]) => inside.has(b)).map(([b, e]) => `${a} -> ${b} (${e.from} imports ${e.to})`),
        );
        found.push(`${component.sort().join(' <-> ')}:\n  ${why.sort().join('\n  ')}`);
      }
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** Where `text` runs a tagged-template query: sql`...`, tx<Row[]>`...`, deps.sql`...`, db`...`. */
function sqlQueries(text: string): string[] {
  const found: string[] = [];
  const tag = /\b(sql|tx|db|conn)\b/g;
  for (let m = tag.exec(text); m; m = tag.exec(text)) {
    let i = m.index + m[0].length;
    while (/\s/.test(text[i] ?? '')) i += 1;
    if (text[i] === '<') {
      // Skip the row type's balanced angle brackets (sql<{ id: string }[]>`...`).
      let depth = 0;
      for (; i < text.length; i += 1) {
        if (text[i] === '<') depth += 1;
        else if (text[i] === '>' && text[i - 1] !== '=') depth -= 1;
        if (depth === 0) break;
      }
      i += 1;
      while (/\s/.test(text[i] ?? '')) i += 1;
    }
    if (text[i] === '`')
      found.push(`${text.slice(0, m.index).split('\n').length}: ${text.slice(m.index, i + 40).split('\n')[0]}`);
  }
  const unsafe = /\b(sql|tx|db|conn)\.unsafe\(/g;
  for (let m = unsafe.exec(text); m; m = unsafe.exec(text))
    found.push(`${text.slice(0, m.index).split('\n').length}: ${m[0]}`);
  return found;
}

const files = sourceFiles();
const edges = importEdges(files);
/**
 * The edges that load code. Type-only imports are left out of the cycle checks: a workflow knows
 * its activities as types (`proxyActivities<typeof activities>`, docs/architecture.md) while the
 * activities start and signal workflows through their contracts, and that is by design.
 */
const loads = edges.filter((e) => !e.typeOnly);

describe('the import graph', () => {
  it('reads the whole tree', () => {
    expect(files).toContain('api/app.ts');
    expect(files).toContain('worker/stack.ts');
    expect(edges).toContainEqual({ from: 'worker/stack.ts', to: 'api/app.ts', typeOnly: false });
    expect(edges.filter((e) => e.typeOnly).length).toBeGreaterThan(10);
  });

  it('has no cycle between the top-level folders (imports that load code)', () => {
    expect(cycles(loads, topFolder)).toEqual([]);
  });

  it('has no cycle between area folders (<layer>/<area>/, api/routes/<area>/, and the files at a layer top)', () => {
    expect(cycles(loads, areaOf)).toEqual([]);
  });

  it('lets nothing outside api/, test/, bench/ and sim/ import api/, except worker/stack.ts importing api/app.ts', () => {
    const outside = edges.filter(
      (e) => e.to.startsWith('api/') && !['api', 'test', 'bench', 'sim'].includes(topFolder(e.from)),
    );
    expect(
      outside
        .filter((e) => !(e.from === 'worker/stack.ts' && e.to === 'api/app.ts'))
        .map((e) => `${e.from} imports ${e.to}`),
    ).toEqual([]);
  });

  it('keeps SQL in store/ and db/: routes, services, activities and the bootstrap call named functions of store/', () => {
    const outside = files.filter((f) => !['store', 'db', 'test', 'bench', 'sim'].includes(topFolder(f)));
    expect(outside.filter((f) => f.startsWith('api/routes/')).length).toBeGreaterThan(10);
    expect(outside.filter((f) => f.startsWith('activities/')).length).toBeGreaterThan(5);
    const queries = outside.flatMap((file) =>
      sqlQueries(readFileSync(join(root, file), 'utf8')).map((q) => `${file}:${q}`),
    );
    expect(queries).toEqual([]);
  });

  it('finds a folder cycle through any files of the folders, and names the imports (the check itself)', () => {
    const e = (from: string, to: string, typeOnly = false): Edge => ({ from, to, typeOnly });
    const found = cycles(
      [e('store/a/x.ts', 'store/b/y.ts'), e('store/b/z.ts', 'store/a/w.ts'), e('store/a/x.ts', 'store/a/w.ts')],
      areaOf,
    );
    expect(found).toEqual([
      'store/a <-> store/b:\n  store/a -> store/b (store/a/x.ts imports store/b/y.ts)\n  store/b -> store/a (store/b/z.ts imports store/a/w.ts)',
    ]);
    expect(cycles([e('store/a/x.ts', 'store/b/y.ts'), e('store/b/z.ts', 'store/c/w.ts')], areaOf)).toEqual([]);
    expect(areaOf('api/routes/pnet/steps.ts')).toBe('api/routes/pnet');
    expect(areaOf('activities/index.ts')).toBe('activities/index.ts');
  });

  it('finds tagged-template queries however they are written (the check itself)', () => {
    expect(sqlQueries('await sql`select 1`')).toHaveLength(1);
    expect(sqlQueries('const [r] = await sql<{ id: string; n: Record<string, number> }[]>`select`')).toHaveLength(1);
    expect(sqlQueries('await deps.sql`select 1`;\nawait tx `update x`')).toHaveLength(2);
    expect(sqlQueries("await db.unsafe('select 1')")).toHaveLength(1);
    expect(sqlQueries('await pingDatabase(deps.sql); const sqlText = `x`; // sql is done by store')).toEqual([]);
  });
});
