/**
 * Formula as an enrichment: the formula engine of domain/formula.ts over the column's named
 * inputs (`{price} * {quantity}`), free and local. The engine refers to columns by id, so each
 * input name stands in as a fixed id for the compile; nothing here reads the table.
 */
import { EnrichmentError, type EnrichmentProvider } from '../../domain/tables/enrichments.js';
import { compileFormula, storeFormula } from '../../domain/tables/formula.js';
import { formulaMax, type CellValue } from '../../domain/tables/tables.js';

const idOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

export function formulaProvider(): EnrichmentProvider {
  return {
    info: {
      key: 'formula',
      display_name: 'Formula',
      description:
        'Computes an expression over mapped inputs, written {name}: arithmetic, comparisons, text functions (concat, lower, contains, ...). Free.',
      credentials: 'platform',
      inputs: [],
      named_inputs: true,
      outputs: [{ name: 'result', description: "The formula's value", type: 'text' }],
      options: [
        {
          name: 'formula',
          description: 'The expression, with mapped inputs written as {name}',
          required: true,
          max_length: formulaMax,
        },
      ],
      price_credits: 0,
      concurrency: 16,
      timeout_seconds: 5,
    },
    async run(request) {
      const names = [...request.inputs.keys()];
      const ids = new Map(names.map((name, n) => [name, idOf(n)]));
      const stored = storeFormula(request.options.get('formula') ?? '', (name) => ids.get(name));
      const known = new Set(ids.values());
      const compiled = compileFormula(stored, (id) => known.has(id));
      if (compiled.error) throw new EnrichmentError(compiled.error, false);
      const byId = new Map([...ids].map(([name, id]) => [id, request.inputs.get(name) ?? null]));
      const outcome = compiled.evaluate(compiled.refs.map((id): CellValue => byId.get(id) ?? null));
      if (outcome.state === 'error') throw new EnrichmentError(outcome.error, false);
      if (outcome.value === null || outcome.value === '') return { kind: 'empty', reason: 'The formula gave nothing.' };
      return { kind: 'result', values: { result: outcome.value } };
    },
  };
}
